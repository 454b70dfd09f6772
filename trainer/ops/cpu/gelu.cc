// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#include "trainer/ops/cpu/ops.h"
#include "trainer/ops/glu.h"

namespace srunway::trainer::cpu {

void GeluForward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = GeluTanh(inp[i]);
}

void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) dinp[i] = GeluTanhGrad(inp[i]) * dout[i];
}

}  // namespace srunway::trainer::cpu
