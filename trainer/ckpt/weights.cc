// Weights from safetensors files: srunway's own names or Hugging Face's GPT-2 and Llama names (see weights.h).
#include "trainer/ckpt/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <utility>

#include "common/fs.h"
#include "common/half.h"
#include "common/json.h"
#include "trainer/ckpt/checkpoint.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/model/params.h"

namespace srunway::trainer {
namespace {

constexpr std::string_view kIndexSuffix = ".safetensors.index.json";

// A tensor of one of the files, where its bytes are.
struct FileTensor {
  TensorEntry entry;
  const uint8_t* data = nullptr;
};

// The tensors of one safetensors file, or of every file a Hugging Face index names (a model in several files).
class WeightFiles {
 public:
  static common::StatusOr<WeightFiles> Open(const std::filesystem::path& path) {
    WeightFiles files;
    files.name_ = path.string();
    if (!path.string().ends_with(kIndexSuffix)) {
      SRUNWAY_RETURN_IF_ERROR(files.Add(path));
      return files;
    }
    // {"metadata": ..., "weight_map": {tensor: file}}: the files lie beside the index. A malformed index is a bad
    // file (exit 1), not a bad flag.
    auto index = common::ReadJsonFile(path);
    if (!index.ok()) return common::Status(common::StatusCode::kDataLoss, index.status().message());
    const auto found = index->find("weight_map");
    if (found == index->end()) return common::DataLoss("{}: no weight_map", files.name_);
    const common::Json& map = *found;
    if (!map.is_object() || map.empty()) {
      return common::DataLoss("{}: weight_map is not an object of tensors", files.name_);
    }
    std::map<std::string, std::string> wanted;  // tensor -> file
    for (const auto& [tensor, file] : map.items()) {
      if (!file.is_string() || file.get<std::string>().empty() ||
          file.get<std::string>().find('/') != std::string::npos) {
        return common::DataLoss("{}: weight_map's '{}' is not a file beside the index", files.name_, tensor);
      }
      wanted[tensor] = file.get<std::string>();
    }
    std::set<std::string> names;
    for (const auto& [tensor, file] : wanted) names.insert(file);
    for (const std::string& file : names) {
      if (common::Status added = files.Add(path.parent_path() / file); !added.ok()) {
        return common::Status(added.code(), fmt::format("{} (named by {})", added.message(), files.name_));
      }
    }
    for (const auto& [tensor, file] : wanted) {
      auto it = files.tensors_.find(tensor);
      if (it == files.tensors_.end() || it->second.file != file) {
        return common::DataLoss("{}: names {} for tensor '{}', which that file does not hold", files.name_, file,
                                tensor);
      }
    }
    return files;
  }

  const std::string& name() const { return name_; }
  const FileTensor* Find(const std::string& tensor) const {
    auto it = tensors_.find(tensor);
    return it == tensors_.end() ? nullptr : &it->second.tensor;
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [tensor, where] : tensors_) names.push_back(tensor);
    return names;
  }
  // The first file's header metadata (srunway's --export records its model there).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Held {
    FileTensor tensor;
    std::string file;  // its file's name
  };

  // The header copied out of the mapping under the bus-error guard (its reader builds strings as it reads, so it
  // cannot run under it): the 8-byte length and as much of the JSON it names as the file holds, none where the
  // length is past the format's limit (the reader says what is wrong). The tensors' reads are guarded in Copy.
  static common::StatusOr<std::vector<uint8_t>> HeaderBytes(std::span<const uint8_t> bytes) {
    SRUNWAY_ASSIGN_OR_RETURN(std::vector<uint8_t> length_bytes,
                             CopyMappedBytes(bytes.first(std::min<size_t>(bytes.size(), 8))));
    if (length_bytes.size() < 8) return length_bytes;
    uint64_t length;
    std::memcpy(&length, length_bytes.data(), 8);
    if (length > kMaxSafetensorsHeaderBytes) return length_bytes;
    return CopyMappedBytes(bytes.first(8 + std::min<uint64_t>(length, bytes.size() - 8)));
  }

  common::Status Add(const std::filesystem::path& file) {
    SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(file));
    SRUNWAY_ASSIGN_OR_RETURN(const std::vector<uint8_t> head, HeaderBytes(mapped->bytes()));
    SRUNWAY_ASSIGN_OR_RETURN(SafetensorsHeader header,
                             ReadSafetensorsHeader(head, mapped->bytes().size(), file.string()));
    if (mapped_.empty()) metadata_ = header.metadata;
    for (TensorEntry& entry : header.tensors) {
      const uint8_t* data = mapped->bytes().data() + header.data_start + entry.begin;
      std::string tensor = entry.name;
      if (auto [it, added] = tensors_.try_emplace(tensor, Held{{std::move(entry), data}, file.filename().string()});
          !added) {
        return common::DataLoss("{}: tensor '{}' is in {} and in {}", name_, tensor, it->second.file,
                                file.filename().string());
      }
    }
    mapped_.push_back(std::move(mapped));
    return common::Status::Ok();
  }

  std::string name_;
  std::vector<std::unique_ptr<MappedFile>> mapped_;
  std::map<std::string, Held> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Phi-3's names are Llama's but for q, k, v in one tensor (qkv_proj) and gate, up in another (gate_up_proj); GLM's
// have the second alone; StableLM's are Llama's with its norms' biases beside their weights (LayerNorms); Nemotron's
// (a GPT with RoPE) are StableLM's with one up_proj in place of gate and up.
enum class Naming { kSrunway, kHfGpt2, kHfLlama, kHfPhi3, kHfGlm, kHfStableLm, kHfGemma, kHfNemotron };

std::string_view NamingName(Naming naming) {
  switch (naming) {
    case Naming::kSrunway: return "srunway";
    case Naming::kHfGpt2: return "Hugging Face GPT-2";
    case Naming::kHfLlama: return "Hugging Face Llama";
    case Naming::kHfPhi3: return "Hugging Face Phi-3";
    case Naming::kHfGlm: return "Hugging Face GLM";
    case Naming::kHfStableLm: return "Hugging Face StableLM";
    case Naming::kHfGemma: return "Hugging Face Gemma";
    case Naming::kHfNemotron: return "Hugging Face Nemotron";
  }
  return "";
}

// Where one of our tensors comes from: the file's tensors stacked along the first dimension, each transposed first
// where marked (GPT-2's Conv1D keeps [in, out]); `cut` lets the file hold more rows than the model takes. `rows`
// is how many of ours a source of several holds (0: all of them): checked on reading, split by on writing.
struct Source {
  std::string name;
  bool transposed = false;
  int64_t rows = 0;
};
// `shift`: the file holds ours plus it (1 for a model whose norm weights are stored as their difference from 1,
// ModelConfig::norm_1p, read from or written to a file that holds them whole).
struct Mapping {
  std::vector<Source> sources;
  bool cut = false;
  float shift = 0;
};

struct NameMap {
  Naming naming = Naming::kSrunway;
  std::map<std::string, Mapping> ours;  // our tensor name -> its sources
  std::optional<bool> config_ties;      // config.json's tie_word_embeddings beside the file, where it says
};

// `key` is in `json` with a value: transformers writes null for a setting left unset, which is its default.
bool Given(const common::Json& json, std::string_view key) {
  const auto it = json.find(key);
  return it != json.end() && !it->is_null();
}

// Buffers the Hugging Face files keep beside the parameters (attention masks, RoPE frequencies).
bool NotAParameter(Naming naming, std::string_view name) {
  if (naming == Naming::kHfGpt2) return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
  return naming != Naming::kSrunway && name.ends_with(".rotary_emb.inv_freq");
}

// The model srunway-train's --export recorded in the file's header, if it did (a Hugging Face file has none).
common::StatusOr<std::optional<ModelConfig>> RecordedModel(const WeightFiles& files) {
  const auto it = files.metadata().find("srunway_model");
  if (it == files.metadata().end()) return std::optional<ModelConfig>();
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ParseJson(it->second, files.name() + ": srunway_model"));
  SRUNWAY_ASSIGN_OR_RETURN(ModelConfig model, FromJson(json, files.name()));
  return std::optional<ModelConfig>(model);
}

void SetNormShift(NameMap& names, float shift) {
  for (auto& [ours, mapping] : names.ours) {
    if (IsNormWeight(ours)) mapping.shift = shift;
  }
}

