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
  // Updates the elements of `owned` (every parameter when empty) and keeps both moments for those alone, packed
  // in the order of `owned`: under ZeRO-1 each rank owns its slices of the buffer.
  AdamW(const ParamLayout& layout, const AdamWConfig& config, std::vector<ParamRange> owned = {});

  // One update of the owned elements with learning rate lr; `step` counts updates from 1 (bias correction).
  // `params` and `grads` are the whole buffers.
  void Step(std::span<float> params, std::span<const float> grads, float lr, int64_t step);

  const std::vector<ParamRange>& owned() const { return owned_; }
  // First and second moments of the owned elements, packed (the whole buffer's when everything is owned).
  std::span<float> m() { return m_; }
  std::span<float> v() { return v_; }
  std::span<const float> m() const { return m_; }
  std::span<const float> v() const { return v_; }

 private:
  struct Segment {  // a run of owned elements inside one tensor
    int64_t begin, end;  // in the buffer
    int64_t state;       // where its moments start in m_ and v_
    bool decay;
  };
  AdamWConfig config_;
  std::vector<ParamRange> owned_;
  std::vector<Segment> segments_;
  std::vector<float> m_, v_;
};

}  // namespace srunway::trainer
