// Model presets, validation and the JSON form that checkpoints carry.
#include "trainer/model/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <numbers>
#include <tuple>

namespace srunway::trainer {
namespace {

struct PresetEntry {
  std::string name;
  ModelConfig config;
};

ModelConfig Gpt(int n_layer, int d_model, int n_head, int seq_len, int vocab, float init_std) {
  ModelConfig c;
  c.arch = Arch::kGpt;
  c.n_layer = n_layer;
  c.d_model = d_model;
  c.n_head = n_head;
  c.n_kv_head = n_head;
  c.d_ff = 4 * d_model;
  c.seq_len = seq_len;
  c.vocab = vocab;
  c.init_std = init_std;
  return c;
}

ModelConfig Llama(int n_layer, int d_model, int n_head, int n_kv_head, int d_ff, int seq_len, int vocab,
                  float rope_theta) {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.n_layer = n_layer;
  c.d_model = d_model;
  c.n_head = n_head;
  c.n_kv_head = n_kv_head;
  c.d_ff = d_ff;
  c.seq_len = seq_len;
  c.vocab = vocab;
  c.init_std = 0.02f;
  c.rope_theta = rope_theta;
  return c;
}

// Sizes as published: GPT-2 (vocabulary padded to 50304 as llm.c and Megatron do), NeMo's GPT-3 configs
// (gpt3-5b: 24 layers, hidden 4096, FFN 16384, 32 heads, seq 2048, init std 0.01), Llama 2 7B and Llama 3 8B.
const std::vector<PresetEntry>& Presets() {
  static const std::vector<PresetEntry> kPresets = {
      {"gpt-tiny", Gpt(2, 64, 4, 128, 512, 0.02f)},
      {"llama-tiny", Llama(2, 64, 4, 2, 176, 128, 512, 10000.0f)},
      {"gpt2-124m", Gpt(12, 768, 12, 1024, 50304, 0.02f)},
      {"gpt2-350m", Gpt(24, 1024, 16, 1024, 50304, 0.02f)},
      {"gpt3-1.3b", Gpt(24, 2048, 16, 2048, 50304, 0.02f)},
      {"gpt3-5b", Gpt(24, 4096, 32, 2048, 50304, 0.01f)},
      {"llama2-7b", Llama(32, 4096, 32, 32, 11008, 4096, 32000, 10000.0f)},
      {"llama3-8b", Llama(32, 4096, 32, 8, 14336, 8192, 128256, 500000.0f)},
  };
  return kPresets;
}

}  // namespace

std::string_view ArchName(Arch arch) { return arch == Arch::kGpt ? "gpt" : "llama"; }

std::string_view NormName(Norm norm) { return norm == Norm::kLayerNorm ? "LayerNorm" : "RMSNorm"; }

std::optional<Norm> NormFromName(std::string_view name) {
  for (Norm norm : {Norm::kLayerNorm, Norm::kRmsNorm}) {
    if (name == NormName(norm)) return norm;
  }
  return std::nullopt;
}

std::string_view SoftmaxName(Softmax softmax) {
  switch (softmax) {
    case Softmax::kVanilla: return "vanilla";
    case Softmax::kOffByOne: return "off-by-one";
    case Softmax::kLearnable: return "learnable";
  }
  return "vanilla";
}

std::optional<Softmax> SoftmaxFromName(std::string_view name) {
  for (Softmax softmax : {Softmax::kVanilla, Softmax::kOffByOne, Softmax::kLearnable}) {
    if (name == SoftmaxName(softmax)) return softmax;
  }
  return std::nullopt;
}

void SetNorm(ModelConfig& c, Norm norm) {
  c.other_norm.reset();
  if (c.norm() != norm) c.other_norm = norm;
}

void SetTiedEmbeddings(ModelConfig& c, bool tied) {
  c.other_tie.reset();
  if (c.tied_embeddings() != tied) c.other_tie = tied;
}

std::string ModelKind(const ModelConfig& c) {
  // " in K of N layers" where a list marks some of them.
  auto in_some = [&](const std::vector<uint8_t>& layers) {
    if (layers.empty()) return std::string();
    return fmt::format(" in {} of {} layers", std::count(layers.begin(), layers.end(), 1), c.n_layer);
  };
  std::vector<std::string> parts;
  if (c.other_norm) parts.push_back(fmt::format("with {}", NormName(*c.other_norm)));
  if (c.other_positions) parts.push_back(c.arch == Arch::kGpt ? "with RoPE" : "with learned positions");
  if (c.no_linear_bias) parts.push_back("without biases");
  if (c.other_tie) parts.push_back(*c.other_tie ? "with its output layer tied" : "with its own output layer");
  if (c.no_positions) parts.push_back("without positions");
  if (!c.no_rope.empty()) parts.push_back("without RoPE" + in_some(c.no_rope));
  if (c.window >= 0) parts.push_back(fmt::format("with a window of {} keys back", c.window) + in_some(c.window_layers));
  if (c.linear_bias) parts.push_back("with biases");
  if (c.yarn) parts.push_back(fmt::format("with YaRN ({}x)", c.yarn->factor));
  if (c.longrope) parts.push_back("with LongRoPE");
  if (c.exact_gelu) parts.push_back("with exact GELU");
  if (c.quick_geglu) parts.push_back("with quick GEGLU");
  if (c.geglu) parts.push_back("with GeGLU");
  if (c.embedding_multiplier != 1.0f) {
    parts.push_back(fmt::format("with its embedding times {}", c.embedding_multiplier));
  }
  if (c.softmax == Softmax::kOffByOne) parts.push_back("with an off-by-one softmax");
  if (c.softmax == Softmax::kLearnable) parts.push_back("with learned attention sinks");
  if (parts.empty()) return std::string(ArchName(c.arch));
  return fmt::format("{} {}", ArchName(c.arch), fmt::join(parts, ", "));
}

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& entry : Presets()) names.push_back(entry.name);
    return names;
  }();
  return kNames;
}

common::StatusOr<ModelConfig> Preset(std::string_view name) {
  for (const auto& entry : Presets()) {
    if (entry.name == name) return entry.config;
  }
  return common::InvalidArgument("unknown preset '{}' (known: {})", name, fmt::join(PresetNames(), ", "));
}

namespace {

// Megatron's list expressions (its _eval_pattern: digits, [ ] ( ) + * and commas, as Python evaluates them): numbers
// and lists of numbers, + adding numbers or joining lists, * multiplying numbers or repeating a list. A list longer
// than `most` is an error as soon as it is made (nothing shortens one), as is a number above 2^30 and nesting deeper
// than 64, so that no text costs more than its length and `most`.
class PatternParser {
 public:
  struct Value {
    bool is_list = false;
    int64_t number = 0;
    std::vector<int64_t> items;
  };

  // `flag` names the text in errors.
  PatternParser(std::string_view flag, std::string_view text, size_t most) : flag_(flag), text_(text), most_(most) {}

  common::StatusOr<Value> Parse() {
    SRUNWAY_ASSIGN_OR_RETURN(Value value, Sum(0));
    if (at_ < text_.size()) return Error(fmt::format("'{}' where the expression should end", text_[at_]));
    return value;
  }