// The table of weights.h for `config`: GPT-2's names under `gpt2_prefix`; an untied model's head from a file without
// lm_head.weight (`file_head` false) takes the embedding for it.
NameMap Names(Naming naming, const ModelConfig& config, const std::string& gpt2_prefix, bool file_head) {
  NameMap names;
  names.naming = naming;
  auto map = [&](const std::string& ours, std::vector<Source> sources, bool cut = false) {
    names.ours[ours] = Mapping{std::move(sources), cut};
  };
  // The head is lm_head.weight in every naming (GPT2LMHeadModel's too, outside its transformer.* prefix).
  auto map_head = [&] {
    if (config.tied_embeddings()) return;
    map("lm_head.weight", {{file_head ? "lm_head.weight" : names.ours.at("wte").sources[0].name}});
  };
  const ParamLayout layout(config);
  for (const TensorSpec& spec : layout.tensors()) map(spec.name, {{spec.name}});
  if (naming == Naming::kSrunway) {
    map_head();
    return names;
  }

  const int64_t hd = config.head_dim();
  for (int l = 0; l < config.n_layer; ++l) {
    const std::string ours = fmt::format("layers.{}.", l);
    if (naming == Naming::kHfGpt2) {
      const std::string h = fmt::format("{}h.{}.", gpt2_prefix, l);
      for (const auto& [our_part, their_part, transposed] :
           {std::tuple{"norm1", "ln_1", false}, std::tuple{"qkv", "attn.c_attn", true},
            std::tuple{"proj", "attn.c_proj", true}, std::tuple{"norm2", "ln_2", false},
            std::tuple{"fc", "mlp.c_fc", true}, std::tuple{"out", "mlp.c_proj", true}}) {
        map(ours + our_part + ".weight", {{h + their_part + ".weight", transposed}});
        map(ours + our_part + ".bias", {{h + their_part + ".bias"}});
      }
    } else {
      const std::string layer = fmt::format("model.layers.{}.", l);
      const std::string attn = layer + "self_attn.", mlp = layer + "mlp.";
      map(ours + "norm1.weight", {{layer + "input_layernorm.weight"}});
      // Our qkv and fc, rows in the same order.
      const bool fused_qkv = naming == Naming::kHfPhi3, fused_fc = fused_qkv || naming == Naming::kHfGlm;
      if (fused_qkv) {
        map(ours + "qkv.weight", {{attn + "qkv_proj.weight"}});
      } else {
        map(ours + "qkv.weight", {{attn + "q_proj.weight", false, config.n_head * hd},
                                  {attn + "k_proj.weight", false, config.n_kv_head * hd},
                                  {attn + "v_proj.weight", false, config.n_kv_head * hd}});
      }
      if (config.has_qkv_bias()) {  // Qwen2's, and a Llama's with attention_bias
        map(ours + "qkv.bias", {{attn + "q_proj.bias", false, config.n_head * hd},
                                {attn + "k_proj.bias", false, config.n_kv_head * hd},
                                {attn + "v_proj.bias", false, config.n_kv_head * hd}});
      }
      if (config.qk_norm) {  // Qwen3's
        map(ours + "q_norm.weight", {{attn + "q_norm.weight"}});
        map(ours + "k_norm.weight", {{attn + "k_norm.weight"}});
      }
      map(ours + "proj.weight", {{attn + "o_proj.weight"}});
      map(ours + "norm2.weight", {{layer + "post_attention_layernorm.weight"}});
      if (naming == Naming::kHfStableLm || naming == Naming::kHfNemotron) {
        map(ours + "norm1.bias", {{layer + "input_layernorm.bias"}});
        map(ours + "norm2.bias", {{layer + "post_attention_layernorm.bias"}});
      }
      if (naming == Naming::kHfNemotron) {  // one up_proj, and biases on every linear layer or on none
        map(ours + "fc.weight", {{mlp + "up_proj.weight"}});
        if (config.has_linear_bias()) {
          map(ours + "proj.bias", {{attn + "o_proj.bias"}});
          map(ours + "fc.bias", {{mlp + "up_proj.bias"}});
          map(ours + "out.bias", {{mlp + "down_proj.bias"}});
        }
      } else if (fused_fc) {
        map(ours + "fc.weight", {{mlp + "gate_up_proj.weight"}});
      } else {
        map(ours + "fc.weight",
            {{mlp + "gate_proj.weight", false, config.d_ff}, {mlp + "up_proj.weight", false, config.d_ff}});
      }
      map(ours + "out.weight", {{mlp + "down_proj.weight"}});
      if (config.linear_bias) {  // attention_bias and mlp_bias
        map(ours + "proj.bias", {{attn + "o_proj.bias"}});
        map(ours + "fc.bias",
            {{mlp + "gate_proj.bias", false, config.d_ff}, {mlp + "up_proj.bias", false, config.d_ff}});
        map(ours + "out.bias", {{mlp + "down_proj.bias"}});
      }
    }
  }
  if (naming == Naming::kHfGpt2) {
    map("wte", {{gpt2_prefix + "wte.weight"}});
    map("wpe", {{gpt2_prefix + "wpe.weight"}}, /*cut=*/true);
    map("norm_f.weight", {{gpt2_prefix + "ln_f.weight"}});
    map("norm_f.bias", {{gpt2_prefix + "ln_f.bias"}});
  } else {
    map("wte", {{"model.embed_tokens.weight"}});
    map("norm_f.weight", {{"model.norm.weight"}});
    if (naming == Naming::kHfStableLm || naming == Naming::kHfNemotron) map("norm_f.bias", {{"model.norm.bias"}});
  }
  map_head();
  // Hugging Face's norms multiply by their weights as stored; Gemma's and Nemotron's by 1 + their weights.
  if (naming == Naming::kHfGemma || naming == Naming::kHfNemotron) {
    SetNormShift(names, config.norm_1p ? 0 : -1);
  } else if (config.norm_1p) {
    SetNormShift(names, 1);
  }
  return names;
}

// What the config.json beside a Hugging Face model's weights says of them, where it is of the file's family (gpt2
// beside GPT-2's names, another beside Llama's): its model_type, and whether its head is tied (tie_word_embeddings;
// none where it does not say). Empty where there is no such config.json.
struct BesideConfig {
  std::string model_type;
  std::optional<bool> tied;
};
common::StatusOr<BesideConfig> ReadBesideConfig(const std::filesystem::path& weights, Naming naming) {
  const std::filesystem::path path = weights.parent_path() / "config.json";
  std::error_code ec;
  if (naming == Naming::kSrunway || !std::filesystem::exists(path, ec)) return BesideConfig();
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ReadJsonFile(path));
  BesideConfig beside;
  if (json.is_object() && json.contains("model_type") && json["model_type"].is_string()) {
    beside.model_type = json["model_type"].get<std::string>();
  }
  if ((beside.model_type == "gpt2") != (naming == Naming::kHfGpt2)) return BesideConfig();
  if (Given(json, "tie_word_embeddings")) {
    SRUNWAY_ASSIGN_OR_RETURN(beside.tied, common::JsonField<bool>(json, "tie_word_embeddings", path.string()));
  }
  return beside;
}

// Gemma's embedding multiplier: the square root of its width (GemmaModel's hidden_size ** 0.5, in fp32).
float GemmaEmbeddingMultiplier(int d_model) { return static_cast<float>(std::sqrt(static_cast<double>(d_model))); }

// The naming of the file's tensors, checked against the model's architecture, and its table. A Gemma's tensors have
// Llama's names: the config.json beside them tells it (its norms' weights are stored less 1).
common::StatusOr<NameMap> MapNames(const WeightFiles& files, const std::filesystem::path& path,
                                   const ModelConfig& config) {
  Naming naming;
  std::string gpt2;  // GPT-2's prefix: a model saved as GPT2LMHeadModel names its parameters transformer.*
  if (files.Find("wte") != nullptr) {
    naming = Naming::kSrunway;
  } else if (files.Find("wte.weight") != nullptr || files.Find("transformer.wte.weight") != nullptr) {
    naming = Naming::kHfGpt2;
    gpt2 = files.Find("wte.weight") != nullptr ? "" : "transformer.";
  } else if (files.Find("model.embed_tokens.weight") != nullptr) {
    naming = files.Find("model.layers.0.self_attn.qkv_proj.weight") != nullptr  ? Naming::kHfPhi3
             : files.Find("model.layers.0.mlp.gate_up_proj.weight") != nullptr   ? Naming::kHfGlm
             : files.Find("model.layers.0.input_layernorm.bias") != nullptr      ? Naming::kHfStableLm
                                                                                  : Naming::kHfLlama;
  } else {
    return common::FailedPrecondition("{}: neither srunway-train's --export nor a Hugging Face GPT-2 or Llama model "
                                      "(no tensor 'wte', 'wte.weight' or 'model.embed_tokens.weight')", files.name());
  }
  SRUNWAY_ASSIGN_OR_RETURN(const BesideConfig beside, ReadBesideConfig(path, naming));
  if (naming == Naming::kHfLlama && beside.model_type == "gemma") naming = Naming::kHfGemma;
  if (naming == Naming::kHfStableLm && beside.model_type == "nemotron") naming = Naming::kHfNemotron;
  if (naming == Naming::kHfStableLm && beside.model_type.empty() && config.other_positions) {
    return common::FailedPrecondition("{} has Llama's tensor names with LayerNorms' biases and no config.json beside "
                                      "it, and this run's model is a GPT with RoPE (Nemotron's): only the "
                                      "config.json tells a Nemotron's files (norms stored less 1) from StableLM's; "
                                      "put the model's beside it", files.name());
  }
  const Arch file_arch = naming == Naming::kHfGpt2 || naming == Naming::kHfNemotron ? Arch::kGpt : Arch::kLlama;
  if (naming != Naming::kSrunway && file_arch != config.arch) {
    return common::FailedPrecondition("{} holds a {} model, and this run's model is a {} (--preset)", files.name(),
                                      NamingName(naming), ArchName(config.arch));
  }
  if (naming == Naming::kHfGpt2 && !config.learned_positions()) {
    return common::FailedPrecondition("{} holds a GPT-2 model, whose positions are a learned table ({}wpe.weight), "
                                      "and this run's model has {} (--position-embedding-type {})", files.name(),
                                      gpt2, config.no_positions ? "none" : "RoPE",
                                      config.no_positions ? "none" : "rope");
  }
  if (naming != Naming::kSrunway && file_arch == Arch::kLlama && config.learned_positions()) {
    return common::FailedPrecondition("{} holds a {} model, whose positions are RoPE's, and this run's model has a "
                                      "learned table (--position-embedding-type learned_absolute)", files.name(),
                                      NamingName(naming));
  }
  if (naming != Naming::kSrunway && config.softmax == Softmax::kLearnable) {
    return common::FailedPrecondition("{} holds a {} model, which has no attention sinks, and this run's model learns "
                                      "them (--softmax-type learnable, layers.N.softmax_offset)", files.name(),
                                      NamingName(naming));
  }
  // Hugging Face's GPT-2 and Llama have their architecture's own norms; StableLM, a Llama, has LayerNorms.
  const Norm file_norm = naming == Naming::kHfStableLm ? Norm::kLayerNorm : ArchNorm(file_arch);
  if (naming == Naming::kHfNemotron && !config.other_positions) {
    return common::FailedPrecondition("{} holds a Hugging Face Nemotron model (the config.json beside it), a GPT with "
                                      "RoPE, and this run's model is a {} (--position-embedding-type rope, or "
                                      "--use-checkpoint-args)", files.name(), ModelKind(config));
  }
  if (naming != Naming::kSrunway && config.norm() != file_norm) {
    return common::FailedPrecondition("{} holds a {} model, whose norms are {}, and this run's model is a {} "
                                      "(--normalization)", files.name(), NamingName(naming), NormName(file_norm),
                                      ModelKind(config));
  }
  const bool gemma = config.geglu && config.embedding_multiplier == GemmaEmbeddingMultiplier(config.d_model);
  if (naming == Naming::kHfGemma && !gemma) {
    return common::FailedPrecondition("{} holds a Gemma model (the config.json beside it), whose FFN is GeGLU and "
                                      "whose embedding is times {}, and this run's model is a {} (--geglu "
                                      "--embedding-multiplier {}, or --use-checkpoint-args)", files.name(),
                                      GemmaEmbeddingMultiplier(config.d_model), ModelKind(config),
                                      GemmaEmbeddingMultiplier(config.d_model));
  }
  if (naming == Naming::kHfLlama && gemma && beside.model_type.empty()) {
    return common::FailedPrecondition("{} has Llama's tensor names and no config.json beside it, and this run's model "
                                      "is Gemma's (--geglu, --embedding-multiplier {}): Gemma's files hold the norms' "
                                      "weights less 1, Llama's whole, and only the config.json tells them apart; "
                                      "put the model's beside it", files.name(), config.embedding_multiplier);
  }
  NameMap names = Names(naming, config, gpt2, files.Find("lm_head.weight") != nullptr);
  names.config_ties = beside.tied;
  if (naming != Naming::kSrunway) return names;
  // srunway-train's --export holds the parameters as its model stored them, which its header records: norm
  // weights whole, or less 1 (apply_layernorm_1p; absent before 2026-12-06, and with it no header at all).
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<ModelConfig> recorded, RecordedModel(files));
  const bool file_1p = recorded && recorded->norm_1p;
  SetNormShift(names, (config.norm_1p ? 1.0f : 0.0f) - (file_1p ? 1.0f : 0.0f));
  return names;
}

// The float types a file's tensors may be stored as.
enum class FloatType { kF32, kF64, kBF16, kF16, kNone };

