// AdamW update, element by element in the order of torch.optim.AdamW's single-tensor path.
#include "trainer/optim/adamw.h"

#include <algorithm>
#include <cmath>

namespace srunway::trainer {

AdamW::AdamW(const ParamLayout& layout, const AdamWConfig& config, std::vector<ParamRange> owned)
    : config_(config), owned_(std::move(owned)) {
  if (owned_.empty()) owned_ = {{0, layout.numel()}};
  int64_t state = 0;
  for (const ParamRange& range : owned_) {
    for (const TensorSpec& spec : layout.tensors()) {
      const int64_t begin = std::max(range.offset, spec.offset);
      const int64_t end = std::min(range.offset + range.count, spec.offset + spec.numel);
      if (begin < end) segments_.push_back({begin, end, state + (begin - range.offset), spec.decay});
    }
    state += range.count;
  }
  m_.assign(static_cast<size_t>(state), 0.0f);
  v_.assign(static_cast<size_t>(state), 0.0f);
}

void AdamW::Step(std::span<float> params, std::span<const float> grads, float lr, int64_t step) {
  const float b1 = config_.beta1, b2 = config_.beta2;
  const double bias1 = 1.0 - std::pow(static_cast<double>(b1), static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(b2), static_cast<double>(step));
  const float step_size = static_cast<float>(lr / bias1);
  const float bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  for (const Segment& segment : segments_) {
    const float decay = segment.decay ? 1.0f - lr * config_.weight_decay : 1.0f;
    float* m = m_.data() + segment.state;
    float* v = v_.data() + segment.state;
    const int64_t n = segment.end - segment.begin;
    float* p = params.data() + segment.begin;
    const float* g = grads.data() + segment.begin;
#pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
      p[i] *= decay;
      m[i] = m[i] + (g[i] - m[i]) * (1.0f - b1);  // torch: exp_avg.lerp_(grad, 1 - beta1)
      v[i] = v[i] * b2 + (1.0f - b2) * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / bias2_sqrt + config_.eps;
      p[i] -= step_size * m[i] / denom;
    }
  }
}

}  // namespace srunway::trainer
