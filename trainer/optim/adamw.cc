// AdamW's bookkeeping: which runs of the buffer this rank owns, with or without weight decay, at which of the
// step's rates, and where their moments are; the arithmetic is the ops table's (ops/cpu/adamw.cc on the host).
#include "trainer/optim/adamw.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace srunway::trainer {
AdamW::AdamW(const ParamLayout& layout, const AdamWConfig& config, std::vector<ParamRange> owned, Device* device,
             Ops* ops)
    : config_(config), numel_(layout.numel()), owned_(std::move(owned)), placement_(device, ops),
      ops_(&placement_.ops()) {
  if (owned_.empty()) owned_ = {{0, layout.numel()}};
  int64_t state = 0;
  for (const ParamRange& range : owned_) {
    for (const TensorSpec& spec : layout.tensors()) {
      const int64_t begin = std::max(range.offset, spec.offset);
      const int64_t end = std::min(range.offset + range.count, spec.offset + spec.numel);
      if (begin >= end) continue;
      const int64_t at = state + (begin - range.offset);
      const bool decay = spec.decay && (config_.decay_embeddings || !IsEmbeddingTable(spec.name));
      // A tensor that follows the last run in the buffer and in the moments, with the same decay and rate, extends
      // it: one update per run (GPT-2's norms and biases sit side by side), not per tensor.
      if (!segments_.empty()) {
        Segment& last = segments_.back();
        if (last.end == begin && last.state + (last.end - last.begin) == at && last.decay == decay &&
            last.embedding_or_output == spec.embedding_or_output) {
          last.end = end;
          continue;
        }
      }
      segments_.push_back({begin, end, at, decay, spec.embedding_or_output});
    }
    state += range.count;
  }
  m_ = ZeroedOrThrow(placement_.device(), DType::kFloat32, static_cast<size_t>(state));
  v_ = ZeroedOrThrow(placement_.device(), DType::kFloat32, static_cast<size_t>(state));
}

void AdamW::Step(std::span<float> params, std::span<const float> grads, StepRates rates, int64_t step,
                 float grad_scale, void* weights) {
  const double bias1 = 1.0 - std::pow(static_cast<double>(config_.beta1), static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(static_cast<double>(config_.beta2), static_cast<double>(step));
  cpu::AdamWArgs args;
  args.beta1 = config_.beta1;
  args.beta2 = config_.beta2;
  args.eps = config_.eps;
  args.bias2_sqrt = static_cast<float>(std::sqrt(bias2));
  args.grad_scale = grad_scale;
  const size_t weight_size = DTypeSize(ops_->act_dtype());
  const bool packed = static_cast<int64_t>(params.size()) != numel_;
  assert(!packed || params.size() == m_.count());
  for (const Segment& segment : segments_) {
    const float lr = segment.embedding_or_output ? rates.embedding_or_output : rates.lr;
    args.step_size = static_cast<float>(lr / bias1);
    args.decay = segment.decay ? 1.0f - lr * config_.weight_decay : 1.0f;
    void* w = weights != nullptr ? static_cast<std::byte*>(weights) + segment.begin * static_cast<int64_t>(weight_size)
                                 : nullptr;
    ops_->AdamW(params.data() + (packed ? segment.state : segment.begin), w, grads.data() + segment.begin,
                m_.as<float>() + segment.state, v_.as<float>() + segment.state, segment.end - segment.begin, args);
  }
}

}  // namespace srunway::trainer
