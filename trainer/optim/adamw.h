// AdamW as PyTorch's torch.optim.AdamW computes it, with no weight decay on norms and biases, through the ops
// table (trainer/ops/ops.h), so its state lives where the model's parameters do.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "trainer/device/device.h"
#include "trainer/model/params.h"
#include "trainer/ops/ops.h"

namespace srunway::trainer {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  // false: the embedding tables (IsEmbeddingTable) take no weight decay either (Megatron's rule with
  // --embedding-init-method-std, after "Spike No More", arXiv 2312.16903).
  bool decay_embeddings = true;
};

// A step's learning rates: `lr` for every parameter but the word embeddings and the untied output layer, which take
// `embedding_or_output` (Megatron's --decoupled-lr; the same rate where it is not given, as from a lone float).
struct StepRates {
  StepRates(float lr) : lr(lr), embedding_or_output(lr) {}  // NOLINT(google-explicit-constructor): one rate for all
  StepRates(float lr, float embedding_or_output) : lr(lr), embedding_or_output(embedding_or_output) {}
  float lr;
  float embedding_or_output;
};

class AdamW {
 public:
  // Updates the elements of `owned` (every parameter when empty) and keeps both moments for those alone, packed
  // in the order of `owned`: under ZeRO-1 each rank owns its slices of the buffer.
  // On `device` with `ops` (the model's; they outlive the optimizer), or the host when not given. Throws
  // DeviceFull when the device cannot hold the moments.
  AdamW(const ParamLayout& layout, const AdamWConfig& config, std::vector<ParamRange> owned = {},
        Device* device = nullptr, Ops* ops = nullptr);

  // One update of the owned elements at `rates`; `step` counts updates from 1 (bias correction).
  // `grads` is the whole buffer and `params` the whole buffer or the owned elements packed (Model::masters()), in
  // the device's memory; the gradients count times grad_scale (global-norm clipping). `weights`, when not null,
  // is the model's whole copy of the weights in the ops' type (Model::weights() where it differs from params),
  // whose owned elements are updated alongside.
  void Step(std::span<float> params, std::span<const float> grads, StepRates rates, int64_t step,
            float grad_scale = 1.0f, void* weights = nullptr);

  // The weight decay of the next steps (--weight-decay-incr-style's, which changes it as the run goes).
  void set_weight_decay(float weight_decay) { config_.weight_decay = weight_decay; }
  const std::vector<ParamRange>& owned() const { return owned_; }
  // The updates (the ops' AdamW calls) one Step makes: one per run of owned elements, adjacent in the buffer and
  // in the moments, whose tensors share their weight decay and their rate.
  size_t updates_per_step() const { return segments_.size(); }
  // First and second moments of the owned elements, packed (the whole buffer's when everything is owned), in
  // the device's memory.
  std::span<float> m() { return {m_.as<float>(), m_.count()}; }
  std::span<float> v() { return {v_.as<float>(), v_.count()}; }
  std::span<const float> m() const { return {m_.as<float>(), m_.count()}; }
  std::span<const float> v() const { return {v_.as<float>(), v_.count()}; }

 private:
  struct Segment {  // a run of owned elements inside one tensor
    int64_t begin, end;  // in the buffer
    int64_t state;       // where its moments (and packed parameters) start in m_ and v_
    bool decay;
    bool embedding_or_output;  // takes StepRates::embedding_or_output
  };
  AdamWConfig config_;
  int64_t numel_;  // of the whole buffer
  std::vector<ParamRange> owned_;
  std::vector<Segment> segments_;
  Placement placement_;
  Ops* ops_;
  Buffer m_, v_;
};

}  // namespace srunway::trainer