FloatType FloatTypeOf(std::string_view dtype) {
  if (dtype == "F32") return FloatType::kF32;
  if (dtype == "F64") return FloatType::kF64;
  if (dtype == "BF16") return FloatType::kBF16;
  if (dtype == "F16") return FloatType::kF16;
  return FloatType::kNone;
}

// Elements [first, first + count) of a tensor stored as `type`, at `stride` elements apart, into `out` as floats.
void Convert(const uint8_t* data, FloatType type, int64_t first, int64_t count, int64_t stride, float* out) {
  auto each = [&]<typename T>(T, auto convert) {
    for (int64_t k = 0; k < count; ++k) {
      T value;
      std::memcpy(&value, data + static_cast<size_t>(first + k * stride) * sizeof(T), sizeof(T));
      out[k] = convert(value);
    }
  };
  switch (type) {
    case FloatType::kF32: return each(float{}, [](float v) { return v; });
    case FloatType::kF64: return each(double{}, [](double v) { return static_cast<float>(v); });
    case FloatType::kBF16: return each(uint16_t{}, [](uint16_t v) { return common::BFloat16ToFloat(v); });
    case FloatType::kF16: return each(uint16_t{}, [](uint16_t v) { return common::HalfToFloat(v); });
    case FloatType::kNone: return;
  }
}

std::string Shape(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Fills our tensor `spec` from the file's tensors that `mapping` names.
common::Status Copy(const WeightFiles& files, const TensorSpec& spec, const Mapping& mapping, std::span<float> params,
                    std::vector<std::string>& notes) {
  const int64_t cols = spec.shape.size() == 1 ? 1 : spec.shape[1];
  const int64_t rows = spec.shape[0];
  std::vector<std::string> names;
  std::vector<std::string> shapes;
  std::vector<std::pair<const FileTensor*, int64_t>> parts;  // each source and its rows (after any transpose)
  int64_t total = 0;
  bool fits = true;
  for (const Source& source : mapping.sources) {
    const FileTensor* tensor = files.Find(source.name);
    if (tensor == nullptr) {
      return common::FailedPrecondition("{}: no tensor '{}' for the model's {} {}: the file is of another model",
                                        files.name(), source.name, spec.name, Shape(spec.shape));
    }
    const std::string& dtype = tensor->entry.dtype;
    if (FloatTypeOf(dtype) == FloatType::kNone) {
      return common::FailedPrecondition("{}: tensor '{}' is {}, not a float type", files.name(), source.name, dtype);
    }
    std::vector<int64_t> shape = tensor->entry.shape;
    if (source.transposed && shape.size() == 2) std::swap(shape[0], shape[1]);
    names.push_back(source.name);
    shapes.push_back(Shape(tensor->entry.shape));
    fits = fits && shape.size() == spec.shape.size() && (shape.size() == 1 || shape[1] == cols) &&
           (!source.transposed || shape.size() == 2) && (source.rows == 0 || shape[0] == source.rows);
    parts.emplace_back(tensor, shape.empty() ? 0 : shape[0]);
    total += shape.empty() ? 0 : shape[0];
  }
  if (!fits || total < rows || (total > rows && !mapping.cut)) {
    // The usual cause is a size flag that differs from the model the file holds: say which.
    std::string hint;
    if (fits && (spec.name == "wte" || spec.name == "lm_head.weight")) hint = fmt::format(" (--vocab-size {})", total);
    if (fits && spec.name == "wpe") hint = fmt::format(" (--max-position-embeddings {} at most)", total);
    return common::FailedPrecondition("{}: {} {} {} not the model's {} {}{}", files.name(), fmt::join(names, " + "),
                                      fmt::join(shapes, " + "), names.size() == 1 ? "is" : "are", spec.name,
                                      Shape(spec.shape), hint);
  }
  if (total > rows) {
    notes.push_back(fmt::format("{}: the first {} of its {} rows (--max-position-embeddings {})",
                                mapping.sources[0].name, rows, total, rows));
  }
  float* out = params.data() + spec.offset;
  // Under the bus-error guard: a file cut short or unreadable while it is read is a line naming it, not a silent
  // SIGBUS. Nothing here holds an object with a destructor while it reads the mapping.
  SRUNWAY_RETURN_IF_ERROR(GuardMappedReads([&] {
    int64_t row = 0;
    for (size_t i = 0; i < parts.size() && row < rows; ++i) {
      const auto& [tensor, their_rows] = parts[i];
      const int64_t take = std::min(their_rows, rows - row);
      const FloatType type = FloatTypeOf(tensor->entry.dtype);
      if (mapping.sources[i].transposed) {
        // The file holds [cols, their_rows]: row r of ours is its column r.
        for (int64_t r = 0; r < take; ++r) Convert(tensor->data, type, r, cols, their_rows, out + (row + r) * cols);
      } else {
        Convert(tensor->data, type, 0, take * cols, 1, out + row * cols);
      }
      row += take;
    }
    return common::Status::Ok();
  }));
  if (mapping.shift != 0) {
    for (int64_t i = 0; i < spec.numel; ++i) out[i] -= mapping.shift;
  }
  return common::Status::Ok();
}

}  // namespace

std::optional<std::filesystem::path> WeightsFile(const std::filesystem::path& load) {
  const std::string name = load.filename().string();
  if (name.ends_with(".safetensors") || name.ends_with(kIndexSuffix)) return load;
  std::error_code ec;
  if (load.empty() || !std::filesystem::is_directory(load, ec) || HasCheckpoint(load)) return std::nullopt;
  for (const char* file : {"model.safetensors.index.json", "model.safetensors"}) {
    if (std::filesystem::exists(load / file, ec)) return load / file;
  }
  return std::nullopt;
}

namespace {

// The file's head (lm_head.weight, if it has one) against the model's, its embedding again where the model ties them,
// and against config.json's tie_word_embeddings beside it. A head that differs from a tied model's embedding is
// refused (the model would lose it), as is one that differs where config.json ties them (transformers' versions read
// such a file apart: some use the embedding, some the head); a config.json that unties them beside a file with no
// head is refused (transformers would start the head at random). An untied model's head from a file without one is
// the embedding's copy (Names), said.
common::Status CheckHead(const WeightFiles& files, const ModelConfig& config, std::span<const float> params,
                         const NameMap& plan, std::vector<std::string>& notes) {
  const std::string& embedding = plan.ours.at("wte").sources[0].name;
  const bool file_head = files.Find("lm_head.weight") != nullptr;
  if (!file_head && plan.config_ties == false) {
    return common::FailedPrecondition("{}: no lm_head.weight, and the config.json beside it unties the head "
                                      "(tie_word_embeddings: false): the file lacks the model's head", files.name());
  }
  if (!file_head) {
    if (!config.tied_embeddings()) {
      notes.push_back(fmt::format("lm_head: a copy of {} (the file ties them; here they train apart)", embedding));
    }
    return common::Status::Ok();
  }
  if (!config.tied_embeddings() && plan.config_ties != true) return common::Status::Ok();
  // The file's head as the model's embedding holds it, beside the embedding read.
  const ParamLayout layout(config);
  const TensorSpec& wte = *layout.Find("wte");
  std::vector<float> read;
  std::span<const float> head;
  if (config.tied_embeddings()) {
    read.resize(static_cast<size_t>(wte.numel));
    TensorSpec at_zero = wte;
    at_zero.offset = 0;
    std::vector<std::string> ignored;
    SRUNWAY_RETURN_IF_ERROR(Copy(files, at_zero, Mapping{{{"lm_head.weight"}}}, read, ignored));
    head = read;
  } else {
    head = params.subspan(static_cast<size_t>(layout.Find("lm_head.weight")->offset),
                          static_cast<size_t>(wte.numel));
  }
  const auto from = params.begin() + wte.offset;
  if (std::equal(head.begin(), head.end(), from)) {
    if (!config.tied_embeddings()) {
      notes.push_back(fmt::format("lm_head: the file's lm_head.weight is {} again, as config.json ties them; here "
                                  "they train apart", embedding));
    }
    return common::Status::Ok();
  }
  if (plan.config_ties == true) {
    return common::FailedPrecondition("{}: lm_head.weight is not {}, and the config.json beside it ties them "
                                      "(tie_word_embeddings: true): transformers' versions read such a model apart; "
                                      "make the two agree", files.name(), embedding);
  }
  return common::FailedPrecondition("{}: lm_head.weight is not {}: the file's head is its own, and this run's model "
                                    "ties its head to the embedding (give --untie-embeddings-and-output-weights, or "
                                    "--use-checkpoint-args)", files.name(), embedding);
}

}  // namespace

