// Parameter layout and initialisation.
#include "trainer/model/params.h"

#include <fmt/format.h>

#include <cmath>
#include <cstddef>

#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

// Each layer's tensors in order; the same order is used for layout, views and safetensors export.
// q's and k's norms and the sinks sit between qkv and proj: the backward finishes them after proj and before qkv.
enum class Slot {
  kNorm1W, kNorm1B, kQkvW, kQkvB, kQNormW, kQNormB, kKNormW, kKNormB, kSinks, kProjW, kProjB, kNorm2W, kNorm2B, kFcW,
  kFcB, kOutW, kOutB
};

struct SlotInfo {
  Slot slot;
  const char* name;
  bool bias;  // GPT's layers have every one; a Llama's as ModelConfig says; a LayerNorm has its own
  bool qk_norm = false;  // only with ModelConfig::qk_norm
};

constexpr SlotInfo kLayerSlots[] = {
    {Slot::kNorm1W, "norm1.weight", false}, {Slot::kNorm1B, "norm1.bias", true},
    {Slot::kQkvW, "qkv.weight", false},     {Slot::kQkvB, "qkv.bias", true},
    {Slot::kQNormW, "q_norm.weight", false, true}, {Slot::kQNormB, "q_norm.bias", true, true},
    {Slot::kKNormW, "k_norm.weight", false, true}, {Slot::kKNormB, "k_norm.bias", true, true},
    {Slot::kSinks, "softmax_offset", false},
    {Slot::kProjW, "proj.weight", false},   {Slot::kProjB, "proj.bias", true},
    {Slot::kNorm2W, "norm2.weight", false}, {Slot::kNorm2B, "norm2.bias", true},
    {Slot::kFcW, "fc.weight", false},       {Slot::kFcB, "fc.bias", true},
    {Slot::kOutW, "out.weight", false},     {Slot::kOutB, "out.bias", true},
};

std::vector<int64_t> SlotShape(const ModelConfig& c, Slot slot) {
  const int64_t d = c.d_model;
  const int64_t f = c.arch == Arch::kGpt ? c.d_ff : 2 * int64_t{c.d_ff};
  switch (slot) {
    case Slot::kNorm1W: case Slot::kNorm1B: case Slot::kNorm2W: case Slot::kNorm2B: case Slot::kProjB:
    case Slot::kOutB: return {d};
    case Slot::kQkvW: return {c.qkv_dim(), d};
    case Slot::kQkvB: return {c.qkv_dim()};
    case Slot::kQNormW: case Slot::kQNormB: case Slot::kKNormW: case Slot::kKNormB: return {c.head_dim()};
    case Slot::kSinks: return {c.n_head};
    case Slot::kProjW: return {d, c.q_dim()};
    case Slot::kFcW: return {f, d};
    case Slot::kFcB: return {f};
    case Slot::kOutW: return {d, c.d_ff};
  }
  return {};
}

bool HasSlot(const ModelConfig& c, const SlotInfo& info) {
  if (info.qk_norm && !c.qk_norm) return false;
  if (info.slot == Slot::kSinks) return c.softmax == Softmax::kLearnable;
  if (!info.bias) return true;
  const bool norm = info.slot == Slot::kNorm1B || info.slot == Slot::kNorm2B || info.slot == Slot::kQNormB ||
                    info.slot == Slot::kKNormB;
  if (norm) return c.layernorm();  // LayerNorm's bias, whatever the architecture's other biases
  return info.slot == Slot::kQkvB ? c.has_qkv_bias() : c.has_linear_bias();
}

bool IsOutputProjection(std::string_view name) {
  return name.ends_with(".proj.weight") || name.ends_with(".out.weight");
}

}  // namespace

ParamLayout::ParamLayout(const ModelConfig& config) : config_(config) {
  auto add = [&](std::string name, std::vector<int64_t> shape, bool decay, bool embedding_or_output = false) {
    int64_t numel = 1;
    for (int64_t dim : shape) numel *= dim;
    tensors_.push_back({std::move(name), std::move(shape), numel_, numel, decay, embedding_or_output});
    numel_ += numel;
  };
  add("wte", {config.vocab, config.d_model}, true, true);
  if (config.learned_positions()) add("wpe", {config.seq_len, config.d_model}, true);
  for (int l = 0; l < config.n_layer; ++l) {
    for (const SlotInfo& info : kLayerSlots) {
      if (!HasSlot(config, info)) continue;
      std::vector<int64_t> shape = SlotShape(config, info.slot);
      add(fmt::format("layers.{}.{}", l, info.name), shape, shape.size() > 1);
    }
  }
  add("norm_f.weight", {config.d_model}, false);
  if (config.layernorm()) add("norm_f.bias", {config.d_model}, false);
  if (!config.tied_embeddings()) add("lm_head.weight", {config.vocab, config.d_model}, true, true);
}

