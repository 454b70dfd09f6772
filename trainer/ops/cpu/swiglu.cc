// SwiGLU (Llama's FFN activation) and the other gated activations of ops/glu.h: act(gate) * (up + offset), gate
// and up side by side in one row.
#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void SwigluForward(float* out, const float* inp, int N, int F, const Glu& glu) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + int64_t{n} * 2 * F;
    const float* up = gate + F;
    float* o = out + int64_t{n} * F;
    for (int f = 0; f < F; ++f) o[f] = GluForward(glu, gate[f], up[f]);
  }
}

void SwigluBackward(float* dinp, const float* inp, const float* dout, int N, int F, const Glu& glu) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + int64_t{n} * 2 * F;
    const float* up = gate + F;
    const float* d = dout + int64_t{n} * F;
    float* dgate = dinp + int64_t{n} * 2 * F;
    float* dup = dgate + F;
    for (int f = 0; f < F; ++f) GluBackward(glu, gate[f], up[f], d[f], dgate[f], dup[f]);
  }
}

}  // namespace srunway::trainer::cpu