common::StatusOr<ImportedWeights> ImportWeights(const std::filesystem::path& path, const ModelConfig& config,
                                                std::span<float> params) {
  SRUNWAY_ASSIGN_OR_RETURN(WeightFiles files, WeightFiles::Open(path));
  SRUNWAY_ASSIGN_OR_RETURN(NameMap plan, MapNames(files, path, config));
  ImportedWeights imported;
  imported.naming = NamingName(plan.naming);
  const ParamLayout layout(config);
  if (params.size() != static_cast<size_t>(layout.numel())) {
    return common::InvalidArgument("{}: {} parameters given for a model of {}", path.string(), params.size(),
                                   layout.numel());
  }
  std::set<std::string> used;
  for (const TensorSpec& spec : layout.tensors()) {
    const Mapping& mapping = plan.ours.at(spec.name);
    SRUNWAY_RETURN_IF_ERROR(Copy(files, spec, mapping, params, imported.notes));
    for (const Source& source : mapping.sources) used.insert(source.name);
  }
  SRUNWAY_RETURN_IF_ERROR(CheckHead(files, config, params, plan, imported.notes));
  used.insert("lm_head.weight");  // the model's, or its embedding again (CheckHead)
  std::vector<std::string> unused;
  for (const std::string& name : files.Names()) {
    if (!used.contains(name) && !NotAParameter(plan.naming, name)) unused.push_back(name);
  }
  if (!unused.empty()) {
    const size_t shown = std::min<size_t>(unused.size(), 3);
    return common::FailedPrecondition(
        "{}: {} tensor{} the model has no place for ({}{}): the file is of another model (more layers, biases, ...)",
        files.name(), unused.size(), unused.size() == 1 ? "" : "s",
        fmt::join(unused.begin(), unused.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
        unused.size() > shown ? ", ..." : "");
  }
  return imported;
}

namespace {

// A float as the shortest decimal that reads back as it (1e-05, not 9.999999747378752e-06), for JSON.
double Shortest(float value) { return std::stod(fmt::format("{}", value)); }

// The Hugging Face class a model is written as: a GPT with RoPE as Nemotron, another as GPT-2; a Llama as Gemma with
// GeGLU, StableLM with LayerNorms, Qwen3 with q and k norms, GLM with RoPE's pairs interleaved, Qwen2 with q, k and
// v's biases, Phi-3 with RoPE over a share of each head or LongRoPE, Mistral with a window, else Llama.
struct HfClass {
  const char* model_type;
  const char* architecture;
  Naming naming;  // its files' tensor names
};
HfClass ExportClass(const ModelConfig& c) {
  if (c.arch == Arch::kGpt) {
    return c.other_positions ? HfClass{"nemotron", "NemotronForCausalLM", Naming::kHfNemotron}
                             : HfClass{"gpt2", "GPT2LMHeadModel", Naming::kHfGpt2};
  }
  if (c.geglu) return {"gemma", "GemmaForCausalLM", Naming::kHfGemma};
  if (c.layernorm()) return {"stablelm", "StableLmForCausalLM", Naming::kHfStableLm};
  if (c.qk_norm) return {"qwen3", "Qwen3ForCausalLM", Naming::kHfLlama};
  if (c.rotary_interleaved) return {"glm", "GlmForCausalLM", Naming::kHfGlm};
  if (c.qkv_bias) return {"qwen2", "Qwen2ForCausalLM", Naming::kHfLlama};
  if (c.rotary_percent != 1.0 || c.longrope) return {"phi3", "Phi3ForCausalLM", Naming::kHfPhi3};
  if (c.window >= 0) return {"mistral", "MistralForCausalLM", Naming::kHfLlama};
  return {"llama", "LlamaForCausalLM", Naming::kHfLlama};
}

// rope_scaling of rope_type yarn as transformers reads it (its _compute_yarn_parameters), into Megatron's numbers:
// the factor (without one, max_position_embeddings over the original positions), the original positions
// (max_position_embeddings without them), beta_fast and beta_slow (32 and 1 where absent or 0), truncate (the range
// rounded outwards unless false) and the attention factor: attention_factor where given, else m(mscale) /
// m(mscale_all_dim) where both are non-zero, else m(1), m(a) = 0.1 a ln(factor) + 1. Megatron's YaRN scales
// attention by m(mscale) / m(mscale_all_dim) (1 and 0 unless told): a given attention_factor must be what the
// file's two give that way, or what transformers' rule gives without it.
common::StatusOr<YarnScaling> YarnFromHuggingFace(const common::Json& r, const std::string& at, int max_positions) {
  auto number = [&](const char* key) -> common::StatusOr<std::optional<float>> {
    if (!Given(r, key)) return std::optional<float>();
    SRUNWAY_ASSIGN_OR_RETURN(const float value, common::JsonField<float>(r, key, at));
    return std::optional<float>(value);
  };
  YarnScaling y;
  y.original_positions = max_positions;
  if (Given(r, "original_max_position_embeddings")) {
    SRUNWAY_ASSIGN_OR_RETURN(y.original_positions, common::JsonField<int>(r, "original_max_position_embeddings", at));
  }
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<float> factor, number("factor"));
  // Validate refuses the infinity of an original length of 0.
  y.factor = factor ? *factor : static_cast<float>(static_cast<double>(max_positions) / y.original_positions);
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<float> beta_fast, number("beta_fast"));
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<float> beta_slow, number("beta_slow"));
  y.beta_fast = beta_fast.value_or(0) != 0 ? *beta_fast : 32.0f;  // Python's `or`: 0 is absent
  y.beta_slow = beta_slow.value_or(0) != 0 ? *beta_slow : 1.0f;
  if (Given(r, "truncate")) {
    SRUNWAY_ASSIGN_OR_RETURN(y.round_to_int, common::JsonField<bool>(r, "truncate", at));
  }
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<float> mscale, number("mscale"));
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<float> mscale_all_dim, number("mscale_all_dim"));
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<float> given, number("attention_factor"));
  YarnScaling file = y;  // the file's two mscales as Megatron takes them
  file.mscale = mscale.value_or(1.0f);
  file.mscale_all_dim = mscale_all_dim.value_or(0.0f);
  if (mscale.value_or(0) != 0 && mscale_all_dim.value_or(0) != 0) y = file;  // else m(1) / m(0): y's defaults
  if (!given) return y;
  auto gives = [&](const YarnScaling& s) {
    return std::fabs(s.attention_factor() - *given) <= 1e-6f * std::max(1.0f, std::fabs(*given));
  };
  if (gives(file)) return file;
  if (gives(y)) return y;
  return common::FailedPrecondition("{}: attention_factor {}: srunway-train's YaRN (Megatron's) scales attention by "
                                    "m(mscale) / m(mscale_all_dim), m(a) = 0.1 a ln(factor) + 1, which is {} here",
                                    at, *given, file.attention_factor());
}

// Phi-3's LongRoPE (rope_type longrope in `r`, at `at` in its config `json`, at `where`) as transformers reads it (its
// _compute_longrope_parameters and longrope_frequency_update): the two lists of factors, the original positions
// (Phi3Config's original_max_position_embeddings, 4096 unless given, which it puts over any in `r`), and the attention
// factor: attention_factor where given, else sqrt(1 + ln(factor) / ln(original)), 1 where the factor is 1 or less, the
// factor max_position_embeddings over the original positions (transformers 4 takes that ratio for Phi-3 whatever
// `r` says, transformers 5 a factor given: one that differs is refused).
common::StatusOr<LongRope> LongRopeFromHuggingFace(const common::Json& json, const std::string& where,
                                                   const common::Json& r, const std::string& at, int max_positions) {
  LongRope l;
  SRUNWAY_ASSIGN_OR_RETURN(l.short_factor, common::JsonField<std::vector<float>>(r, "short_factor", at));
  SRUNWAY_ASSIGN_OR_RETURN(l.long_factor, common::JsonField<std::vector<float>>(r, "long_factor", at));
  if (Given(json, "original_max_position_embeddings")) {
    SRUNWAY_ASSIGN_OR_RETURN(l.original_positions,
                             common::JsonField<int>(json, "original_max_position_embeddings", where));
  }
  if (Given(r, "original_max_position_embeddings") && r["original_max_position_embeddings"] != l.original_positions) {
    return common::FailedPrecondition("{}: original_max_position_embeddings {} is not the {} that transformers' Phi3 "
                                      "reads (the one beside it, 4096 unless given)", at,
                                      r["original_max_position_embeddings"].dump(), l.original_positions);
  }
  if (l.original_positions <= 0) {
    return common::FailedPrecondition("{}: original_max_position_embeddings must be positive, got {}", at,
                                      l.original_positions);
  }
  const double factor = static_cast<double>(max_positions) / l.original_positions;
  if (Given(r, "factor")) {
    SRUNWAY_ASSIGN_OR_RETURN(const double given, common::JsonField<double>(r, "factor", at));
    if (given != factor) {
      return common::FailedPrecondition("{}: factor {} is not max_position_embeddings over the original positions, "
                                        "{}: transformers 4 reads that ratio, 5 the factor", at, given, factor);
    }
  }
  if (Given(r, "attention_factor")) {
    SRUNWAY_ASSIGN_OR_RETURN(l.attention_factor, common::JsonField<float>(r, "attention_factor", at));
  } else {
    const double original = l.original_positions;
    l.attention_factor =
        factor <= 1.0 ? 1.0f : static_cast<float>(std::sqrt(1.0 + std::log(factor) / std::log(original)));
  }
  return l;
}

// RoPE's numbers in config.json as transformers 5 reads them (its RotaryEmbeddingConfigMixin): one object,
// rope_scaling where given and not empty, else rope_parameters (where transformers 5 writes them), with rope_type
// ("type" before transformers 4.43; default without one) and its keys; rope_theta and partial_rotary_factor from it,
// else beside it (where transformers 4 writes them). Where both give one and they differ, transformers 4 and 5 read
// the file apart: refused. rope_parameters per layer type (full_attention, sliding_attention) must be one RoPE.
// Types: default, linear (one factor), llama3 (Llama 3.1's) and yarn, which ModelConfig holds; Phi-3 reads yarn
// (and su) as its LongRoPE. The share of each head turned goes to rotary_percent.
common::Status RopeFromHuggingFace(const common::Json& json, const std::string& where, std::string_view model_type,
                                   ModelConfig& c) {
  common::Json r = common::Json::object();
  std::string at = where;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (Given(json, key) && json[key] != common::Json::object()) {  // Python's `or`: {} is none
      r = json[key];
      at = fmt::format("{}: {}", where, key);
      break;
    }
  }
  if (!r.is_object()) return common::FailedPrecondition("{} is {}, not an object", at, r.dump());
  std::optional<common::Json> per_type;  // the one RoPE of every layer type
  for (const char* layer_type : {"full_attention", "sliding_attention"}) {
    if (!r.contains(layer_type)) continue;
    if (per_type && *per_type != r[layer_type]) {
      return common::FailedPrecondition("{}: full_attention's and sliding_attention's differ: srunway-train's layers "
                                        "turn one RoPE", at);
    }
    per_type = r[layer_type];
  }
  if (per_type) {
    if (r.size() != (r.contains("full_attention") && r.contains("sliding_attention") ? 2u : 1u)) {
      return common::FailedPrecondition("{} has a layer type's RoPE beside other keys", at);
    }
    if (!per_type->is_object()) return common::FailedPrecondition("{}: a layer type's is not an object", at);
    r = *per_type;
  }
  // One number from the object, else from beside it.
  auto one = [&](const char* key, double fallback) -> common::StatusOr<double> {
    const bool inner = Given(r, key), outer = Given(json, key);
    if (inner && outer && r[key] != json[key]) {
      return common::FailedPrecondition("{}: {} {} and {} beside it differ: transformers 5 reads the first, older "
                                        "ones the second", at, key, r[key].dump(), json[key].dump());
    }
    if (!inner && !outer) return fallback;
    return common::JsonField<double>(inner ? r : json, key, inner ? at : where);
  };
  SRUNWAY_ASSIGN_OR_RETURN(const double theta, one("rope_theta", 10000.0));  // LlamaConfig's default
  c.rope_theta = static_cast<float>(theta);
  // GlmConfig's and NemotronConfig's default is half of each head, StableLmConfig's a quarter.
  SRUNWAY_ASSIGN_OR_RETURN(c.rotary_percent,
                           one("partial_rotary_factor", model_type == "glm" || model_type == "nemotron" ? 0.5
                                                        : model_type == "stablelm"                     ? 0.25
                                                                                                       : 1.0));
  const char* type_key = !r.contains("rope_type") && r.contains("type") ? "type" : "rope_type";
  std::string type = "default";
  if (Given(r, type_key) || r.contains("factor")) {  // a factor of no type is a mistake, not none
    SRUNWAY_ASSIGN_OR_RETURN(type, common::JsonField<std::string>(r, type_key, at));
  }
  if (type == "default") return common::Status::Ok();
  // Scalings over a share of each head: not held to Hugging Face's.
  if (model_type == "glm" || model_type == "stablelm" || model_type == "nemotron") {
    return common::FailedPrecondition("{}: rope_type '{}': srunway-train reads {}'s RoPE unscaled (default)", at,
                                      type, model_type == "glm"        ? "GLM"
                                            : model_type == "stablelm" ? "StableLM"
                                                                       : "Nemotron");
  }
  if (model_type == "phi3") {  // its config refuses every other type, and reads su and yarn as longrope
    if (type != "longrope" && type != "su" && type != "yarn") {
      return common::FailedPrecondition("{}: rope_type '{}': transformers' Phi3 turns plain RoPE (default) or "
                                        "LongRoPE (longrope, su, yarn)", at, type);
    }
    SRUNWAY_ASSIGN_OR_RETURN(c.longrope, LongRopeFromHuggingFace(json, where, r, at, c.seq_len));
    return common::Status::Ok();
  }
  if (type == "linear") {
    SRUNWAY_ASSIGN_OR_RETURN(c.rope_linear_factor, common::JsonField<float>(r, "factor", at));
    return common::Status::Ok();
  }
  if (type == "yarn") {
    SRUNWAY_ASSIGN_OR_RETURN(c.yarn, YarnFromHuggingFace(r, at, c.seq_len));
    return common::Status::Ok();
  }
  if (type != "llama3") {
    return common::FailedPrecondition("{}: rope_type '{}': srunway-train reads a llama's RoPE scaling from a Hugging "
                                      "Face config when it is linear (linear), as Llama 3.1's (llama3), YaRN (yarn), "
                                      "or none", at, type);
  }
  return RopeScalingFromJson(r, at, c);
}

