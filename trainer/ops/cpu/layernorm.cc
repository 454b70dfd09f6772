// LayerNorm forward and backward.
#include <cmath>
#include <vector>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                      int N, int C, float eps) {
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
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel
  {
    // Each thread sums its rows' weight and bias gradients privately, then adds them once.
    std::vector<float> dw(C, 0.0f), db(C, 0.0f);
#pragma omp for
    for (int n = 0; n < N; ++n) {
      const float* x = inp + int64_t{n} * C;
      const float* d = dout + int64_t{n} * C;
      float* dx = dinp + int64_t{n} * C;
      const float m = mean[n], s = rstd[n];
      float dnorm_mean = 0, dnorm_norm_mean = 0;
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = weight[c] * d[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * norm;
      }
      dnorm_mean /= C;
      dnorm_norm_mean /= C;
      for (int c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        const float dnorm = weight[c] * d[c];
        db[c] += d[c];
        dw[c] += norm * d[c];
        dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
    }
#pragma omp critical
    for (int c = 0; c < C; ++c) {
      dweight[c] += dw[c];
      dbias[c] += db[c];
    }
  }
}

}  // namespace srunway::trainer::cpu
