// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); exact: 0.5 x (1 + erf(x / sqrt(2))).
#include "trainer/ops/cpu/ops.h"
#include "trainer/ops/glu.h"

namespace srunway::trainer::cpu {
namespace {

template <float (*kGelu)(float)>
void Forward(float* out, const float* inp, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = kGelu(inp[i]);
}

template <float (*kGrad)(float)>
void Backward(float* dinp, const float* inp, const float* dout, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) dinp[i] = kGrad(inp[i]) * dout[i];
}

}  // namespace

void GeluForward(float* out, const float* inp, int64_t n) { Forward<GeluTanh>(out, inp, n); }
void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
  Backward<GeluTanhGrad>(dinp, inp, dout, n);
}
void GeluErfForward(float* out, const float* inp, int64_t n) { Forward<GeluErf>(out, inp, n); }
void GeluErfBackward(float* dinp, const float* inp, const float* dout, int64_t n) {
  Backward<GeluErfGrad>(dinp, inp, dout, n);
}

}  // namespace srunway::trainer::cpu