// Qwen2's and Qwen3's windowed layers (c.window set): layer_types' sliding_attention ones, or without it those from
// max_window_layers on. Every layer windowed is ModelConfig's empty window_layers; none, no window.
common::Status WindowLayersFromHuggingFace(const common::Json& json, const std::string& where, ModelConfig& c) {
  std::vector<uint8_t> layers;
  if (Given(json, "layer_types")) {
    SRUNWAY_ASSIGN_OR_RETURN(const auto types, common::JsonField<std::vector<std::string>>(json, "layer_types", where));
    if (types.size() != static_cast<size_t>(c.n_layer)) {
      return common::FailedPrecondition("{}: layer_types names {} layers, and num_hidden_layers is {}", where,
                                        types.size(), c.n_layer);
    }
    for (const std::string& type : types) {
      if (type != "sliding_attention" && type != "full_attention") {
        return common::FailedPrecondition("{}: layer_types has '{}': srunway-train's layers attend through the "
                                          "window (sliding_attention) or to every key (full_attention)", where, type);
      }
      layers.push_back(type == "sliding_attention" ? 1 : 0);
    }
  } else {
    SRUNWAY_ASSIGN_OR_RETURN(const int first, common::JsonFieldOr<int>(json, "max_window_layers", 28, where));
    // At most Validate's bound on layers, which refuses more: no gigabytes for an absurd num_hidden_layers.
    for (int l = 0; l < std::min(c.n_layer, 1 << 12); ++l) layers.push_back(l >= first ? 1 : 0);
  }
  if (std::ranges::none_of(layers, [](uint8_t w) { return w != 0; })) {
    c.window = -1;
  } else if (std::ranges::any_of(layers, [](uint8_t w) { return w == 0; })) {
    c.window_layers = std::move(layers);
  }
  return common::Status::Ok();
}

// A Gemma's FFN activation, GELU's tanh approximation: transformers 4's GemmaMLP takes hidden_activation (that
// unless given) and ignores hidden_act, transformers 5's takes hidden_act. Gemma 1's configs label it "gelu" there,
// from before transformers took it as the approximation the model was trained with (as Megatron-Bridge reads it too);
// taken as it. Another function in either is refused.
common::Status GemmaActivation(const common::Json& json, const std::string& where) {
  for (const char* key : {"hidden_act", "hidden_activation"}) {
    if (!Given(json, key)) continue;
    SRUNWAY_ASSIGN_OR_RETURN(const std::string act, common::JsonField<std::string>(json, key, where));
    const bool legacy = act == "gelu" && std::string_view(key) == "hidden_act";
    if (act != "gelu_pytorch_tanh" && act != "gelu_new" && !legacy) {
      return common::FailedPrecondition("{}: {} is {}: srunway-train's gemma has GELU's tanh approximation "
                                        "(gelu_pytorch_tanh)", where, key, act);
    }
  }
  return common::Status::Ok();
}

