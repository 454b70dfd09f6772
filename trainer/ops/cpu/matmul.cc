// Linear layers through BLAS (OpenBLAS): the forward and both gradients are single sgemm calls.
#include <cblas.h>

#include <vector>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void MatmulForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, 0.0f, out, OC);
  if (bias == nullptr) return;
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    float* o = out + int64_t{n} * OC;
    for (int oc = 0; oc < OC; ++oc) o[oc] += bias[oc];
  }
}

void MatmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC) {
  // dinp[N, C] += dout[N, OC] @ weight[OC, C]; dweight[OC, C] += dout^T @ inp.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias == nullptr) return;
#pragma omp parallel
  {
    std::vector<float> db(OC, 0.0f);
#pragma omp for
    for (int n = 0; n < N; ++n) {
      const float* d = dout + int64_t{n} * OC;
      for (int oc = 0; oc < OC; ++oc) db[oc] += d[oc];
    }
#pragma omp critical
    for (int oc = 0; oc < OC; ++oc) dbias[oc] += db[oc];
  }
}

}  // namespace srunway::trainer::cpu
