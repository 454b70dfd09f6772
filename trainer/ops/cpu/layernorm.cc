// LayerNorm forward and backward.
#include <cmath>
#include <vector>

#include "trainer/ops/cpu/ops.h"
#include "trainer/ops/cpu/ordered_sum.h"

namespace srunway::trainer::cpu {

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                      int N, int C, float eps, float weight_offset) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const float* x = inp + int64_t{n} * C;
    double sum = 0;
    for (int c = 0; c < C; ++c) sum += x[c];
    const float m = static_cast<float>(sum / C);
    double var = 0;
    for (int c = 0; c < C; ++c) var += double(x[c] - m) * (x[c] - m);
    const float s = static_cast<float>(1.0 / std::sqrt(var / C + eps));
    float* o = out + int64_t{n} * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * (weight[c] + weight_offset) + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int N, int C, float weight_offset) {
  // The weight and bias gradients side by side in one row of 2C sums: [dweight | dbias].
  const std::vector<float> sums = OrderedRowSums<float>(N, 2 * int64_t{C}, [&](int64_t n, float* dw) {
    float* db = dw + C;
    const float* x = inp + int64_t{n} * C;
    const float* d = dout + int64_t{n} * C;
    float* dx = dinp + int64_t{n} * C;
    const float m = mean[n], s = rstd[n];
    float dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const float norm = (x[c] - m) * s;
      const float dnorm = (weight[c] + weight_offset) * d[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int c = 0; c < C; ++c) {
      const float norm = (x[c] - m) * s;
      const float dnorm = (weight[c] + weight_offset) * d[c];
      db[c] += d[c];
      dw[c] += norm * d[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  });
  for (int c = 0; c < C; ++c) {
    dweight[c] += sums[static_cast<size_t>(c)];
    dbias[c] += sums[static_cast<size_t>(C + c)];
  }
}

}  // namespace srunway::trainer::cpu