// The sizes a Llama-family config.json names as Nemotron's does: layers, width, heads, KV heads (`kv_heads` unless
// given, the heads' count where that is 0), the FFN's width, positions.
common::Status LlamaSizes(const common::Json& json, const std::string& where, int kv_heads, ModelConfig& c) {
  SRUNWAY_ASSIGN_OR_RETURN(c.n_layer, common::JsonField<int>(json, "num_hidden_layers", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.d_model, common::JsonField<int>(json, "hidden_size", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.n_head, common::JsonField<int>(json, "num_attention_heads", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.n_kv_head, common::JsonFieldOr<int>(json, "num_key_value_heads",
                                                                 kv_heads > 0 ? kv_heads : c.n_head, where));
  SRUNWAY_ASSIGN_OR_RETURN(c.d_ff, common::JsonField<int>(json, "intermediate_size", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.seq_len, common::JsonField<int>(json, "max_position_embeddings", where));
  return common::Status::Ok();
}

// config.json's head_dim, or `fallback` where it gives none (GlmConfig's and GemmaConfig's defaults); 0 where
// neither does. Refused where given and not positive.
common::StatusOr<int> HeadDim(const common::Json& json, const std::string& where, int fallback) {
  if (!Given(json, "head_dim")) return fallback;
  SRUNWAY_ASSIGN_OR_RETURN(const int head_dim, common::JsonField<int>(json, "head_dim", where));
  if (head_dim <= 0) return common::FailedPrecondition("{}: head_dim must be positive, got {}", where, head_dim);
  return head_dim;
}

// Biases on q, k, v and o_proj (attention_bias) and on the MLP's (mlp_bias), false unless given: both, Megatron's
// add_bias_linear, or neither (srunway-train's `type` has one or the other).
common::StatusOr<bool> EveryBiasOrNone(const common::Json& json, const std::string& where, std::string_view type) {
  bool attention_bias = false, mlp_bias = false;
  for (auto [key, field] : {std::pair{"attention_bias", &attention_bias}, std::pair{"mlp_bias", &mlp_bias}}) {
    if (Given(json, key)) {
      SRUNWAY_ASSIGN_OR_RETURN(*field, common::JsonField<bool>(json, key, where));
    }
  }
  if (attention_bias != mlp_bias) {
    return common::FailedPrecondition("{}: attention_bias is {} and mlp_bias {}: srunway-train's {} has a bias on "
                                      "every linear layer (Megatron's add_bias_linear) or on none", where,
                                      attention_bias, mlp_bias, type);
  }
  return attention_bias;
}

}  // namespace

common::StatusOr<ModelConfig> FromHuggingFaceConfig(const common::Json& json, const std::string& where) {
  SRUNWAY_ASSIGN_OR_RETURN(std::string type, common::JsonField<std::string>(json, "model_type", where));
  auto number = [&](std::string_view key, double fallback) -> common::StatusOr<float> {
    if (!Given(json, key)) return static_cast<float>(fallback);
    return common::JsonField<float>(json, key, where);
  };
  auto refuse_unless = [&](std::string_view key, const common::Json& allowed) -> common::Status {
    if (!Given(json, key) || json[std::string(key)] == allowed) {
      return common::Status::Ok();
    }
    return common::FailedPrecondition("{}: {} is {}: srunway-train's {} has {}", where, key,
                                      json[std::string(key)].dump(), type, allowed.dump());
  };
  ModelConfig c;
  if (type == "gpt2") {
    c.arch = Arch::kGpt;
    SRUNWAY_ASSIGN_OR_RETURN(c.n_layer, common::JsonField<int>(json, "n_layer", where));
    SRUNWAY_ASSIGN_OR_RETURN(c.d_model, common::JsonField<int>(json, "n_embd", where));
    SRUNWAY_ASSIGN_OR_RETURN(c.n_head, common::JsonField<int>(json, "n_head", where));
    c.n_kv_head = c.n_head;
    // GPT2Config's default; clamped, so that an absurd n_embd is Validate's error about n_embd and no overflow.
    c.d_ff = static_cast<int>(std::clamp<int64_t>(int64_t{4} * c.d_model, INT_MIN, INT_MAX));
    if (Given(json, "n_inner")) {
      SRUNWAY_ASSIGN_OR_RETURN(c.d_ff, common::JsonField<int>(json, "n_inner", where));
    }
    SRUNWAY_ASSIGN_OR_RETURN(c.seq_len, common::JsonField<int>(json, "n_positions", where));
    SRUNWAY_ASSIGN_OR_RETURN(c.norm_eps, number("layer_norm_epsilon", 1e-5));
    // Both GELU names are the tanh approximation, which our GELU is; relu2 is squared ReLU; gelu (transformers'
    // GELUActivation, PyTorch's gelu) is exact GELU.
    c.squared_relu = json.contains("activation_function") && json["activation_function"] == "relu2";
    c.exact_gelu = json.contains("activation_function") && json["activation_function"] == "gelu";
    if (!c.squared_relu && !c.exact_gelu &&
        (!json.contains("activation_function") || json["activation_function"] != "gelu_pytorch_tanh")) {
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("activation_function", "gelu_new"));
    }
    // Attention's logits over the square root of the head size, and not also over the layer's number (Stanford
    // CRFM's GPT-2 runs set scale_attn_by_inverse_layer_idx), as ours; once read silently as such.
    SRUNWAY_RETURN_IF_ERROR(refuse_unless("scale_attn_weights", true));
    SRUNWAY_RETURN_IF_ERROR(refuse_unless("scale_attn_by_inverse_layer_idx", false));
  } else if (type == "llama" || type == "qwen2" || type == "qwen3" || type == "mistral" || type == "phi3" ||
             type == "glm" || type == "stablelm" || type == "gemma") {
    // Qwen2 is Llama with biases on q, k and v (and no other): its config.json has Llama's keys but attention_bias.
    // Qwen3 is Llama with an RMSNorm on each head's q and k (q_norm, k_norm); its attention_bias would bias o_proj
    // too, as Llama's. Mistral is Llama with a sliding window (sliding_window; null from Mistral 7B v0.2 on). Phi-3
    // is Llama with Mistral's window, RoPE over a share of each head (partial_rotary_factor) and
    // q, k, v in one tensor and gate, up in another (the files' names, MapNames). GLM (GLM-4-9B's first Hugging Face
    // form) is Llama with q, k and v's biases (attention_bias, true unless false), RoPE over a share of each head
    // (half unless given) in interleaved pairs, and gate, up in one tensor; GlmConfig's defaults differ from
    // Llama's (GLM-4-9B's sizes), those that change the model are taken here. StableLM (StableLM 2 1.6B's, StableLM
    // 3B's) is Llama with LayerNorms (biases included), RoPE over a quarter of each head unless told, q, k and v's
    // biases where use_qkv_bias, and its heads hidden_size / num_attention_heads wide (its attention's; a head_dim
    // key, which transformers' RoPE would read, must agree).
    // Gemma (Gemma 1's GemmaForCausalLM) is Llama with GeGLU (GELU's tanh approximation), its embedding times the
    // square root of its width, norms that multiply by 1 + weight (Megatron's --apply-layernorm-1p, as its files store
    // them) and GemmaConfig's defaults (Gemma 7B's heads, 256 wide, 16 KV heads).
    const bool glm = type == "glm", stablelm = type == "stablelm", gemma = type == "gemma";
    c.arch = Arch::kLlama;
    c.geglu = gemma;
    c.norm_1p = gemma;
    if (stablelm) SetNorm(c, Norm::kLayerNorm);
    c.qkv_bias = type == "qwen2";
    c.qk_norm = type == "qwen3";
    c.rotary_interleaved = glm;
    SRUNWAY_RETURN_IF_ERROR(LlamaSizes(json, where, glm ? 2 : stablelm ? 32 : gemma ? 16 : 0, c));
    if (gemma) c.embedding_multiplier = GemmaEmbeddingMultiplier(c.d_model);
    // LlamaConfig's default, Phi3Config's, GlmConfig's and StableLmConfig's
    SRUNWAY_ASSIGN_OR_RETURN(c.norm_eps, stablelm ? number("layer_norm_eps", 1e-5)
                                                  : number("rms_norm_eps", type == "phi3" ? 1e-5
                                                                           : glm          ? 1.5625e-7
                                                                                          : 1e-6));
    if (gemma) {
      SRUNWAY_RETURN_IF_ERROR(GemmaActivation(json, where));
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("use_bidirectional_attention", false));
    } else {
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("hidden_act", "silu"));
    }
    SRUNWAY_RETURN_IF_ERROR(RopeFromHuggingFace(json, where, type, c));
    // Only Phi-3, GLM and StableLM turn a share of each head (the others' transformers classes turn whole heads).
    if (type != "phi3" && !glm && !stablelm && c.rotary_percent != 1.0) {
      return common::FailedPrecondition("{}: partial_rotary_factor is {}: srunway-train's {} has 1.0 (phi3, glm and "
                                        "stablelm turn a share of each head)", where, c.rotary_percent, type);
    }
    if (type == "llama") {
      SRUNWAY_ASSIGN_OR_RETURN(c.linear_bias, EveryBiasOrNone(json, where, type));
    } else if (glm) {
      SRUNWAY_ASSIGN_OR_RETURN(c.qkv_bias, common::JsonFieldOr<bool>(json, "attention_bias", true, where));
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("mlp_bias", false));
    } else if (stablelm) {
      // StableLM 2 12B's per-head q and k norms (a weight each head) and parallel residual are not ours.
      SRUNWAY_ASSIGN_OR_RETURN(c.qkv_bias, common::JsonFieldOr<bool>(json, "use_qkv_bias", false, where));
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("qk_layernorm", false));
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("use_parallel_residual", false));
    } else {
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("attention_bias", false));  // Qwen3's: o_proj's bias too
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("mlp_bias", false));
    }
    // Qwen2's and Qwen3's window, where use_sliding_window is true (transformers' Qwen2Config): in the layers that
    // layer_types names sliding_attention, or without it those from max_window_layers (28 unless given) on.
    bool use_sliding_window = false;
    if ((type == "qwen2" || type == "qwen3") && Given(json, "use_sliding_window")) {
      SRUNWAY_ASSIGN_OR_RETURN(use_sliding_window, common::JsonField<bool>(json, "use_sliding_window", where));
    } else {
      SRUNWAY_RETURN_IF_ERROR(refuse_unless("use_sliding_window", false));
    }
    if ((type == "mistral" || type == "phi3" || use_sliding_window) && Given(json, "sliding_window")) {
      // transformers' mask (masking_utils' sliding_window_overlay): query i sees key j where i - sliding_window < j
      // <= i, itself and sliding_window - 1 keys before it: Megatron's --window-size (sliding_window - 1),0.
      SRUNWAY_ASSIGN_OR_RETURN(const int window, common::JsonField<int>(json, "sliding_window", where));
      if (window <= 0) {
        return common::FailedPrecondition("{}: sliding_window must be positive (or null: none), got {}", where,
                                          window);
      }
      c.window = window - 1;
      if (use_sliding_window) SRUNWAY_RETURN_IF_ERROR(WindowLayersFromHuggingFace(json, where, c));
    }
    // The heads' width where it is not hidden_size / num_attention_heads (Qwen3's smaller models, Gemma's); GLM's
    // 128 unless given, Gemma's 256.
    SRUNWAY_ASSIGN_OR_RETURN(const int head_dim, HeadDim(json, where, glm ? 128 : gemma ? 256 : 0));
    if (head_dim > 0) {
      if (stablelm && c.n_head > 0 && head_dim != c.d_model / c.n_head) {
        return common::FailedPrecondition("{}: head_dim is {}: transformers' StableLM has heads hidden_size / "
                                          "num_attention_heads wide, {}", where, head_dim, c.d_model / c.n_head);
      }
      SetHeadDim(c, head_dim);
    }
    // LongRoPE's factors, one a pair of the rotary dimensions, now that the heads' width is known (Validate names
    // a head count of 0, which has none, and a share of each head out of its range).
    if (c.longrope && c.n_head > 0 && c.rotary_percent > 0 && c.rotary_percent <= 1) {
      const size_t pairs = static_cast<size_t>(std::max(c.rotary_dim(), 0) / 2);
      for (const auto& [name, factors] : {std::pair{"short_factor", &c.longrope->short_factor},
                                          std::pair{"long_factor", &c.longrope->long_factor}}) {
        if (factors->size() != pairs) {
          return common::FailedPrecondition("{}: LongRoPE's {} holds {} factors, and RoPE turns {} pairs of each head",
                                            where, name, factors->size(), pairs);
        }
      }
    }
  } else if (type == "nemotron") {
    // Nemotron (Nemotron-4's, Minitron's NemotronForCausalLM) is a GPT with RoPE over a share of each head (half
    // unless given), squared ReLU (relu2), LayerNorms that multiply by 1 + weight (--apply-layernorm-1p, as its files
    // store them), grouped-query attention, a bias on every linear layer (attention_bias and mlp_bias) or on none.
    c.arch = Arch::kGpt;
    c.other_positions = true;
    c.squared_relu = true;
    c.norm_1p = true;
    SRUNWAY_RETURN_IF_ERROR(LlamaSizes(json, where, 0, c));
    SRUNWAY_ASSIGN_OR_RETURN(c.norm_eps, number("norm_eps", 1e-5));
    SRUNWAY_RETURN_IF_ERROR(refuse_unless("hidden_act", "relu2"));
    SRUNWAY_RETURN_IF_ERROR(RopeFromHuggingFace(json, where, type, c));
    SRUNWAY_ASSIGN_OR_RETURN(const bool biases, EveryBiasOrNone(json, where, type));
    c.no_linear_bias = !biases;
    SRUNWAY_ASSIGN_OR_RETURN(const int head_dim, HeadDim(json, where, 0));
    if (head_dim > 0) SetHeadDim(c, head_dim);
  } else {
    return common::FailedPrecondition("{}: model_type '{}': srunway-train builds GPT-2 (gpt2), Llama (llama), Qwen2 "
                                      "(qwen2), Qwen3 (qwen3), Mistral (mistral), Phi-3 (phi3), GLM (glm), "
                                      "StableLM (stablelm), Gemma (gemma) and Nemotron (nemotron) models", where,
                                      type);
  }
  SRUNWAY_ASSIGN_OR_RETURN(c.vocab, common::JsonField<int>(json, "vocab_size", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.init_std, number("initializer_range", 0.02));
  // The head tied to the embedding unless tie_word_embeddings says otherwise where GPT2Config's and GemmaConfig's
  // default ties it (PretrainedConfig's), untied unless it does where the other classes' default unties it.
  bool tied = type == "gpt2" || type == "gemma";
  if (Given(json, "tie_word_embeddings")) {
    SRUNWAY_ASSIGN_OR_RETURN(tied, common::JsonField<bool>(json, "tie_word_embeddings", where));
  }
  SetTiedEmbeddings(c, tied);
  return c;
}

