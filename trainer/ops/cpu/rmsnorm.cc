// RMSNorm forward and backward (Llama).
#include <cmath>
#include <vector>

#include "trainer/ops/cpu/ops.h"
#include "trainer/ops/cpu/ordered_sum.h"

namespace srunway::trainer::cpu {

void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                    float weight_offset) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const float* x = inp + int64_t{n} * C;
    double sum_sq = 0;
    for (int c = 0; c < C; ++c) sum_sq += static_cast<double>(x[c]) * x[c];
    const float s = static_cast<float>(1.0 / std::sqrt(sum_sq / C + eps));
    float* o = out + int64_t{n} * C;
    for (int c = 0; c < C; ++c) o[c] = x[c] * s * (weight[c] + weight_offset);
    rstd[n] = s;
  }
}

void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                     const float* rstd, int N, int C, float weight_offset) {
  const std::vector<float> sums = OrderedRowSums<float>(N, C, [&](int64_t n, float* dw) {
    const float* x = inp + int64_t{n} * C;
    const float* d = dout + int64_t{n} * C;
    float* dx = dinp + int64_t{n} * C;
    const float s = rstd[n];
    // y = x * s * w (w the weight plus its offset) with s = (mean(x^2) + eps)^-1/2, so
    // dx = s * (w*d) - x * s^3 * mean(w*d*x).
    float dot = 0;
    for (int c = 0; c < C; ++c) dot += (weight[c] + weight_offset) * d[c] * x[c];
    dot /= C;
    for (int c = 0; c < C; ++c) {
      dw[c] += x[c] * s * d[c];
      dx[c] += s * (weight[c] + weight_offset) * d[c] - x[c] * s * s * s * dot;
    }
  });
  for (int c = 0; c < C; ++c) dweight[c] += sums[static_cast<size_t>(c)];
}

}  // namespace srunway::trainer::cpu