 private:
  static constexpr int64_t kLargest = int64_t{1} << 30;
  static constexpr int kDeepest = 64;

  // `what` went wrong at text_[at] (by default where the parser is).
  common::Status Error(std::string_view what) const { return Error(what, at_); }
  common::Status Error(std::string_view what, size_t at) const {
    return common::InvalidArgument("{} {}: {} at character {}", flag_, text_, what, at + 1);
  }
  bool Take(char c) {
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  // `v`, made at text_[at], within the bounds.
  common::Status Fits(const Value& v, size_t at) const {
    if (v.is_list && v.items.size() > most_) return Error(fmt::format("a list longer than {}", most_), at);
    if (!v.is_list && v.number > kLargest) return Error(fmt::format("a number above {}", kLargest), at);
    return common::Status::Ok();
  }

  common::StatusOr<Value> Sum(int depth) {
    SRUNWAY_ASSIGN_OR_RETURN(Value left, Product(depth));
    for (size_t op = at_; Take('+'); op = at_) {
      SRUNWAY_ASSIGN_OR_RETURN(const Value right, Product(depth));
      if (left.is_list != right.is_list) return Error("a number and a list added", op);
      if (left.is_list) {
        left.items.insert(left.items.end(), right.items.begin(), right.items.end());
      } else {
        left.number += right.number;
      }
      SRUNWAY_RETURN_IF_ERROR(Fits(left, op));
    }
    return left;
  }

  common::StatusOr<Value> Product(int depth) {
    SRUNWAY_ASSIGN_OR_RETURN(Value left, Atom(depth));
    for (size_t op = at_; Take('*'); op = at_) {
      SRUNWAY_ASSIGN_OR_RETURN(Value right, Atom(depth));
      if (left.is_list && right.is_list) return Error("two lists multiplied", op);
      if (!left.is_list && !right.is_list) {
        left.number *= right.number;  // both at most 2^30
        SRUNWAY_RETURN_IF_ERROR(Fits(left, op));
        continue;
      }
      if (!left.is_list) std::swap(left, right);
      if (right.number > 0 && left.items.size() * static_cast<uint64_t>(right.number) > most_) {
        return Error(fmt::format("a list longer than {}", most_), op);
      }
      std::vector<int64_t> repeated;  // as long as `most` at most, in as many steps (none for an empty list)
      for (int64_t i = 0; i < right.number && !left.items.empty(); ++i) {
        repeated.insert(repeated.end(), left.items.begin(), left.items.end());
      }
      left.items = std::move(repeated);
    }
    return left;
  }

  common::StatusOr<Value> Atom(int depth) {
    if (depth > kDeepest) return Error(fmt::format("nesting deeper than {}", kDeepest));
    if (Take('(')) {
      SRUNWAY_ASSIGN_OR_RETURN(Value inner, Sum(depth + 1));
      if (!Take(')')) return Error("no ')'");
      return inner;
    }
    if (Take('[')) {
      Value list;
      list.is_list = true;
      if (Take(']')) return list;
      do {
        const size_t item_at = at_;
        SRUNWAY_ASSIGN_OR_RETURN(const Value item, Sum(depth + 1));
        if (item.is_list) return Error("a list inside a list", item_at);
        list.items.push_back(item.number);
        SRUNWAY_RETURN_IF_ERROR(Fits(list, item_at));
      } while (Take(','));
      if (!Take(']')) return Error("no ']'");
      return list;
    }
    if (at_ >= text_.size() || text_[at_] < '0' || text_[at_] > '9') return Error("no number, list or '('");
    Value number;
    const size_t first = at_;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      number.number = number.number * 10 + (text_[at_++] - '0');
      SRUNWAY_RETURN_IF_ERROR(Fits(number, first));
    }
    return number;
  }

  std::string_view flag_, text_;
  size_t most_;
  size_t at_ = 0;
};

}  // namespace

namespace {

// One of Megatron's flags that say something of each layer: its name, and what an entry of 1 and of 0 mean.
struct LayerFlag {
  std::string_view name, one, zero;
};
constexpr LayerFlag kNoRopeFlag{"--no-rope-freq", "skips RoPE in a layer", "keeps it"};
constexpr LayerFlag kWindowFlag{"--window-attn-skip-freq", "attends through the window (--window-size)",
                                "to every key before"};

// The flag's text when it is an integer: its value, or an error naming the flag; nullopt when it is not all digits.
common::StatusOr<std::optional<int64_t>> LayerFlagNumber(const LayerFlag& flag, std::string_view text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  SRUNWAY_ASSIGN_OR_RETURN(const PatternParser::Value number, PatternParser(flag.name, text, 0).Parse());
  return number.number;
}

// The flag's list expression: 0 or 1 for each of n_layer layers, or an error naming the flag and what is wrong.
common::StatusOr<std::vector<uint8_t>> LayerList(const LayerFlag& flag, std::string_view text, int n_layer) {
  auto refuse = [&](std::string_view why) -> common::Status {
    return common::InvalidArgument("{} {}: {}", flag.name, text, why);
  };
  if (text.empty() || text.find_first_not_of("0123456789,[]()+*") != std::string_view::npos) {
    return refuse(fmt::format("give an integer N or a list expression of Megatron's form, digits, [ ] ( ) + * and "
                              "commas, such as ([0]*3+[1])*2 (1 where a layer {})", flag.one));
  }
  SRUNWAY_ASSIGN_OR_RETURN(const PatternParser::Value pattern,
                           PatternParser(flag.name, text, static_cast<size_t>(std::max(n_layer, 0))).Parse());
  if (!pattern.is_list) return refuse("a number in parentheses, not a list (give the number alone)");
  if (pattern.items.size() != static_cast<size_t>(n_layer)) {
    return refuse(fmt::format("names {} layers, and the model has {}", pattern.items.size(), n_layer));
  }
  std::vector<uint8_t> layers;
  for (size_t l = 0; l < pattern.items.size(); ++l) {
    if (pattern.items[l] > 1) {
      return refuse(fmt::format("layer {}'s entry is {}: 1 {}, 0 {}", l, pattern.items[l], flag.one, flag.zero));
    }
    layers.push_back(static_cast<uint8_t>(pattern.items[l]));
  }
  return layers;
}

// Every entry `value`: what every entry point stores as no list.
void ClearIfAll(std::vector<uint8_t>& layers, uint8_t value) {
  if (std::all_of(layers.begin(), layers.end(), [&](uint8_t layer) { return layer == value; })) layers.clear();
}

}  // namespace

common::StatusOr<std::vector<uint8_t>> NoRopeLayers(std::string_view text, int n_layer) {
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<int64_t> every, LayerFlagNumber(kNoRopeFlag, text));
  std::vector<uint8_t> layers;
  if (every) {
    if (*every == 0) return layers;  // as Megatron's: 0 skips none
    if (n_layer % *every != 0) {
      return common::InvalidArgument("--no-rope-freq {}: the model's {} layers are not a multiple of {} (RoPE is "
                                     "skipped in the last layer of every {})", text, n_layer, *every, *every);
    }
    layers.assign(static_cast<size_t>(n_layer), 0);
    for (int64_t l = *every - 1; l < n_layer; l += *every) layers[static_cast<size_t>(l)] = 1;
    return layers;
  }
  SRUNWAY_ASSIGN_OR_RETURN(layers, LayerList(kNoRopeFlag, text, n_layer));
  ClearIfAll(layers, 0);
  return layers;
}

