// For the tests that compare two computations of a training step (PyTorch's and the CPU's, the GPU's and the
// CPU's): the parameters that a model's variant adds (q, k and v biases: --add-qkv-bias; the q and k norms:
// --qk-layernorm; every norm's, where they are not the architecture's own: --normalization) drawn at random, around 0
// for biases and around 1 for the norms' weights. Left at their initial values (0 and 1), a step that ignored them
// would go unnoticed.
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
    if (!norm && !spec.name.ends_with(".qkv.bias")) continue;
    const double mean = norm && spec.name.ends_with(".weight") ? 1.0 : 0.0;
    for (int64_t i = 0; i < spec.numel; ++i) params[spec.offset + i] = static_cast<float>(mean + rng.Normal() * 0.1);
  }
}

}  // namespace srunway::trainer
