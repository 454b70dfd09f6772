// AdamW, element by element in the order of torch.optim.AdamW's single-tensor path.
#include <cmath>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void AdamWUpdate(float* p, const float* g, float* m, float* v, int64_t n, const AdamWArgs& args) {
  const float b1 = args.beta1, b2 = args.beta2;
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    const float grad = g[i] * args.grad_scale;
    p[i] *= args.decay;
    m[i] = m[i] + (grad - m[i]) * (1.0f - b1);  // torch: exp_avg.lerp_(grad, 1 - beta1)
    v[i] = v[i] * b2 + (1.0f - b2) * grad * grad;
    const float denom = std::sqrt(v[i]) / args.bias2_sqrt + args.eps;
    p[i] -= args.step_size * m[i] / denom;
  }
}

}  // namespace srunway::trainer::cpu
