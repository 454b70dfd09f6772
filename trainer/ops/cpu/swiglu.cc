// SwiGLU (Llama's FFN activation): silu(gate) * up, gate and up side by side in one row.
#include <cmath>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void SwigluForward(float* out, const float* inp, int N, int F) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + int64_t{n} * 2 * F;
    const float* up = gate + F;
    float* o = out + int64_t{n} * F;
    for (int f = 0; f < F; ++f) {
      const float sig = 1.0f / (1.0f + std::exp(-gate[f]));
      o[f] = gate[f] * sig * up[f];
    }
  }
}

void SwigluBackward(float* dinp, const float* inp, const float* dout, int N, int F) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    const float* gate = inp + int64_t{n} * 2 * F;
    const float* up = gate + F;
    const float* d = dout + int64_t{n} * F;
    float* dgate = dinp + int64_t{n} * 2 * F;
    float* dup = dgate + F;
    for (int f = 0; f < F; ++f) {
      const float sig = 1.0f / (1.0f + std::exp(-gate[f]));
      const float silu = gate[f] * sig;
      dgate[f] = d[f] * up[f] * sig * (1.0f + gate[f] * (1.0f - sig));
      dup[f] = d[f] * silu;
    }
  }
}

}  // namespace srunway::trainer::cpu
