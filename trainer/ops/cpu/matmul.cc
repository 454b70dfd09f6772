// Linear layers through BLAS (OpenBLAS): the forward and both gradients are sgemm calls over fixed row blocks.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "trainer/ops/cpu/ops.h"
#include "trainer/ops/cpu/ordered_sum.h"

namespace srunway::trainer::cpu {
namespace {

// OpenBLAS's own threads split a product differently for each thread count, and its results change with the
// split. Here the rows go in fixed blocks, each a single-threaded sgemm (the trainer runs OpenBLAS with one
// thread) on whichever OpenMP thread takes it: the same bits for any OMP_NUM_THREADS.
constexpr int kGemmRows = 256;

template <typename Fn>
void ForRowBlocks(int rows, Fn&& fn) {
  const int blocks = (rows + kGemmRows - 1) / kGemmRows;
#pragma omp parallel for schedule(dynamic)
  for (int block = 0; block < blocks; ++block) {
    const int first = block * kGemmRows;
    fn(first, std::min(kGemmRows, rows - first));
  }
}

}  // namespace

void MatmulForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  ForRowBlocks(N, [&](int first, int rows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, OC, C, 1.0f, inp + int64_t{first} * C, C, weight, C,
                0.0f, out + int64_t{first} * OC, OC);
  });
  if (bias == nullptr) return;
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    float* o = out + int64_t{n} * OC;
    for (int oc = 0; oc < OC; ++oc) o[oc] += bias[oc];
  }
}

void MatmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC, bool write_dweight) {
  // dinp[N, C] = dout[N, OC] @ weight[OC, C]; dweight[OC, C] += dout^T @ inp (= with write_dweight), by blocks of
  // its OC rows, each summing over all N tokens.
  ForRowBlocks(N, [&](int first, int rows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, C, OC, 1.0f, dout + int64_t{first} * OC, OC, weight,
                C, 0.0f, dinp + int64_t{first} * C, C);
  });
  ForRowBlocks(OC, [&](int first, int rows) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, C, N, 1.0f, dout + first, OC, inp, C,
                write_dweight ? 0.0f : 1.0f, dweight + int64_t{first} * C, C);
  });
  if (dbias != nullptr) BiasBackward(dbias, dout, N, OC);
}

void BiasBackward(float* dbias, const float* dout, int N, int OC) {
  const std::vector<float> db = OrderedRowSums<float>(N, OC, [&](int64_t n, float* sum) {
    const float* d = dout + n * OC;
    for (int oc = 0; oc < OC; ++oc) sum[oc] += d[oc];
  });
  for (int oc = 0; oc < OC; ++oc) dbias[oc] += db[static_cast<size_t>(oc)];
}

}  // namespace srunway::trainer::cpu