const TensorSpec* ParamLayout::Find(std::string_view name) const {
  for (const auto& spec : tensors_) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

namespace {

// The range that the tensors whose names start with `prefix` cover (they are adjacent in the layout).
ParamRange Span(const std::vector<TensorSpec>& tensors, std::string_view prefix) {
  ParamRange range{-1, 0};
  for (const TensorSpec& spec : tensors) {
    if (!spec.name.starts_with(prefix)) continue;
    if (range.offset < 0) range.offset = spec.offset;
    range.count = spec.offset + spec.numel - range.offset;
  }
  if (range.offset < 0) range.offset = 0;
  return range;
}

}  // namespace

ParamRange ParamLayout::Embeddings() const {
  const ParamRange wte = Span(tensors_, "wte");
  const ParamRange wpe = Span(tensors_, "wpe");
  return {0, wpe.count > 0 ? wpe.offset + wpe.count : wte.count};
}
ParamRange ParamLayout::Layer(int l) const { return Span(tensors_, fmt::format("layers.{}.", l)); }
ParamRange ParamLayout::LayerPart(int l, std::string_view part) const {
  return Span(tensors_, fmt::format("layers.{}.{}", l, part));
}
ParamRange ParamLayout::FinalNorm() const { return Span(tensors_, "norm_f."); }
ParamRange ParamLayout::Head() const {
  const ParamRange head = Span(tensors_, "lm_head.");
  return head.count > 0 ? head : ParamRange{numel_, 0};
}

template <typename T, typename At>
BasicModelViews<T> ParamLayout::Build(const At& at) const {
  BasicModelViews<T> views;
  views.wte = at("wte");
  views.wpe = at("wpe");
  for (int l = 0; l < config_.n_layer; ++l) {
    auto layer_at = [&](const char* name) { return at(fmt::format("layers.{}.{}", l, name)); };
    BasicLayerViews<T> layer;
    layer.norm1_w = layer_at("norm1.weight");
    layer.norm1_b = layer_at("norm1.bias");
    layer.qkv_w = layer_at("qkv.weight");
    layer.qkv_b = layer_at("qkv.bias");
    layer.q_norm_w = layer_at("q_norm.weight");
    layer.q_norm_b = layer_at("q_norm.bias");
    layer.k_norm_w = layer_at("k_norm.weight");
    layer.k_norm_b = layer_at("k_norm.bias");
    layer.sinks = layer_at("softmax_offset");
    layer.proj_w = layer_at("proj.weight");
    layer.proj_b = layer_at("proj.bias");
    layer.norm2_w = layer_at("norm2.weight");
    layer.norm2_b = layer_at("norm2.bias");
    layer.fc_w = layer_at("fc.weight");
    layer.fc_b = layer_at("fc.bias");
    layer.out_w = layer_at("out.weight");
    layer.out_b = layer_at("out.bias");
    views.layers.push_back(layer);
  }
  views.norm_f_w = at("norm_f.weight");
  views.norm_f_b = at("norm_f.bias");
  views.lm_head = config_.tied_embeddings() ? views.wte : at("lm_head.weight");
  return views;
}

ModelViews ParamLayout::Views(float* base) const {
  return Build<float>([&](const std::string& name) -> float* {
    const TensorSpec* spec = Find(name);
    return spec ? base + spec->offset : nullptr;
  });
}

BasicModelViews<void> ParamLayout::Views(void* base, size_t element_size) const {
  return Build<void>([&](const std::string& name) -> void* {
    const TensorSpec* spec = Find(name);
    return spec ? static_cast<std::byte*>(base) + spec->offset * static_cast<int64_t>(element_size) : nullptr;
  });
}

bool IsNormWeight(std::string_view name) {
  return name.find("norm") != std::string_view::npos && name.ends_with(".weight");
}

bool IsEmbeddingTable(std::string_view name) { return name == "wte" || name == "wpe"; }

void InitParams(const ModelConfig& config, const ParamLayout& layout, Rng& rng, std::span<float> params,
                InitMethod method, double embedding_std) {
  const double scaled_std = config.init_std / std::sqrt(2.0 * config.n_layer);
  for (const TensorSpec& spec : layout.tensors()) {
    float* data = params.data() + spec.offset;
    if (IsNormWeight(spec.name)) {
      std::fill(data, data + spec.numel, config.norm_1p ? 0.0f : 1.0f);
    } else if (spec.name.ends_with(".softmax_offset")) {  // Megatron's init_method, normal with either flag
      for (int64_t i = 0; i < spec.numel; ++i) data[i] = static_cast<float>(rng.Normal() * config.init_std);
    } else if (spec.shape.size() == 1) {
      std::fill(data, data + spec.numel, 0.0f);
    } else if (embedding_std >= 0 && IsEmbeddingTable(spec.name)) {
      for (int64_t i = 0; i < spec.numel; ++i) data[i] = static_cast<float>(rng.Normal() * embedding_std);
    } else if (method == InitMethod::kXavierUniform) {
      const double bound = std::sqrt(6.0 / static_cast<double>(spec.shape[0] + spec.shape[1]));
      for (int64_t i = 0; i < spec.numel; ++i) data[i] = static_cast<float>((2 * rng.Uniform() - 1) * bound);
    } else {
      const double std = IsOutputProjection(spec.name) ? scaled_std : config.init_std;
      for (int64_t i = 0; i < spec.numel; ++i) data[i] = static_cast<float>(rng.Normal() * std);
    }
  }
}

}  // namespace srunway::trainer
