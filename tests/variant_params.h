// For the tests that compare two computations of a training step (PyTorch's and the CPU's, the GPU's and the
// CPU's): the parameters that a model's variant adds (q, k and v biases: --add-qkv-bias; a Llama's every linear
// layer's biases: Llama's flags without --disable-bias-linear; the q and k norms:
// --qk-layernorm; every norm's, where they are not the architecture's own: --normalization; the learned sinks:
// --softmax-type learnable) drawn at random, around 0 for biases, around 1 for the norms' weights, and N(0, 1) for
// the sinks (whose start, N(0, init_std), leaves every head's near 0). Left at their initial values, a step that
// ignored them would go unnoticed.
#pragma once

#include <span>
#include <string>

#include "trainer/model/params.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {

// The other architecture's norms (--normalization): a GPT's RMSNorm, a Llama's LayerNorm.
inline void SwapNorms(ModelConfig& config) {
  SetNorm(config, config.layernorm() ? Norm::kRmsNorm : Norm::kLayerNorm);
}

inline void RandomizeVariantParams(const ParamLayout& layout, Rng& rng, std::span<float> params) {
  const bool other_norm = layout.config().other_norm.has_value();
  for (const TensorSpec& spec : layout.tensors()) {
    const bool norm = spec.name.find(other_norm ? "norm" : "_norm.") != std::string::npos;
    const bool sinks = spec.name.ends_with(".softmax_offset");
    const bool bias =
        spec.name.ends_with(".qkv.bias") || (layout.config().linear_bias && spec.name.ends_with(".bias"));
    if (!norm && !sinks && !bias) continue;
    const double mean = norm && spec.name.ends_with(".weight") ? 1.0 : 0.0;
    const double std = sinks ? 1.0 : 0.1;
    for (int64_t i = 0; i < spec.numel; ++i) params[spec.offset + i] = static_cast<float>(mean + rng.Normal() * std);
  }
}

}  // namespace srunway::trainer