common::StatusOr<std::vector<uint8_t>> WindowLayers(std::string_view text, int n_layer) {
  SRUNWAY_ASSIGN_OR_RETURN(const std::optional<int64_t> every, LayerFlagNumber(kWindowFlag, text));
  std::vector<uint8_t> layers;
  if (every) {
    if (*every == 0) {
      return common::InvalidArgument("--window-attn-skip-freq 0: give N of 1 or more (every Nth layer attends to "
                                     "every key before, the others through the window)");
    }
    for (int64_t l = 0; l < n_layer; ++l) layers.push_back((l + 1) % *every != 0 ? 1 : 0);
  } else {
    SRUNWAY_ASSIGN_OR_RETURN(layers, LayerList(kWindowFlag, text, n_layer));
  }
  ClearIfAll(layers, 1);
  return layers;
}

common::StatusOr<int> WindowSize(std::string_view text) {
  auto refuse = [&](std::string_view why) -> common::Status {
    return common::InvalidArgument("--window-size {}: {}", text, why);
  };
  std::string_view inner = text;
  if (inner.starts_with('(') && inner.ends_with(')') && inner.size() >= 2) inner = inner.substr(1, inner.size() - 2);
  const size_t comma = inner.find(',');
  int sides[2] = {0, 0};
  const std::string_view parts[2] = {inner.substr(0, comma),
                                     comma == std::string_view::npos ? "" : inner.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    std::string_view part = parts[i];
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), sides[i]);
    if (comma == std::string_view::npos || part.empty() || error != std::errc() || end != part.data() + part.size()) {
      return refuse("give L,0: each query attends to itself and the L keys before it (-1,0: to every key before)");
    }
  }
  if (sides[1] != 0 && !(sides[0] == -1 && sides[1] == -1)) {
    return refuse("srunway-train's attention is causal, so a window reaches no key after its query: give L,0");
  }
  if (sides[0] < -1 || sides[0] > (1 << 24)) {
    return refuse(fmt::format("the window's left side must be -1 (no window) to {}", 1 << 24));
  }
  return sides[0];
}

namespace {

// A field of the model's configuration as a checkpoint names it, with the srunway-train flag that sets it.
std::string Field(std::string_view name) {
  constexpr std::pair<std::string_view, std::string_view> kFlags[] = {
      {"n_layer", "--num-layers"}, {"d_model", "--hidden-size"},    {"n_head", "--num-attention-heads"},
      {"n_kv_head", "--num-query-groups"}, {"d_ff", "--ffn-hidden-size"}, {"seq_len", "--max-position-embeddings"},
      {"vocab", "--vocab-size"}, {"rotary_percent", "--rotary-percent"}};
  for (const auto& [field, flag] : kFlags) {
    if (field == name) return fmt::format("{} ({})", field, flag);
  }
  return std::string(name);
}

// `layers`, the list `what` of the model `c`: 0 or 1 for each of its layers.
common::Status OneEachLayer(const ModelConfig& c, const std::vector<uint8_t>& layers, std::string_view what) {
  if (layers.size() != static_cast<size_t>(c.n_layer)) {
    return common::InvalidArgument("{} names {} layers, and the model has {}", what, layers.size(), c.n_layer);
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l] > 1) return common::InvalidArgument("{}: layer {}'s entry is {}, not 0 or 1", what, l, layers[l]);
  }
  return common::Status::Ok();
}

// `what` asks for RoPE, which the model `c` does not turn: a GPT's positions are learned, and a model without
// positions has neither.
common::Status NoRope(const ModelConfig& c, std::string_view what) {
  if (c.no_positions) {
    return common::InvalidArgument("{} needs RoPE, which a model without positions (--position-embedding-type none) "
                                   "has not", what);
  }
  if (c.arch == Arch::kLlama) {
    return common::InvalidArgument("{} needs RoPE, which a Llama's learned positions (--position-embedding-type "
                                   "learned_absolute) are not", what);
  }
  return common::InvalidArgument("{} needs RoPE, which GPT's learned positions are not: a Llama model, or a GPT with "
                                 "--position-embedding-type rope", what);
}

// Each of `values` positive and finite, or an error naming the first that is not: "{whose} {name} must be positive
// and finite, got {value}".
common::Status PositiveAndFinite(std::string_view whose,
                                 std::initializer_list<std::pair<const char*, float>> values) {
  for (const auto& [name, value] : values) {
    if (!(value > 0 && std::isfinite(value))) {
      return common::InvalidArgument("{} {} must be positive and finite, got {}", whose, name, value);
    }
  }
  return common::Status::Ok();
}

// Megatron's _yarn_get_mscale: 0.1 a ln(factor) + 1, or 1 where the factor does not lengthen positions.
double YarnMscale(double factor, double a) { return factor <= 1 ? 1.0 : 0.1 * a * std::log(factor) + 1.0; }

// `what` beside the first of `others` (a setting's name, and whether the model has it) that the model has: refused,
// saying `why`.
common::Status NotBeside(std::string_view what, std::initializer_list<std::pair<const char*, bool>> others,
                         std::string_view why) {
  for (const auto& [other, given] : others) {
    if (given) return common::InvalidArgument("{} is not taken with {}: {}", what, other, why);
  }
  return common::Status::Ok();
}

common::Status ValidateYarn(const ModelConfig& c) {
  constexpr std::string_view kYarn = "YaRN (--position-embedding-type yarn)";
  if (!c.rope_turns()) return NoRope(c, kYarn);
  SRUNWAY_RETURN_IF_ERROR(
      NotBeside(kYarn,
                {{"Llama 3.1's RoPE scaling (--use-rope-scaling)", c.rope_scaling_factor != 0},
                 {"linear RoPE scaling (--rotary-seq-len-interpolation-factor)", c.rope_linear_factor != 1.0f},
                 {"RoPE over part of each head (--rotary-percent)", c.rotary_percent != 1.0},
                 {"interleaved RoPE (--rotary-interleaved)", c.rotary_interleaved}},
                "Megatron's YaRN scales RoPE its own way and turns each whole head in two halves"));
  const YarnScaling& y = *c.yarn;
  SRUNWAY_RETURN_IF_ERROR(PositiveAndFinite("YaRN's",
                                            {{"rotary_scaling_factor (--yarn-rotary-scaling-factor)", y.factor},
                                             {"beta_slow (--yarn-beta-slow)", y.beta_slow},
                                             {"beta_fast (--yarn-beta-fast)", y.beta_fast}}));
  // The ramp runs from the pair beta_fast turns to the one beta_slow does, which must come after it.
  if (!(y.beta_fast > y.beta_slow)) {
    return common::InvalidArgument("YaRN's beta_fast (--yarn-beta-fast) {} must be larger than its beta_slow "
                                   "(--yarn-beta-slow) {}", y.beta_fast, y.beta_slow);
  }
  if (y.original_positions <= 0) {
    return common::InvalidArgument("YaRN's original_max_position_embeddings (--yarn-original-max-position-embeddings) "
                                   "must be positive, got {}", y.original_positions);
  }
  // The pair that turns r times is hd ln(positions / (2 pi r)) / (2 ln theta): no pair at all unless theta > 1.
  if (!(c.rope_theta > 1.0f)) {
    return common::InvalidArgument("YaRN (--position-embedding-type yarn) needs a RoPE base (--rotary-base) above 1, "
                                   "each pair turning slower than the one before, got {}", c.rope_theta);
  }
  for (const auto& [name, value] : {std::pair{"mscale (--yarn-mscale)", y.mscale},
                                    std::pair{"mscale_all_dim (--yarn-mscale-all-dim)", y.mscale_all_dim}}) {
    if (!(value >= 0 && std::isfinite(value))) {
      return common::InvalidArgument("YaRN's {} must be 0 or more and finite, got {}", name, value);
    }
  }
  return common::Status::Ok();
}

