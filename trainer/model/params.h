// The model's parameters: one flat fp32 buffer and named views into it, laid out layer by layer (as in llm.c).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/model/config.h"

namespace srunway::trainer {

struct TensorSpec {
  std::string name;            // "layers.0.qkv.weight"
  std::vector<int64_t> shape;  // PyTorch order: a Linear weight is [out, in]
  int64_t offset = 0;          // in floats, into the flat buffer
  int64_t numel = 0;
  bool decay = true;           // AdamW weight decay: matrices and embeddings yes, norms and biases no
  // The word embeddings and the untied output layer, which Megatron's --decoupled-lr gives a rate of their own (its
  // is_embedding_or_output_parameter); not the position embeddings.
  bool embedding_or_output = false;
};

// Views of one layer. GPT uses every field (the q and k norms' with ModelConfig::qk_norm); Llama has no biases
// (nullptr) and its fc holds gate then up ([2F, C]).
// T is float for the fp32 parameters and gradients, void for a copy of another type (the GPU's bf16 weights).
template <typename T>
struct BasicLayerViews {
  T* norm1_w = nullptr;
  T* norm1_b = nullptr;
  T* qkv_w = nullptr;  // [(H + 2 KV) * hd, C]: q heads, then k heads, then v heads
  T* qkv_b = nullptr;
  T* q_norm_w = nullptr;  // [hd], with ModelConfig::qk_norm; the biases GPT only
  T* q_norm_b = nullptr;
  T* k_norm_w = nullptr;
  T* k_norm_b = nullptr;
  T* sinks = nullptr;  // [H]: each head's sink score, with Softmax::kLearnable ("softmax_offset")
  T* proj_w = nullptr;  // [C, H * hd]
  T* proj_b = nullptr;
  T* norm2_w = nullptr;
  T* norm2_b = nullptr;
  T* fc_w = nullptr;  // GPT [F, C]; Llama [2F, C]
  T* fc_b = nullptr;
  T* out_w = nullptr;  // [C, F]
  T* out_b = nullptr;
};

template <typename T>
struct BasicModelViews {
  T* wte = nullptr;  // [V, C]
  T* wpe = nullptr;  // [T, C], GPT only (none without positions)
  std::vector<BasicLayerViews<T>> layers;
  T* norm_f_w = nullptr;
  T* norm_f_b = nullptr;  // GPT only
  T* lm_head = nullptr;   // [V, C]; GPT: the same memory as wte
};

using LayerViews = BasicLayerViews<float>;
using ModelViews = BasicModelViews<float>;

// A contiguous run of the flat buffer, in floats.
struct ParamRange {
  int64_t offset = 0;
  int64_t count = 0;
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  int64_t numel() const { return numel_; }
  const TensorSpec* Find(std::string_view name) const;

  // Views into `base`, which must hold numel() floats (the parameters, or their gradients).
  ModelViews Views(float* base) const;
  // The same into numel() elements of `element_size` bytes each.
  BasicModelViews<void> Views(void* base, size_t element_size) const;

  // The parts whose gradients become final together during the backward, which meets them from the end of the
  // buffer to its start: the untied head, the final norm, each layer from last to first, the embeddings.
  ParamRange Embeddings() const;  // wte (+ wpe)
  ParamRange Layer(int l) const;
  // The tensors of layer l whose names continue with `part` ("out.", "fc.", "norm2.", "proj.", "softmax_offset",
  // "k_norm.", "q_norm.", "qkv.", "norm1."):
  // a layer's backward finishes them in that order, which is the layout's backwards.
  ParamRange LayerPart(int l, std::string_view part) const;
  ParamRange FinalNorm() const;
  ParamRange Head() const;        // count 0 when tied to wte

 private:
  // The views, with at(name) giving each tensor's address (nullptr for a tensor this architecture lacks).
  template <typename T, typename At>
  BasicModelViews<T> Build(const At& at) const;
  ModelConfig config_;
  std::vector<TensorSpec> tensors_;
  int64_t numel_ = 0;
};

// Whether the tensor named so is a norm's weight ("layers.0.norm1.weight", "norm_f.weight", "layers.0.q_norm.weight").
bool IsNormWeight(std::string_view name);

// Whether the tensor named so is an embedding table: the word embeddings ("wte"), or GPT's positions' ("wpe").
bool IsEmbeddingTable(std::string_view name);

// How the weight matrices are drawn: Megatron's default, or its --init-method-xavier-uniform.
enum class InitMethod { kNormal, kXavierUniform };

// Fills `params` as Megatron does: weights ~ N(0, init_std), the two output projections of each layer (attention
// proj and FFN out) ~ N(0, init_std / sqrt(2 * n_layer)), norm weights 1 (0 with ModelConfig::norm_1p), biases 0,
// learned sinks ("softmax_offset") ~ N(0, init_std) whatever the method (Megatron's init_method; its xavier_uniform_
// cannot draw a vector).
// kXavierUniform draws every weight matrix, embeddings and output projections too, ~ U(-a, a) with a = sqrt(6 /
// (rows + columns)), as PyTorch's xavier_uniform_ on Megatron's [out, in] shapes (the fused qkv and SwiGLU's fused
// gate and up projections whole); init_std is then unused, as in Megatron. An `embedding_std` of 0 or more
// (Megatron's --embedding-init-method-std) draws the embedding tables ~ N(0, embedding_std) instead, either way.
class Rng;
void InitParams(const ModelConfig& config, const ParamLayout& layout, Rng& rng, std::span<float> params,
                InitMethod method = InitMethod::kNormal, double embedding_std = -1);

}  // namespace srunway::trainer
