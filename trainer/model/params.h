// The model's parameters: one flat fp32 buffer and named views into it, laid out layer by layer (as in llm.c).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "trainer/model/config.h"

namespace srunway::trainer {

struct TensorSpec {
  std::string name;            // "layers.0.qkv.weight"
  std::vector<int64_t> shape;  // PyTorch order: a Linear weight is [out, in]
  int64_t offset = 0;          // in floats, into the flat buffer
  int64_t numel = 0;
  bool decay = true;           // AdamW weight decay: matrices and embeddings yes, norms and biases no
};

// Views of one layer. GPT uses every field; Llama has no biases (nullptr) and its fc holds gate then up ([2F, C]).
struct LayerViews {
  float* norm1_w = nullptr;
  float* norm1_b = nullptr;
  float* qkv_w = nullptr;  // [(H + 2 KV) * hd, C]: q heads, then k heads, then v heads
  float* qkv_b = nullptr;
  float* proj_w = nullptr;  // [C, C]
  float* proj_b = nullptr;
  float* norm2_w = nullptr;
  float* norm2_b = nullptr;
  float* fc_w = nullptr;  // GPT [F, C]; Llama [2F, C]
  float* fc_b = nullptr;
  float* out_w = nullptr;  // [C, F]
  float* out_b = nullptr;
};

struct ModelViews {
  float* wte = nullptr;  // [V, C]
  float* wpe = nullptr;  // [T, C], GPT only
  std::vector<LayerViews> layers;
  float* norm_f_w = nullptr;
  float* norm_f_b = nullptr;  // GPT only
  float* lm_head = nullptr;   // [V, C]; GPT: the same memory as wte
};

// A contiguous run of the flat buffer, in floats.
struct ParamRange {
  int64_t offset = 0;
  int64_t count = 0;
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& config);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  int64_t numel() const { return numel_; }
  const TensorSpec* Find(std::string_view name) const;

  // Views into `base`, which must hold numel() floats (the parameters, or their gradients).
  ModelViews Views(float* base) const;

  // The parts whose gradients become final together during the backward, which meets them from the end of the
  // buffer to its start: the untied head (Llama), the final norm, each layer from last to first, the embeddings.
  ParamRange Embeddings() const;  // wte (+ wpe)
  ParamRange Layer(int l) const;
  // The tensors of layer l whose names continue with `part` ("out.", "fc.", "norm2.", "proj.", "qkv.", "norm1."):
  // a layer's backward finishes them in that order, which is the layout's backwards.
  ParamRange LayerPart(int l, std::string_view part) const;
  ParamRange FinalNorm() const;
  ParamRange Head() const;        // count 0 when tied to wte

 private:
  ModelConfig config_;
  std::vector<TensorSpec> tensors_;
  int64_t numel_ = 0;
};

// Fills `params` as Megatron does: weights ~ N(0, init_std), the two output projections of each layer (attention
// proj and FFN out) ~ N(0, init_std / sqrt(2 * n_layer)), norm weights 1, biases 0.
class Rng;
void InitParams(const ModelConfig& config, const ParamLayout& layout, Rng& rng, std::span<float> params);

}  // namespace srunway::trainer