common::Status ValidateLongRope(const ModelConfig& c) {
  constexpr std::string_view kLongRope = "LongRoPE (a Hugging Face config's rope_scaling of type longrope)";
  if (!c.rope_turns()) return NoRope(c, kLongRope);
  SRUNWAY_RETURN_IF_ERROR(
      NotBeside(kLongRope,
                {{"Llama 3.1's RoPE scaling (--use-rope-scaling)", c.rope_scaling_factor != 0},
                 {"linear RoPE scaling (--rotary-seq-len-interpolation-factor)", c.rope_linear_factor != 1.0f},
                 {"YaRN (--position-embedding-type yarn)", c.yarn.has_value()}},
                "each scales RoPE its own way"));
  const LongRope& l = *c.longrope;
  const int pairs = c.rotary_dim() / 2;
  for (const auto& [name, factors] :
       {std::pair{"short_factor", &l.short_factor}, std::pair{"long_factor", &l.long_factor}}) {
    if (factors->size() != static_cast<size_t>(pairs) || pairs > kMaxRopePairFactors) {
      return common::InvalidArgument("LongRoPE's {} holds {} factors, and RoPE turns {} pairs of each head (at most "
                                     "{})", name, factors->size(), pairs, kMaxRopePairFactors);
    }
    for (const float f : *factors) {
      if (!(f > 0 && std::isfinite(f))) {
        return common::InvalidArgument("LongRoPE's {} must be positive and finite, and holds {}", name, f);
      }
    }
  }
  if (l.original_positions <= 0) {
    return common::InvalidArgument("LongRoPE's original_max_position_embeddings must be positive, got {}",
                                   l.original_positions);
  }
  return PositiveAndFinite("LongRoPE's", {{"attention_factor", l.attention_factor}});
}

}  // namespace

float YarnScaling::attention_factor() const {
  return static_cast<float>(YarnMscale(factor, mscale) / YarnMscale(factor, mscale_all_dim));
}

RopeFrequencies ModelConfig::rope(int T) const {
  RopeFrequencies rope{rope_theta, rope_scaling_factor, rope_low_freq_factor, rope_high_freq_factor,
                       static_cast<float>(rope_original_positions), rope_linear_factor, rotary_dim(),
                       rotary_interleaved};
  if (longrope) {  // Validate holds the factors to the rotary pairs, within the struct's room
    const std::vector<float>& factors =
        T > longrope->original_positions ? longrope->long_factor : longrope->short_factor;
    rope.pair_factors = static_cast<int>(std::min<size_t>(factors.size(), kMaxRopePairFactors));
    std::copy_n(factors.begin(), rope.pair_factors, rope.pair_factor);
    rope.attention_factor = longrope->attention_factor;
  }
  if (!yarn) return rope;
  // Megatron's _yarn_find_correction_range in doubles, as Python: the pair that turns `rotations` times over the
  // original positions is hd ln(positions / (2 pi rotations)) / (2 ln theta); the range from beta_fast's to
  // beta_slow's, rounded outwards unless round_to_int is false, within the head's pairs.
  const int hd = head_dim();
  auto pair_turning = [&](double rotations) {
    return hd * std::log(yarn->original_positions / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(double{rope_theta}));
  };
  double low = pair_turning(yarn->beta_fast), high = pair_turning(yarn->beta_slow);
  if (yarn->round_to_int) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, hd - 1.0);
  if (low == high) high += 0.001;  // as Megatron's _yarn_linear_ramp_mask, lest the ramp divide by 0
  rope.yarn_factor = yarn->factor;
  rope.yarn_low = static_cast<float>(low);
  rope.yarn_high = static_cast<float>(high);
  rope.attention_factor = yarn->attention_factor();
  return rope;
}