common::Json HuggingFaceConfig(const ModelConfig& c, StoredDtype dtype) {
  const char* torch_dtype = dtype == StoredDtype::kBF16  ? "bfloat16"
                            : dtype == StoredDtype::kF16 ? "float16"
                                                         : "float32";
  const HfClass cls = ExportClass(c);
  if (cls.naming == Naming::kHfNemotron) {  // its keys all written
    return {{"architectures", {cls.architecture}}, {"model_type", cls.model_type},
            {"num_hidden_layers", c.n_layer}, {"hidden_size", c.d_model}, {"num_attention_heads", c.n_head},
            {"num_key_value_heads", c.n_kv_head}, {"head_dim", c.head_dim()}, {"intermediate_size", c.d_ff},
            {"max_position_embeddings", c.seq_len}, {"vocab_size", c.vocab}, {"norm_eps", Shortest(c.norm_eps)},
            {"rope_theta", Shortest(c.rope_theta)}, {"partial_rotary_factor", c.rotary_percent},
            {"hidden_act", "relu2"}, {"attention_bias", c.has_linear_bias()}, {"mlp_bias", c.has_linear_bias()},
            {"initializer_range", Shortest(c.init_std)}, {"tie_word_embeddings", c.tied_embeddings()},
            {"torch_dtype", torch_dtype}};
  }
  if (cls.naming == Naming::kHfGpt2) {
    return {{"architectures", {cls.architecture}}, {"model_type", cls.model_type}, {"n_layer", c.n_layer},
            {"n_embd", c.d_model}, {"n_head", c.n_head}, {"n_inner", c.d_ff}, {"n_positions", c.seq_len},
            {"vocab_size", c.vocab}, {"layer_norm_epsilon", Shortest(c.norm_eps)},
            {"activation_function", c.squared_relu ? "relu2" : c.exact_gelu ? "gelu" : "gelu_new"},
            {"initializer_range", Shortest(c.init_std)}, {"tie_word_embeddings", c.tied_embeddings()},
            {"torch_dtype", torch_dtype}};
  }
  common::Json rope_scaling = RopeScalingToJson(c);
  if (rope_scaling.is_object()) {
    for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) {
      rope_scaling[key] = Shortest(rope_scaling[key].get<float>());
    }
    rope_scaling["rope_type"] = "llama3";
  } else if (c.rope_linear_factor != 1.0f) {
    rope_scaling = {{"rope_type", "linear"}, {"factor", Shortest(c.rope_linear_factor)}};
  } else if (c.yarn) {
    // The attention factor given, as transformers would not derive Megatron's from mscale alone (mscale_all_dim 0).
    const YarnScaling& y = *c.yarn;
    rope_scaling = {{"rope_type", "yarn"}, {"factor", Shortest(y.factor)},
                    {"original_max_position_embeddings", y.original_positions}, {"beta_fast", Shortest(y.beta_fast)},
                    {"beta_slow", Shortest(y.beta_slow)}, {"mscale", Shortest(y.mscale)},
                    {"mscale_all_dim", Shortest(y.mscale_all_dim)}, {"truncate", y.round_to_int},
                    {"attention_factor", Shortest(y.attention_factor())}};
  }
  common::Json config = {
      {"architectures", {cls.architecture}},
      {"model_type", cls.model_type},
      {"num_hidden_layers", c.n_layer}, {"hidden_size", c.d_model}, {"num_attention_heads", c.n_head},
      {"num_key_value_heads", c.n_kv_head}, {"intermediate_size", c.d_ff}, {"max_position_embeddings", c.seq_len},
      {"vocab_size", c.vocab}, {"rms_norm_eps", Shortest(c.norm_eps)}, {"rope_theta", Shortest(c.rope_theta)},
      {"rope_scaling", rope_scaling}, {"hidden_act", "silu"}, {"tie_word_embeddings", c.tied_embeddings()},
      {"initializer_range", Shortest(c.init_std)}, {"torch_dtype", torch_dtype}};
  // Qwen2's config has no bias keys (its q, k and v have them, nothing else) and a sliding window, off; Qwen3's has
  // attention_bias and the window, and its head_dim, which it does not derive (Llama's and Qwen2's do, unless given).
  // Mistral's has its window (as FromHuggingFaceConfig reads it) and no bias keys. Qwen's window is in the layers
  // from max_window_layers on (HuggingFaceExportable: a model's windowed layers are those), which newer configs
  // also list (layer_types).
  if (c.qk_norm || c.kv_channels != 0) config["head_dim"] = c.head_dim();
  if (c.qk_norm) {
    config["attention_bias"] = false;
  }
  if (cls.naming == Naming::kHfGemma) {
    // GemmaConfig's defaults are Gemma 7B's (heads 256 wide, 16 KV heads): written, as is the activation under
    // transformers 5's key and 4's.
    config["head_dim"] = c.head_dim();
    config["hidden_act"] = "gelu_pytorch_tanh";
    config["hidden_activation"] = "gelu_pytorch_tanh";
    config["attention_bias"] = false;
  } else if (cls.naming == Naming::kHfStableLm) {
    // StableLmConfig's: LayerNorms' eps under its own key; the share of each head turned (a quarter unless given),
    // q, k and v's biases, KV heads (32 unless given) written; per-head q and k norms and the parallel residual off.
    config.erase("rms_norm_eps");
    config["layer_norm_eps"] = Shortest(c.norm_eps);
    config["partial_rotary_factor"] = c.rotary_percent;
    config["use_qkv_bias"] = c.qkv_bias;
    config["qk_layernorm"] = false;
    config["use_parallel_residual"] = false;
  } else if (cls.naming == Naming::kHfGlm) {
    // GlmConfig's defaults are GLM-4-9B's (half of each head turned, heads 128 wide, biases on q, k and v, its
    // tokenizer's padding row): each written.
    config["partial_rotary_factor"] = c.rotary_percent;
    config["head_dim"] = c.head_dim();
    config["attention_bias"] = c.qkv_bias;
    config["pad_token_id"] = nullptr;
  } else if (cls.naming == Naming::kHfPhi3) {
    // Phi3Config's: its window or null; the original positions, which only its LongRoPE reads, and pad_token_id,
    // its embedding's padding_idx (32000 unless null, past a smaller vocabulary), as here. LongRoPE as Phi-3's hub
    // configs write it, the attention factor beside it where it is not the one transformers derives.
    config["partial_rotary_factor"] = c.rotary_percent;
    config["sliding_window"] = c.window >= 0 ? common::Json(c.window + 1) : common::Json(nullptr);
    config["original_max_position_embeddings"] = c.longrope ? c.longrope->original_positions : c.seq_len;
    config["pad_token_id"] = nullptr;
    if (c.longrope) {
      const LongRope& l = *c.longrope;
      common::Json scaling = {{"type", "longrope"}, {"short_factor", common::Json::array()},
                              {"long_factor", common::Json::array()}};
      for (const float f : l.short_factor) scaling["short_factor"].push_back(Shortest(f));
      for (const float f : l.long_factor) scaling["long_factor"].push_back(Shortest(f));
      const common::Json beside = {{"original_max_position_embeddings", l.original_positions}};
      auto derived = LongRopeFromHuggingFace(beside, "", scaling, "", c.seq_len);
      if (!derived.ok() || derived->attention_factor != l.attention_factor) {
        scaling["attention_factor"] = Shortest(l.attention_factor);
      }
      config["rope_scaling"] = scaling;
    }
  } else if ((c.qk_norm || c.qkv_bias) && c.window >= 0) {
    config["use_sliding_window"] = true;
    config["sliding_window"] = c.window + 1;
    common::Json types = common::Json::array();
    int first = c.n_layer;  // the first windowed layer
    for (int l = 0; l < c.n_layer; ++l) {
      types.push_back(c.windowed(l) ? "sliding_attention" : "full_attention");
      if (c.windowed(l)) first = std::min(first, l);
    }
    config["max_window_layers"] = first;
    config["layer_types"] = types;
  } else if (c.qk_norm || c.qkv_bias) {
    config["use_sliding_window"] = false;
  } else if (c.window >= 0) {
    config["sliding_window"] = c.window + 1;
  } else {
    config["attention_bias"] = c.linear_bias;
    config["mlp_bias"] = c.linear_bias;
  }
  return config;
}

namespace {

// A model written as transformers' `family`, which has none of `unlike` (whether the model has each, and what it is):
// the first the model has, refused.
common::Status NoneOf(std::string_view family, std::initializer_list<std::pair<bool, std::string_view>> unlike) {
  for (const auto& [has, what] : unlike) {
    if (has) {
      return common::FailedPrecondition("transformers' {}, has no {}: --export writes this model's weights", family,
                                        what);
    }
  }
  return common::Status::Ok();
}

}  // namespace

common::Status HuggingFaceExportable(const ModelConfig& c) {
  const bool gpt = c.arch == Arch::kGpt;
  const std::string_view family = gpt ? "GPT-2" : "Llama";  // transformers' class for the architecture
  if (c.other_norm && gpt) {
    return common::FailedPrecondition("transformers' {} has {} norms, and this model's are {} (--normalization): it "
                                      "has no Hugging Face class; --export writes its weights",
                                      family, NormName(ArchNorm(c.arch)), NormName(c.norm()));
  }
  if (c.other_norm) {  // written as StableLM (ExportClass)
    SRUNWAY_RETURN_IF_ERROR(NoneOf(
        "StableLM, the Llama with LayerNorms (--normalization LayerNorm)",
        {{c.linear_bias, "biases beside q, k and v's (Llama's flags without --disable-bias-linear)"},
         {c.qk_norm, "q and k norms shared by the heads (--qk-layernorm)"},
         {c.rotary_interleaved, "interleaved RoPE (--rotary-interleaved)"},
         {c.rope_scaling_factor != 0 || c.rope_linear_factor != 1.0f || c.longrope || c.yarn,
          "scaled RoPE (--use-rope-scaling, --rotary-seq-len-interpolation-factor, YaRN, LongRoPE)"},
         {c.kv_channels != 0, "heads of their own width (--kv-channels)"},
         {c.window >= 0, "sliding window (--window-size)"}}));
  }
  if (c.no_positions) {
    return common::FailedPrecondition("transformers' {} has positions ({}), and this model has none "
                                      "(--position-embedding-type none): it has no Hugging Face class; --export "
                                      "writes its weights", family, gpt ? "a learned table" : "RoPE");
  }
  if (!gpt && c.other_positions) {
    return common::FailedPrecondition("transformers' Llama turns RoPE, and this model has a learned table of positions "
                                      "(--position-embedding-type learned_absolute): it has no Hugging Face class; "
                                      "--export writes its weights");
  }
  if (gpt && c.other_positions) {  // written as Nemotron: squared ReLU, LayerNorms, RoPE over whole pairs unscaled
    SRUNWAY_RETURN_IF_ERROR(NoneOf(
        "Nemotron, the GPT with RoPE (--position-embedding-type rope)",
        {{!c.squared_relu, "GELU (its FFN's activation is squared ReLU, --squared-relu)"},
         {c.qkv_bias, "biases on q, k and v alone (--add-qkv-bias)"},
         {c.rotary_interleaved, "interleaved RoPE (--rotary-interleaved)"},
         {c.rope_scaling_factor != 0 || c.rope_linear_factor != 1.0f || c.yarn.has_value(),
          "scaled RoPE read here (--use-rope-scaling, --rotary-seq-len-interpolation-factor, YaRN)"}}));
  } else if (gpt) {  // GPT2LMHeadModel: a learned table, every bias, as many key and value heads as queries
    SRUNWAY_RETURN_IF_ERROR(NoneOf("GPT2LMHeadModel, GPT-2's class",
                                   {{c.no_linear_bias, "layers without biases (--disable-bias-linear)"},
                                    {c.n_kv_head != c.n_head, "grouped-query attention (--num-query-groups)"}}));
  }
  if (c.geglu && !gpt) {  // written as Gemma (ExportClass)
    SRUNWAY_RETURN_IF_ERROR(NoneOf(
        "Gemma, the Llama with GeGLU (--geglu)",
        {{c.embedding_multiplier != GemmaEmbeddingMultiplier(c.d_model),
          "embedding multiplier but the square root of its width (--embedding-multiplier)"},
         {c.glu_linear_offset != 0.0f || c.glu_clamp != 0.0f,
          "offset or clamp in its FFN (--glu-linear-offset, --activation-func-clamp-value)"},
         {c.other_norm.has_value(), "LayerNorms (--normalization LayerNorm)"},
         {c.qkv_bias || c.linear_bias, "biases (--add-qkv-bias, or Llama's flags without --disable-bias-linear)"},
         {c.qk_norm, "q and k norms (--qk-layernorm)"},
         {c.rotary_percent != 1.0 || c.rotary_interleaved,
          "RoPE over part of each head or in interleaved pairs (--rotary-percent, --rotary-interleaved)"},
         {c.longrope.has_value(), "LongRoPE"},
         {c.window >= 0, "sliding window (--window-size)"}}));
  } else if (c.other_glu()) {
    return common::FailedPrecondition("transformers' Llama's FFN is SwiGLU, silu(gate) * up, and this model's is "
                                      "not (--quick-geglu, --glu-linear-offset, --activation-func-clamp-value): it "
                                      "has no Hugging Face class; --export writes its weights");
  } else if (c.embedding_multiplier != 1.0f) {
    return common::FailedPrecondition("transformers' {} takes its embedding as it is, and this model's times {} "
                                      "(--embedding-multiplier; Gemma's, with --geglu, is the square root of its "
                                      "width): it has no Hugging Face class; --export writes its weights", family,
                                      c.embedding_multiplier);
  }
  if (c.sinks()) {
    return common::FailedPrecondition("transformers' {} has a plain softmax in its attention, and this model's has a "
                                      "sink (--softmax-type {}): it has no Hugging Face class; --export writes its "
                                      "weights", family, SoftmaxName(c.softmax));
  }
  if (c.rotary_interleaved && !c.other_norm) {  // written as GLM (ExportClass)
    SRUNWAY_RETURN_IF_ERROR(NoneOf(
        "GLM, the Llama that turns RoPE's pairs interleaved (--rotary-interleaved)",
        {{c.linear_bias, "biases beside q, k and v's (Llama's flags without --disable-bias-linear)"},
         {c.qk_norm, "q and k norms (--qk-layernorm)"},
         {c.rope_scaling_factor != 0 || c.rope_linear_factor != 1.0f || c.longrope,
          "scaled RoPE (--use-rope-scaling, --rotary-seq-len-interpolation-factor, LongRoPE)"},
         {c.window >= 0, "sliding window (--window-size)"}}));
  } else if ((c.rotary_percent != 1.0 || c.longrope) && !c.other_norm) {  // written as Phi-3 (ExportClass)
    SRUNWAY_RETURN_IF_ERROR(NoneOf(
        "Phi3, the Llama that turns a share of each head by RoPE (--rotary-percent) or LongRoPE",
        {{c.qkv_bias || c.linear_bias, "biases (--add-qkv-bias, or Llama's flags without --disable-bias-linear)"},
         {c.qk_norm, "q and k norms (--qk-layernorm)"},
         {c.rope_scaling_factor != 0 || c.rope_linear_factor != 1.0f,
          "scaled RoPE (--use-rope-scaling, --rotary-seq-len-interpolation-factor)"},
         {c.kv_channels != 0, "heads of their own width (--kv-channels)"},
         {!c.window_layers.empty(), "a window in some layers only (--window-attn-skip-freq)"}}));
  }
  if (c.window >= 0 && gpt) {
    return common::FailedPrecondition("the Hugging Face {} configs written here attend to every key before each "
                                      "query, and this model through a window of {} (--window-size): --export "
                                      "writes its weights", family, c.window);
  }
  const bool qwen = c.qkv_bias || c.qk_norm;  // written as Qwen2 or Qwen3
  if (c.window >= 0 && qwen) {
    bool suffix = true;  // no layer with the window before one without
    for (int l = 1; l < c.n_layer; ++l) suffix = suffix && (c.windowed(l) || !c.windowed(l - 1));
    if (!suffix) {
      return common::FailedPrecondition("transformers' Qwen2 and Qwen3 attend through the window in the layers from "
                                        "max_window_layers on, and this model in others too (--window-attn-skip-freq)"
                                        ": --export writes its weights");
    }
  } else if (c.window >= 0 && (!c.window_layers.empty() || c.linear_bias)) {
    return common::FailedPrecondition(
        "transformers' Mistral, the Llama with a sliding window, has it in every layer and no biases, and this model "
        "{}: --export writes its weights",
        !c.window_layers.empty() ? "attends through it in some layers only (--window-attn-skip-freq)"
                                 : "has a bias on every linear layer (Llama's flags without --disable-bias-linear)");
  }
  if (!c.no_rope.empty()) {
    return common::FailedPrecondition("transformers' Llama turns RoPE in every layer, and this model skips it in "
                                      "some (--no-rope-freq): it has no Hugging Face class; --export writes its "
                                      "weights");
  }
  if (gpt && !c.other_positions && c.kv_channels != 0) {
    return common::FailedPrecondition("transformers' GPT-2 has heads n_embd / n_head wide, and this model's are {} "
                                      "(--kv-channels): it has no Hugging Face class; --export writes its weights",
                                      c.head_dim());
  }
  if (!c.qk_norm) return common::Status::Ok();
  if (gpt) {
    return common::FailedPrecondition("transformers' GPT-2 has no q and k norms (--qk-layernorm): a GPT with them has "
                                      "no Hugging Face class; --export writes its weights");
  }
  if (c.qkv_bias) {
    return common::FailedPrecondition("transformers' Qwen3, a Llama with q and k norms (--qk-layernorm), biases "
                                      "o_proj too when it biases q, k and v (--add-qkv-bias): this model has no "
                                      "Hugging Face class; --export writes its weights");
  }
  if (c.linear_bias) {
    return common::FailedPrecondition("transformers' Qwen3, a Llama with q and k norms (--qk-layernorm), has no MLP "
                                      "biases, and this model has a bias on every linear layer (without "
                                      "--disable-bias-linear): it has no Hugging Face class; --export writes its "
                                      "weights");
  }
  return common::Status::Ok();
}

