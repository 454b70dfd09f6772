// Squared ReLU, relu(x)^2 (Primer's; Megatron's --squared-relu, Nemotron's FFN; Hugging Face's relu2).
#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void SquaredReluForward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    const float x = inp[i] > 0.0f ? inp[i] : 0.0f;
    out[i] = x * x;
  }
}

void SquaredReluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) dinp[i] = inp[i] > 0.0f ? 2.0f * inp[i] * dout[i] : 0.0f;
}

}  // namespace srunway::trainer::cpu