common::Status Validate(const ModelConfig& c) {
  const std::pair<const char*, int> positive[] = {{"n_layer", c.n_layer}, {"d_model", c.d_model},
                                                  {"n_head", c.n_head},   {"n_kv_head", c.n_kv_head},
                                                  {"d_ff", c.d_ff},       {"seq_len", c.seq_len},
                                                  {"vocab", c.vocab}};
  for (const auto& [name, value] : positive) {
    if (value <= 0) return common::InvalidArgument("{} must be positive, got {}", Field(name), value);
  }
  // Bounds far past any published model (Llama 3 405B: 126 layers, d_model 16384, d_ff 53248, vocab 128256), so
  // that the sizes computed from them (parameter counts, buffer offsets) stay far inside int64.
  const std::tuple<const char*, int, int> bounded[] = {{"n_layer", c.n_layer, 1 << 12}, {"d_model", c.d_model, 1 << 17},
                                                       {"d_ff", c.d_ff, 1 << 20},       {"seq_len", c.seq_len, 1 << 24},
                                                       {"vocab", c.vocab, 1 << 24}};
  for (const auto& [name, value, most] : bounded) {
    if (value > most) {
      return common::InvalidArgument("{} {} is larger than srunway supports ({})", Field(name), value, most);
    }
  }
  if (c.kv_channels < 0) {
    return common::InvalidArgument("kv_channels (--kv-channels) must be positive, got {}", c.kv_channels);
  }
  if (c.kv_channels == 0 && c.d_model % c.n_head != 0) {
    return common::InvalidArgument("{} {} is not a multiple of {} {}", Field("d_model"), c.d_model,
                                   Field("n_head"), c.n_head);
  }
  // The attention's width is bounded as d_model is.
  if (int64_t{c.n_head} * c.head_dim() > (1 << 17)) {
    return common::InvalidArgument("{} {} x head size {} is larger than srunway supports ({})", Field("n_head"),
                                   c.n_head, c.head_dim(), 1 << 17);
  }
  if (c.n_head % c.n_kv_head != 0) {
    return common::InvalidArgument("{} {} is not a multiple of {} {}", Field("n_head"), c.n_head,
                                   Field("n_kv_head"), c.n_kv_head);
  }
  if (c.other_positions && c.no_positions) {
    return common::InvalidArgument("other_positions (--position-embedding-type {}) and no positions "
                                   "(--position-embedding-type none): give one",
                                   c.arch == Arch::kGpt ? "rope" : "learned_absolute");
  }
  if (c.rope_turns() && c.head_dim() % 2 != 0) {
    return common::InvalidArgument("RoPE needs an even head dimension, got {}", c.head_dim());
  }
  for (const double value : {c.init_std, c.norm_eps, c.rope_theta}) {
    if (!(value > 0 && std::isfinite(value))) {
      return common::InvalidArgument("init_std, norm_eps and rope_theta must be positive and finite");
    }
  }
  if (c.squared_relu && c.arch != Arch::kGpt) {
    return common::InvalidArgument("squared_relu (--squared-relu) is for a GPT model: a Llama's FFN is SwiGLU");
  }
  if (c.exact_gelu && c.arch != Arch::kGpt) {
    return common::InvalidArgument("exact_gelu (--no-bias-gelu-fusion) is for a GPT model: a Llama's FFN is gated");
  }
  if (c.exact_gelu && c.squared_relu) {
    return common::InvalidArgument("exact_gelu (--no-bias-gelu-fusion) and squared_relu (--squared-relu) are two "
                                   "activations of a GPT's FFN: give one");
  }
  if (c.other_glu() && c.arch != Arch::kLlama) {
    return common::InvalidArgument("{} is for a Llama model, whose FFN is gated: a GPT's is GELU or squared ReLU",
                                   c.quick_geglu ? "quick_geglu (--quick-geglu)"
                                   : c.geglu      ? "geglu (--geglu)"
                                   : c.glu_linear_offset != 0 ? "glu_linear_offset (--glu-linear-offset)"
                                                              : "activation_func_clamp_value "
                                                                "(--activation-func-clamp-value)");
  }
  if (c.quick_geglu && c.geglu) {
    return common::InvalidArgument("quick_geglu (--quick-geglu) and geglu (--geglu) are two activations of a gated "
                                   "FFN (quick GELU and GELU's tanh approximation): give one");
  }
  if (!(c.embedding_multiplier > 0 && std::isfinite(c.embedding_multiplier))) {
    return common::InvalidArgument("embedding_multiplier (--embedding-multiplier) must be positive and finite, got {}",
                                   c.embedding_multiplier);
  }
  if (!std::isfinite(c.glu_linear_offset)) {
    return common::InvalidArgument("glu_linear_offset (--glu-linear-offset) must be finite, got {}",
                                   c.glu_linear_offset);
  }
  if (!(c.glu_clamp >= 0 && std::isfinite(c.glu_clamp))) {
    return common::InvalidArgument("activation_func_clamp_value (--activation-func-clamp-value) must be positive and "
                                   "finite, got {}", c.glu_clamp);
  }
  if (c.no_linear_bias && c.arch != Arch::kGpt) {
    return common::InvalidArgument("no_linear_bias (--disable-bias-linear) is for a GPT model: a Llama's layers have "
                                   "no bias unless add_bias_linear");
  }
  if (c.qkv_bias && c.arch == Arch::kGpt && !c.no_linear_bias) {
    return common::InvalidArgument("qkv_bias (--add-qkv-bias) is for a Llama model, or a GPT without biases "
                                   "(--disable-bias-linear): GPT's layers have every bias");
  }
  if (c.linear_bias && c.arch != Arch::kLlama) {
    return common::InvalidArgument("add_bias_linear is for a Llama model: GPT's layers have every bias");
  }
  if (c.linear_bias && c.qkv_bias) {
    return common::InvalidArgument("qkv_bias (--add-qkv-bias) beside add_bias_linear, whose biases include q's, k's "
                                   "and v's: give add_bias_linear alone");
  }
  if (c.rope_linear_factor != 1.0f) {
    if (!c.rope_turns()) return NoRope(c, "linear RoPE scaling (--rotary-seq-len-interpolation-factor)");
    SRUNWAY_RETURN_IF_ERROR(PositiveAndFinite(
        "linear RoPE scaling's", {{"factor (--rotary-seq-len-interpolation-factor)", c.rope_linear_factor}}));
    if (c.rope_scaling_factor != 0) {
      return common::InvalidArgument("RoPE scaling: Llama 3.1's (--use-rope-scaling) or linear "
                                     "(--rotary-seq-len-interpolation-factor), not both");
    }
  }
  if (c.rotary_percent != 1.0) {
    if (!c.rope_turns()) return NoRope(c, "RoPE over part of each head (--rotary-percent)");
    if (!(c.rotary_percent > 0 && c.rotary_percent <= 1)) {
      return common::InvalidArgument("{} must be above 0 and at most 1, got {}", Field("rotary_percent"),
                                     c.rotary_percent);
    }
    if (c.rotary_dim() < 2 || c.rotary_dim() % 2 != 0) {
      return common::InvalidArgument("{} {} turns {} of each head's {} dimensions (int(head size x it)), which must "
                                     "be even and 2 or more: RoPE turns them in pairs", Field("rotary_percent"),
                                     c.rotary_percent, c.rotary_dim(), c.head_dim());
    }
  }
  if (c.rotary_interleaved && !c.rope_turns()) return NoRope(c, "interleaved RoPE (--rotary-interleaved)");
  if (c.yarn) SRUNWAY_RETURN_IF_ERROR(ValidateYarn(c));
  if (c.longrope) SRUNWAY_RETURN_IF_ERROR(ValidateLongRope(c));
  if (c.window < -1 || c.window > (1 << 24)) {
    return common::InvalidArgument("window_size (--window-size) {},0: its left side must be -1 (no window) to {}",
                                   c.window, 1 << 24);
  }
  if (!c.window_layers.empty()) {
    if (c.window < 0) {
      return common::InvalidArgument("window_attn_skip_freq (--window-attn-skip-freq) chooses the layers that attend "
                                     "through the window, and there is none (--window-size)");
    }
    SRUNWAY_RETURN_IF_ERROR(OneEachLayer(c, c.window_layers, "window_attn_skip_freq (--window-attn-skip-freq)"));
  }
  if (!c.no_rope.empty()) {
    if (!c.rope_turns()) return NoRope(c, "RoPE skipped in some layers (--no-rope-freq)");
    SRUNWAY_RETURN_IF_ERROR(OneEachLayer(c, c.no_rope, "no_rope_freq (--no-rope-freq)"));
  }
  if (c.rope_scaling_factor == 0) return common::Status::Ok();
  if (!c.rope_turns()) return NoRope(c, "RoPE scaling (--use-rope-scaling)");
  SRUNWAY_RETURN_IF_ERROR(PositiveAndFinite("RoPE scaling's",
                                            {{"factor (--rope-scaling-factor)", c.rope_scaling_factor},
                                             {"low_freq_factor", c.rope_low_freq_factor},
                                             {"high_freq_factor", c.rope_high_freq_factor}}));
  // The wavelengths between the two bounds are interpolated over high - low, which must not be 0 (nor turn them).
  if (!(c.rope_high_freq_factor > c.rope_low_freq_factor)) {
    return common::InvalidArgument("RoPE scaling's high_freq_factor {} must be larger than its low_freq_factor {}",
                                   c.rope_high_freq_factor, c.rope_low_freq_factor);
  }
  if (c.rope_original_positions <= 0) {
    return common::InvalidArgument("RoPE scaling's original_max_position_embeddings must be positive, got {}",
                                   c.rope_original_positions);
  }
  return common::Status::Ok();
}

