// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#include <cmath>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

void GeluForward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
}

void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float th = std::tanh(u);
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dinp[i] = grad * dout[i];
  }
}

}  // namespace srunway::trainer::cpu
