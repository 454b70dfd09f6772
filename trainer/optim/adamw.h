// AdamW as PyTorch's torch.optim.AdamW computes it, with no weight decay on norms and biases.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/model/params.h"

namespace srunway::trainer {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
};

class AdamW {
 public:
  AdamW(const ParamLayout& layout, const AdamWConfig& config);

  // One update with learning rate lr; `step` counts updates from 1 (bias correction).
  void Step(std::span<float> params, std::span<const float> grads, float lr, int64_t step);

  // First and second moments, for checkpoints.
  std::span<float> m() { return m_; }
  std::span<float> v() { return v_; }
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }

 private:
  struct Range {
    int64_t begin, end;
    bool decay;
  };
  AdamWConfig config_;
  std::vector<Range> ranges_;
  std::vector<float> m_, v_;
};

}  // namespace srunway::trainer