void SetHeadDim(ModelConfig& c, int head_dim) {
  const bool derived = c.n_head > 0 && c.d_model % c.n_head == 0 && int64_t{head_dim} * c.n_head == c.d_model;
  c.kv_channels = derived ? 0 : head_dim;
}

namespace {

// The model's positions by Megatron's names (--position-embedding-type): learned_absolute (GPT's), rope (Llama's, and
// a GPT's with other_positions; a Llama's with it is learned_absolute), yarn or none.
std::string_view PositionsName(const ModelConfig& c) {
  if (c.no_positions) return "none";
  if (c.yarn) return "yarn";
  return c.learned_positions() ? "learned_absolute" : "rope";
}

// YaRN's numbers by Megatron's names (its TransformerConfig's yarn_* less the prefix), null where there is none.
common::Json YarnToJson(const ModelConfig& c) {
  if (!c.yarn) return nullptr;
  const YarnScaling& y = *c.yarn;
  return {{"rotary_scaling_factor", y.factor}, {"original_max_position_embeddings", y.original_positions},
          {"beta_fast", y.beta_fast}, {"beta_slow", y.beta_slow}, {"mscale", y.mscale},
          {"mscale_all_dim", y.mscale_all_dim}, {"correction_range_round_to_int", y.round_to_int}};
}

common::StatusOr<YarnScaling> YarnFromJson(const common::Json& json, std::string_view where) {
  YarnScaling y;
  SRUNWAY_ASSIGN_OR_RETURN(y.factor, common::JsonField<float>(json, "rotary_scaling_factor", where));
  SRUNWAY_ASSIGN_OR_RETURN(y.original_positions,
                           common::JsonField<int>(json, "original_max_position_embeddings", where));
  SRUNWAY_ASSIGN_OR_RETURN(y.beta_fast, common::JsonField<float>(json, "beta_fast", where));
  SRUNWAY_ASSIGN_OR_RETURN(y.beta_slow, common::JsonField<float>(json, "beta_slow", where));
  SRUNWAY_ASSIGN_OR_RETURN(y.mscale, common::JsonField<float>(json, "mscale", where));
  SRUNWAY_ASSIGN_OR_RETURN(y.mscale_all_dim, common::JsonField<float>(json, "mscale_all_dim", where));
  SRUNWAY_ASSIGN_OR_RETURN(y.round_to_int, common::JsonField<bool>(json, "correction_range_round_to_int", where));
  return y;
}

// LongRoPE's numbers by Hugging Face's names, null where there is none.
common::Json LongRopeToJson(const ModelConfig& c) {
  if (!c.longrope) return nullptr;
  const LongRope& l = *c.longrope;
  return {{"short_factor", l.short_factor}, {"long_factor", l.long_factor},
          {"original_max_position_embeddings", l.original_positions}, {"attention_factor", l.attention_factor}};
}

common::StatusOr<LongRope> LongRopeFromJson(const common::Json& json, std::string_view where) {
  LongRope l;
  SRUNWAY_ASSIGN_OR_RETURN(l.short_factor, common::JsonField<std::vector<float>>(json, "short_factor", where));
  SRUNWAY_ASSIGN_OR_RETURN(l.long_factor, common::JsonField<std::vector<float>>(json, "long_factor", where));
  SRUNWAY_ASSIGN_OR_RETURN(l.original_positions,
                           common::JsonField<int>(json, "original_max_position_embeddings", where));
  SRUNWAY_ASSIGN_OR_RETURN(l.attention_factor, common::JsonField<float>(json, "attention_factor", where));
  return l;
}

}  // namespace

common::Json ToJson(const ModelConfig& c) {
  common::Json json;
  json["arch"] = ArchName(c.arch);
  json["n_layer"] = c.n_layer;
  json["d_model"] = c.d_model;
  json["n_head"] = c.n_head;
  json["n_kv_head"] = c.n_kv_head;
  json["d_ff"] = c.d_ff;
  json["seq_len"] = c.seq_len;
  json["position_embedding_type"] = PositionsName(c);
  json["vocab"] = c.vocab;
  json["init_std"] = c.init_std;
  json["norm_eps"] = c.norm_eps;
  json["rope_theta"] = c.rope_theta;
  // Written always, null where there is none, so that DescribeDifference names it either way.
  json["rope_scaling"] = RopeScalingToJson(c);
  json["rope_linear_factor"] = c.rope_linear_factor;
  json["rotary_percent"] = c.rotary_percent;
  json["rotary_interleaved"] = c.rotary_interleaved;
  json["yarn"] = YarnToJson(c);
  json["longrope"] = LongRopeToJson(c);
  json["no_rope_freq"] = c.no_rope;
  // Megatron's (left, right), null where there is no window.
  json["window_size"] = c.window >= 0 ? common::Json::array({c.window, 0}) : common::Json(nullptr);
  json["window_attn_skip_freq"] = c.window_layers;
  json["softmax_type"] = SoftmaxName(c.softmax);
  json["qkv_bias"] = c.qkv_bias;
  // Megatron's add_bias_linear: every linear layer's bias, GPT's always.
  json["add_bias_linear"] = c.has_linear_bias();
  json["squared_relu"] = c.squared_relu;
  json["exact_gelu"] = c.exact_gelu;
  json["quick_geglu"] = c.quick_geglu;
  json["geglu"] = c.geglu;
  json["embedding_multiplier"] = c.embedding_multiplier;
  json["glu_linear_offset"] = c.glu_linear_offset;
  // Megatron's, null where there is none.
  json["activation_func_clamp_value"] = c.glu_clamp > 0 ? common::Json(c.glu_clamp) : common::Json(nullptr);
  json["qk_layernorm"] = c.qk_norm;
  json["apply_layernorm_1p"] = c.norm_1p;
  json["normalization"] = NormName(c.norm());
  json["untie_embeddings_and_output_weights"] = !c.tied_embeddings();
  json["kv_channels"] = c.kv_channels;
  return json;
}