std::string HuggingFaceArchitecture(const ModelConfig& c) { return ExportClass(c).architecture; }

common::Status ExportHuggingFace(const std::filesystem::path& dir, const ModelConfig& config,
                                 std::span<const float> params, const std::optional<HfTokenizer>& tokenizer,
                                 const HfExport& how) {
  SRUNWAY_RETURN_IF_ERROR(HuggingFaceExportable(config));
  const ParamLayout layout(config);
  if (params.size() != static_cast<size_t>(layout.numel())) {
    return common::InvalidArgument("{} parameters given for a model of {}", params.size(), layout.numel());
  }
  const NameMap names = Names(ExportClass(config).naming, config, "", /*file_head=*/true);
  std::vector<NamedTensor> tensors;
  // GPT-2's Conv1D weights, [in, out], and norm weights stored less 1 made whole (a moved vector keeps its buffer).
  std::vector<std::vector<float>> transposed;
  for (const TensorSpec& spec : layout.tensors()) {
    const int64_t cols = spec.shape.size() == 1 ? 1 : spec.shape[1];
    const Mapping& mapping = names.ours.at(spec.name);
    int64_t row = 0;
    for (const Source& source : mapping.sources) {
      const int64_t rows = source.rows > 0 ? source.rows : spec.shape[0];
      const float* from = params.data() + spec.offset + row * cols;
      if (mapping.shift != 0) {
        std::vector<float>& whole = transposed.emplace_back(from, from + rows * cols);
        for (float& x : whole) x += mapping.shift;
        from = whole.data();
      }
      if (source.transposed) {
        std::vector<float>& t = transposed.emplace_back(static_cast<size_t>(rows * cols));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = from[r * cols + c];
        }
        tensors.push_back({source.name, {cols, rows}, t.data()});
      } else {
        std::vector<int64_t> shape = spec.shape;
        shape[0] = rows;
        tensors.push_back({source.name, std::move(shape), from});
      }
      row += rows;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return common::FailedPrecondition("{}: cannot create the directory: {}", dir.string(), ec.message());
  // Shards as save_pretrained cuts them: tensors in order, a new file where the next would pass the limit.
  std::vector<std::vector<NamedTensor>> shards(1);
  uint64_t total = 0, in_shard = 0;
  for (NamedTensor& tensor : tensors) {
    const uint64_t bytes = StoredBytes(tensor, how.dtype);
    if (!shards.back().empty() && in_shard + bytes > how.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(std::move(tensor));
    in_shard += bytes;
    total += bytes;
  }
  std::map<std::string, std::string> files;
  std::vector<std::string> weights;  // the weight files of this export, one a shard
  if (shards.size() == 1) {
    weights.push_back("model.safetensors");
  } else {
    common::Json map = common::Json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      weights.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, shards.size()));
      for (const NamedTensor& tensor : shards[i]) map[tensor.name] = weights.back();
    }
    const common::Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
    files["model.safetensors.index.json"] = index.dump(2) + "\n";
  }
  for (size_t i = 0; i < shards.size(); ++i) {
    SRUNWAY_RETURN_IF_ERROR(WriteSafetensors(dir / weights[i], shards[i], {{"format", "pt"}}, how.dtype));
  }
  common::Json json = HuggingFaceConfig(config, how.dtype);
  // Other kinds' tokenizer files, left by an earlier export (removed below with its stale weights).
  std::vector<std::string> stale;
  if (tokenizer && (!tokenizer->tokenizer_json.empty() || !tokenizer->tokenizer_model.empty())) {
    // A Hugging Face tokenizer as it was read, or a SentencePiece model (LlamaTokenizer reads it).
    if (tokenizer->bos >= 0) json["bos_token_id"] = tokenizer->bos;
    if (tokenizer->eos >= 0) json["eos_token_id"] = tokenizer->eos;
    const bool model = !tokenizer->tokenizer_model.empty();
    if (model) {
      files["tokenizer.model"] = tokenizer->tokenizer_model;
    } else {
      files["tokenizer.json"] = tokenizer->tokenizer_json;
    }
    if (!tokenizer->tokenizer_config.empty()) files["tokenizer_config.json"] = tokenizer->tokenizer_config;
    stale = {"vocab.json", "merges.txt", model ? "tokenizer.json" : "tokenizer.model"};
  } else if (tokenizer) {
    json["bos_token_id"] = tokenizer->bos;
    json["eos_token_id"] = tokenizer->eos;
    files["vocab.json"] = tokenizer->vocab_json;
    files["merges.txt"] = tokenizer->merges_txt;
    const common::Json tokenizer_config = {
        {"tokenizer_class", "GPT2Tokenizer"}, {"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"},
        {"unk_token", "<|endoftext|>"}, {"add_prefix_space", false}, {"model_max_length", config.seq_len}};
    files["tokenizer_config.json"] = tokenizer_config.dump(2) + "\n";
    stale = {"tokenizer.json", "tokenizer.model"};
  }
  files["config.json"] = json.dump(2) + "\n";
  SRUNWAY_RETURN_IF_ERROR(common::WriteFilesAtomic(dir, files));
  // An earlier export's weights of the other form (or of another shard count) go: from_pretrained takes
  // model.safetensors before an index, and stale shards would be read as the model by anyone listing the files.
  // So does its tokenizer of the other kind: AutoTokenizer would take tokenizer.json before vocab.json.
  static const std::regex kWeightFile(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    const bool other_tokenizer = std::find(stale.begin(), stale.end(), name) != stale.end();
    if ((other_tokenizer || std::regex_match(name, kWeightFile)) && !files.contains(name) &&
        std::find(weights.begin(), weights.end(), name) == weights.end()) {
      std::error_code removed;
      if (!std::filesystem::remove(entry.path(), removed) && removed) {
        return common::FailedPrecondition("{}: cannot remove an earlier export's {}: {}", dir.string(), name,
                                          removed.message());
      }
    }
  }
  return common::Status::Ok();
}

common::StatusOr<ModelConfig> WeightsModel(const std::filesystem::path& path) {
  SRUNWAY_ASSIGN_OR_RETURN(WeightFiles files, WeightFiles::Open(path));
  SRUNWAY_ASSIGN_OR_RETURN(std::optional<ModelConfig> recorded, RecordedModel(files));
  if (recorded) return *recorded;
  const std::filesystem::path config = path.parent_path() / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(config, ec)) {
    return common::NotFound("{}: no model recorded in its header and no config.json beside it: give --preset and "
                            "the size flags", path.string());
  }
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ReadJsonFile(config));
  return FromHuggingFaceConfig(json, config.string());
}

}  // namespace srunway::trainer
