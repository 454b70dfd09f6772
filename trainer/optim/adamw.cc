// AdamW update, element by element in the order of torch.optim.AdamW's single-tensor path.
#include "trainer/optim/adamw.h"

#include <cmath>

namespace srunway::trainer {

AdamW::AdamW(const ParamLayout& layout, const AdamWConfig& config)
    : config_(config), m_(layout.numel(), 0.0f), v_(layout.numel(), 0.0f) {
  for (const TensorSpec& spec : layout.tensors()) ranges_.push_back({spec.offset, spec.offset + spec.numel, spec.decay});
}

void AdamW::Step(std::span<float> params, std::span<const float> grads, float lr, int64_t step) {
  const float b1 = config_.beta1, b2 = config_.beta2;
  const double bias1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step));
  const float step_size = static_cast<float>(lr / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  for (const Range& range : ranges_) {
    const float decay = range.decay ? 1.0f - lr * config_.weight_decay : 1.0f;
#pragma omp parallel for simd
    for (int64_t i = range.begin; i < range.end; ++i) {
      const float g = grads[i];
      params[i] *= decay;
      m_[i] = m_[i] + (g - m_[i]) * (1.0f - b1);  // torch: exp_avg.lerp_(grad, 1 - beta1)
      v_[i] = v_[i] * b2 + (1.0f - b2) * g * g;
      const float denom = std::sqrt(v_[i]) / bias2_sqrt + config_.eps;
      params[i] -= step_size * m_[i] / denom;
    }
  }
}

}  // namespace srunway::trainer