common::StatusOr<ModelConfig> FromJson(const common::Json& json, std::string_view where) {
  ModelConfig c;
  SRUNWAY_ASSIGN_OR_RETURN(std::string arch, common::JsonField<std::string>(json, "arch", where));
  if (arch == "gpt") {
    c.arch = Arch::kGpt;
  } else if (arch == "llama") {
    c.arch = Arch::kLlama;
  } else {
    return common::InvalidArgument("{}: unknown arch '{}'", where, arch);
  }
  SRUNWAY_ASSIGN_OR_RETURN(c.n_layer, common::JsonField<int>(json, "n_layer", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.d_model, common::JsonField<int>(json, "d_model", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.n_head, common::JsonField<int>(json, "n_head", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.n_kv_head, common::JsonField<int>(json, "n_kv_head", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.d_ff, common::JsonField<int>(json, "d_ff", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.seq_len, common::JsonField<int>(json, "seq_len", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.vocab, common::JsonField<int>(json, "vocab", where));
  // Checkpoints written before YaRN (2026-12-07) have no yarn: none.
  if (json.contains("yarn") && !json["yarn"].is_null()) {
    SRUNWAY_ASSIGN_OR_RETURN(c.yarn, YarnFromJson(json["yarn"], std::string(where) + ": yarn"));
  }
  // Checkpoints before 2026-12-07 have no position_embedding_type: the architecture's own positions.
  if (json.contains("position_embedding_type")) {
    SRUNWAY_ASSIGN_OR_RETURN(const std::string positions,
                             common::JsonField<std::string>(json, "position_embedding_type", where));
    c.no_positions = positions == "none";
    c.other_positions = c.arch == Arch::kGpt ? positions == "rope" || positions == "yarn"
                                             : positions == "learned_absolute";
    if (positions != PositionsName(c)) {
      return common::InvalidArgument("{}: position_embedding_type '{}' for a {} model{} ({}, or 'none')", where,
                                     positions, arch, c.yarn ? " with yarn" : "",
                                     c.yarn ? "its own 'yarn'" : "'learned_absolute', 'rope'");
    }
  }
  SRUNWAY_ASSIGN_OR_RETURN(c.init_std, common::JsonField<float>(json, "init_std", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.norm_eps, common::JsonField<float>(json, "norm_eps", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.rope_theta, common::JsonField<float>(json, "rope_theta", where));
  // Checkpoints before 2026-12-04 have no rope_scaling: none.
  if (json.contains("rope_scaling") && !json["rope_scaling"].is_null()) {
    SRUNWAY_RETURN_IF_ERROR(RopeScalingFromJson(json["rope_scaling"], std::string(where) + ": rope_scaling", c));
  }
  // Checkpoints before 2026-12-05 have none of these, and some of that day's lack kv_channels and qk_layernorm (and
  // before 2026-12-06 apply_layernorm_1p, some of that day's normalization): no linear RoPE scaling, heads d_model /
  // n_head wide, no such biases, GELU, no q and k norms, norm weights stored whole, the architecture's own norms.
  if (json.contains("rope_linear_factor")) {
    SRUNWAY_ASSIGN_OR_RETURN(c.rope_linear_factor, common::JsonField<float>(json, "rope_linear_factor", where));
  }
  if (json.contains("kv_channels")) {
    SRUNWAY_ASSIGN_OR_RETURN(c.kv_channels, common::JsonField<int>(json, "kv_channels", where));
  }
  // Checkpoints before 2026-12-08 have no longrope: none.
  if (json.contains("longrope") && !json["longrope"].is_null()) {
    SRUNWAY_ASSIGN_OR_RETURN(c.longrope, LongRopeFromJson(json["longrope"], std::string(where) + ": longrope"));
  }
  // Checkpoints before 2026-12-07 have neither rotary_percent nor rotary_interleaved: RoPE over the whole head, in
  // its two halves.
  if (json.contains("rotary_percent")) {
    SRUNWAY_ASSIGN_OR_RETURN(c.rotary_percent, common::JsonField<double>(json, "rotary_percent", where));
  }
  // Checkpoints before 2026-12-07 have none of no_rope_freq, window_size and window_attn_skip_freq: every layer turns
  // RoPE, no window.
  for (auto [key, field] : {std::pair{"no_rope_freq", &c.no_rope}, std::pair{"window_attn_skip_freq", &c.window_layers}}) {
    if (!json.contains(key)) continue;
    const common::Json& layers = json[key];
    if (!layers.is_array()) return common::InvalidArgument("{}: {} is not a list", where, key);
    for (const common::Json& layer : layers) {
      if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() > 1) {
        return common::InvalidArgument("{}: {} holds {}, not 0 or 1", where, key, layer.dump());
      }
      field->push_back(layer.get<uint8_t>());
    }
  }
  if (json.contains("window_size") && !json["window_size"].is_null()) {
    const common::Json& sides = json["window_size"];
    if (!sides.is_array() || sides.size() != 2 || !sides[0].is_number_integer() || sides[1] != 0 ||
        sides[0].get<int64_t>() < 0 || sides[0].get<int64_t>() > (1 << 24)) {
      return common::InvalidArgument("{}: window_size is {}, not [L, 0] with L from 0 to {}", where, sides.dump(),
                                     1 << 24);
    }
    c.window = sides[0].get<int>();
  }
  // Checkpoints before 2026-12-07 have no softmax_type: vanilla.
  if (json.contains("softmax_type")) {
    SRUNWAY_ASSIGN_OR_RETURN(const std::string name, common::JsonField<std::string>(json, "softmax_type", where));
    const std::optional<Softmax> softmax = SoftmaxFromName(name);
    if (!softmax) {
      return common::InvalidArgument("{}: unknown softmax_type '{}' (vanilla, off-by-one or learnable)", where, name);
    }
    c.softmax = *softmax;
  }
  // Checkpoints before 2026-12-07 have no quick_geglu, glu_linear_offset or activation_func_clamp_value: SwiGLU.
  if (json.contains("glu_linear_offset")) {
    SRUNWAY_ASSIGN_OR_RETURN(c.glu_linear_offset, common::JsonField<float>(json, "glu_linear_offset", where));
  }
  // Nor geglu nor embedding_multiplier before 2026-12-07's last: SwiGLU, 1.
  if (json.contains("embedding_multiplier")) {
    SRUNWAY_ASSIGN_OR_RETURN(c.embedding_multiplier, common::JsonField<float>(json, "embedding_multiplier", where));
  }
  if (json.contains("activation_func_clamp_value") && !json["activation_func_clamp_value"].is_null()) {
    SRUNWAY_ASSIGN_OR_RETURN(c.glu_clamp, common::JsonField<float>(json, "activation_func_clamp_value", where));
    if (!(c.glu_clamp > 0)) {
      return common::InvalidArgument("{}: activation_func_clamp_value is {}, not positive (null: none)", where,
                                     c.glu_clamp);
    }
  }
  // (exact_gelu: none before 2026-12-08's, the tanh approximation.)
  for (auto [key, field] : {std::pair{"qkv_bias", &c.qkv_bias}, std::pair{"squared_relu", &c.squared_relu},
                            std::pair{"exact_gelu", &c.exact_gelu},
                            std::pair{"quick_geglu", &c.quick_geglu}, std::pair{"geglu", &c.geglu},
                            std::pair{"qk_layernorm", &c.qk_norm}, std::pair{"apply_layernorm_1p", &c.norm_1p},
                            std::pair{"rotary_interleaved", &c.rotary_interleaved}}) {
    if (json.contains(key)) {
      SRUNWAY_ASSIGN_OR_RETURN(*field, common::JsonField<bool>(json, key, where));
    }
  }
  // Checkpoints written before a Llama's biases (2026-12-07) have no add_bias_linear: GPT's every bias, a Llama's
  // none.
  if (json.contains("add_bias_linear")) {
    SRUNWAY_ASSIGN_OR_RETURN(const bool biases, common::JsonField<bool>(json, "add_bias_linear", where));
    c.linear_bias = c.arch == Arch::kLlama && biases;
    c.no_linear_bias = c.arch == Arch::kGpt && !biases;
  }
  if (json.contains("normalization")) {
    SRUNWAY_ASSIGN_OR_RETURN(const std::string name, common::JsonField<std::string>(json, "normalization", where));
    const std::optional<Norm> norm = NormFromName(name);
    if (!norm) return common::InvalidArgument("{}: unknown normalization '{}' (LayerNorm or RMSNorm)", where, name);
    SetNorm(c, *norm);
  }
  // Checkpoints before 2026-12-08's have no untie_embeddings_and_output_weights: GPT's head tied, a Llama's its own.
  if (json.contains("untie_embeddings_and_output_weights")) {
    SRUNWAY_ASSIGN_OR_RETURN(const bool untie,
                             common::JsonField<bool>(json, "untie_embeddings_and_output_weights", where));
    SetTiedEmbeddings(c, !untie);
  }
  SRUNWAY_RETURN_IF_ERROR(Validate(c).WithContext(where));
  return c;
}

common::Json RopeScalingToJson(const ModelConfig& c) {
  if (c.rope_scaling_factor == 0) return nullptr;
  return {{"factor", c.rope_scaling_factor}, {"low_freq_factor", c.rope_low_freq_factor},
          {"high_freq_factor", c.rope_high_freq_factor},
          {"original_max_position_embeddings", c.rope_original_positions}};
}

common::Status RopeScalingFromJson(const common::Json& json, std::string_view where, ModelConfig& c) {
  SRUNWAY_ASSIGN_OR_RETURN(c.rope_scaling_factor, common::JsonField<float>(json, "factor", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.rope_low_freq_factor, common::JsonField<float>(json, "low_freq_factor", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.rope_high_freq_factor, common::JsonField<float>(json, "high_freq_factor", where));
  SRUNWAY_ASSIGN_OR_RETURN(c.rope_original_positions,
                           common::JsonField<int>(json, "original_max_position_embeddings", where));
  // Factor 0 stands for no scaling, which a rope_scaling given does not mean (Validate checks the rest).
  if (c.rope_scaling_factor == 0) return common::InvalidArgument("{}: factor must be positive, got 0", where);
  return common::Status::Ok();
}

ModelConfig WithPositionsOf(const ModelConfig& wanted, const ModelConfig& stored) {
  ModelConfig c = wanted;
  if (!c.learned_positions() && !stored.learned_positions()) c.seq_len = stored.seq_len;
  c.rope_theta = stored.rope_theta;
  c.rope_scaling_factor = stored.rope_scaling_factor;
  c.rope_low_freq_factor = stored.rope_low_freq_factor;
  c.rope_high_freq_factor = stored.rope_high_freq_factor;
  c.rope_original_positions = stored.rope_original_positions;
  c.rope_linear_factor = stored.rope_linear_factor;
  c.yarn = stored.yarn;
  c.longrope = stored.longrope;
  return c;
}

std::string DescribeDifference(const ModelConfig& stored, const ModelConfig& wanted) {
  common::Json a = ToJson(stored);
  common::Json b = ToJson(wanted);
  std::vector<std::string> parts;
  for (const auto& [key, value] : a.items()) {
    if (b[key] != value) parts.push_back(fmt::format("{} is {} in the checkpoint and {} here", key, value.dump(),
                                                     b[key].dump()));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

int PaddedVocabSize(int64_t tokens, int multiple) {
  const int64_t padded = (tokens + multiple - 1) / multiple * multiple;
  return static_cast<int>(std::min<int64_t>(padded, std::numeric_limits<int>::max()));
}

int64_t ParameterCount(const ModelConfig& c) {
  const int64_t d = c.d_model, q = c.q_dim();
  const int64_t kv = int64_t{c.n_kv_head} * c.head_dim();
  const int64_t f = c.d_ff;
  int64_t per_layer = 0;
  // The token embedding, the positions' table, the final norm's weight and the untied output layer.
  int64_t total = int64_t{c.vocab} * d + (c.learned_positions() ? int64_t{c.seq_len} * d : 0) + d +
                  (c.tied_embeddings() ? 0 : int64_t{c.vocab} * d);
  if (c.arch == Arch::kGpt) {
    // ln1 w, qkv (w, b), proj (w, b), ln2 w, fc (w, b), fc proj (w, b): the biases unless no_linear_bias
    per_layer = d + d * (q + 2 * kv) + (c.has_qkv_bias() ? q + 2 * kv : 0) + q * d + d + d * f + f * d +
                (c.has_linear_bias() ? d + f + d : 0);
  } else {
    // attn norm, qkv (+ its bias), proj, mlp norm, gate+up, down (+ their biases)
    per_layer = d + d * (q + 2 * kv) + (c.has_qkv_bias() ? q + 2 * kv : 0) + q * d + d + 2 * f * d + f * d +
                (c.has_linear_bias() ? d + 2 * f + d : 0);
  }
  // q's and k's norms: a weight each.
  if (c.qk_norm) per_layer += 2 * int64_t{c.head_dim()};
  if (c.softmax == Softmax::kLearnable) per_layer += c.n_head;  // the sinks' scores
  // LayerNorm's biases: the two norms', q's and k's, the final norm's.
  if (c.layernorm()) {
    per_layer += 2 * d + (c.qk_norm ? 2 * int64_t{c.head_dim()} : 0);
    total += d;
  }
  return total + per_layer * c.n_layer;
}

double TrainingFlopsPerToken(const ModelConfig& c, int seq_len) {
  double matmul_params = static_cast<double>(ParameterCount(c));
  // Embedding lookups and norms do no matrix products; the output layer, tied to the embedding or its own, does.
  if (c.learned_positions()) matmul_params -= static_cast<double>(c.seq_len) * c.d_model;  // position table
  if (!c.tied_embeddings()) matmul_params -= static_cast<double>(c.vocab) * c.d_model;     // the input embedding
  if (c.softmax == Softmax::kLearnable) matmul_params -= static_cast<double>(c.n_head) * c.n_layer;  // the sinks
  double keys = 0;  // each query's keys, over the layers
  for (int l = 0; l < c.n_layer; ++l) keys += c.windowed(l) ? std::min(seq_len, c.window + 1) : seq_len;
  return 6.0 * matmul_params + 12.0 * keys * c.q_dim();
}

double MegatronFlopsPerToken(const ModelConfig& c, int seq_len) {
  const double d = c.d_model, q = c.q_dim(), kv = static_cast<double>(c.n_kv_head) * c.head_dim();
  const double mlp = d * c.d_ff * (c.arch == Arch::kLlama ? 3 : 2);
  const double layer = mlp + d * (q + 2 * kv) + q * d + q * seq_len;
  return 6.0 * (c.n_layer * layer + d * c.vocab);
}

}  // namespace srunway::trainer
