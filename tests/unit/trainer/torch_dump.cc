// Writes what the trainer computes (each CPU op forward and backward, and one whole training step of the tiny
// GPT and Llama) as safetensors files, for torch_reference.py to recompute with PyTorch and compare.
// Usage: trainer-torch-dump OUT_DIR
#include <fmt/format.h>

#include <cstdio>
#include <algorithm>
#include <deque>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "tests/variant_params.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/model/model.h"
#include "trainer/model/rng.h"
#include "trainer/ops/cpu/ops.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/schedule.h"

namespace srunway::trainer {
namespace {

namespace fs = std::filesystem;

// Tensors of one case; the vectors own the data the NamedTensors point into.
class Case {
 public:
  std::vector<float>& Random(const std::string& name, std::vector<int64_t> shape, Rng& rng, double scale = 1.0) {
    std::vector<float>& data = Zeros(name, std::move(shape));
    for (float& x : data) x = static_cast<float>(rng.Normal() * scale);
    return data;
  }
  std::vector<float>& Zeros(const std::string& name, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t dim : shape) numel *= dim;
    storage_.emplace_back(numel, 0.0f);
    names_.push_back(name);
    shapes_.push_back(std::move(shape));
    return storage_.back();
  }
  // An input gradient that the backward writes: it starts as NaN, so a backward that added into it would fail
  // the comparison.
  std::vector<float>& Stale(const std::string& name, std::vector<int64_t> shape) {
    std::vector<float>& data = Zeros(name, std::move(shape));
    std::fill(data.begin(), data.end(), std::numeric_limits<float>::quiet_NaN());
    return data;
  }
  void Write(const fs::path& path) const {
    std::vector<NamedTensor> tensors;
    for (size_t i = 0; i < storage_.size(); ++i) tensors.push_back({names_[i], shapes_[i], storage_[i].data()});
    if (common::Status status = WriteSafetensors(path, tensors); !status.ok()) {
      fmt::print(stderr, "torch_dump: {}\n", status.ToString());
      std::exit(1);
    }
  }

 private:
  std::deque<std::vector<float>> storage_;  // stable addresses
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
};

std::vector<int32_t> Tokens(std::vector<float>& as_float, Rng& rng, int vocab) {
  std::vector<int32_t> tokens(as_float.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(rng.Below(vocab));
    as_float[i] = static_cast<float>(tokens[i]);
  }
  return tokens;
}

void DumpOps(const fs::path& dir) {
  Rng rng(1234);
  const int N = 6, C = 32;
  {
    Case c;
    auto& inp = c.Random("inp", {N, C}, rng, 2.0);
    auto& w = c.Random("weight", {C}, rng);
    auto& b = c.Random("bias", {C}, rng);
    auto& dout = c.Random("dout", {N, C}, rng);
    auto& out = c.Zeros("out", {N, C});
    auto& dinp = c.Zeros("dinp", {N, C});
    auto& dw = c.Zeros("dweight", {C});
    auto& db = c.Zeros("dbias", {C});
    std::vector<float> mean(N), rstd(N);
    cpu::LayerNormForward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C, 1e-5f);
    cpu::LayerNormBackward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean.data(),
                           rstd.data(), N, C);
    c.Write(dir / "layernorm.safetensors");
  }
  {
    Case c;
    auto& inp = c.Random("inp", {N, C}, rng, 2.0);
    auto& w = c.Random("weight", {C}, rng);
    auto& dout = c.Random("dout", {N, C}, rng);
    auto& out = c.Zeros("out", {N, C});
    auto& dinp = c.Zeros("dinp", {N, C});
    auto& dw = c.Zeros("dweight", {C});
    std::vector<float> rstd(N);
    cpu::RmsNormForward(out.data(), rstd.data(), inp.data(), w.data(), N, C, 1e-5f);
    cpu::RmsNormBackward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), rstd.data(), N, C);
    c.Write(dir / "rmsnorm.safetensors");
  }
  {
    Case c;
    const int OC = 10;
    auto& inp = c.Random("inp", {N, C}, rng);
    auto& w = c.Random("weight", {OC, C}, rng);
    auto& b = c.Random("bias", {OC}, rng);
    auto& dout = c.Random("dout", {N, OC}, rng);
    auto& out = c.Zeros("out", {N, OC});
    auto& dinp = c.Stale("dinp", {N, C});
    auto& dw = c.Zeros("dweight", {OC, C});
    auto& db = c.Zeros("dbias", {OC});
    cpu::MatmulForward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
    cpu::MatmulBackward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    c.Write(dir / "matmul.safetensors");
  }
  {
    Case c;
    const int B = 2, T = 7, H = 4, KV = 2, hd = 8, row = (H + 2 * KV) * hd;
    auto& qkv = c.Random("qkv", {B, T, row}, rng);
    auto& dout = c.Random("dout", {B, T, H * hd}, rng);
    auto& out = c.Zeros("out", {B, T, H * hd});
    auto& dqkv = c.Stale("dqkv", {B, T, row});
    auto& att = c.Zeros("att", {B, H, T, T});
    cpu::AttentionForward(out.data(), att.data(), qkv.data(), B, T, H, KV, hd);
    cpu::AttentionBackward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, H, KV, hd);
    c.Write(dir / "attention.safetensors");
  }
  auto rope_case = [&](const char* file, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope) {
    Case c;
    const int row = (H + 2 * KV) * hd;
    auto& inp = c.Random("inp", {B, T, row}, rng);
    auto& dout = c.Random("dout", {B, T, row}, rng);
    auto& out = c.Zeros("out", {B, T, row});
    auto& dinp = c.Zeros("dinp", {B, T, row});
    out = inp;
    dinp = dout;
    cpu::RopeForward(out.data(), B, T, H, KV, hd, rope);
    cpu::RopeBackward(dinp.data(), B, T, H, KV, hd, rope);
    c.Write(dir / file);
  };
  rope_case("rope.safetensors", 2, 7, 4, 2, 8, RopeFrequencies{});
  // Llama 3.1's scaling, its bounds made small (wavelengths past 64 positions slowed, under 16 kept) so that the
  // head's four pairs hold all three cases; positions up to 99.
  rope_case("rope_scaled.safetensors", 1, 100, 2, 1, 8, RopeFrequencies{10000.0f, 8.0f, 1.0f, 4.0f, 64.0f});
  // Linear scaling: every wavelength 4 times longer.
  rope_case("rope_linear.safetensors", 1, 100, 2, 1, 8, RopeFrequencies{10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 4.0f});
  // Megatron's --rotary-percent 0.5: the first 8 of each head's 16 dimensions turn, as pairs (i, i + 4).
  rope_case("rope_partial.safetensors", 2, 30, 2, 1, 16,
            RopeFrequencies{10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 1.0f, 8});
  // Megatron's --rotary-interleaved, with --rotary-percent 0.5: pairs (2i, 2i + 1) among each head's first 8.
  rope_case("rope_interleaved.safetensors", 2, 30, 2, 1, 16,
            RopeFrequencies{10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 1.0f, 8, true});
  // YaRN (--position-embedding-type yarn) over heads of 16 as the model works it out (ModelConfig::rope), its
  // original positions made few (64) so that its ramp falls inside the head's 8 pairs (pairs 0 to 2.02, unrounded as
  // gpt-oss's), and --yarn-mscale-all-dim 0.5: q and k times 1.139 / 1.069.
  ModelConfig yarn = *Preset("llama-tiny");
  yarn.yarn = YarnScaling{.factor = 4.0f, .original_positions = 64, .mscale_all_dim = 0.5f, .round_to_int = false};
  rope_case("rope_yarn.safetensors", 1, 100, 2, 1, yarn.head_dim(), yarn.rope(100));
  // LongRoPE (Phi-3's) over --rotary-percent 0.5 of heads of 16 (4 pairs), a factor per pair, q and k times 1.19: its
  // short factors in sequences up to 64 positions, its long ones past them (these 100).
  ModelConfig longrope = *Preset("llama-tiny");
  longrope.rotary_percent = 0.5;
  longrope.longrope = LongRope{.short_factor = {1.0f, 1.5f, 2.0f, 4.0f}, .long_factor = {1.0f, 3.0f, 9.0f, 27.0f},
                               .original_positions = 64, .attention_factor = 1.19f};
  rope_case("rope_longrope_short.safetensors", 1, 64, 2, 1, longrope.head_dim(), longrope.rope(64));
  rope_case("rope_longrope_long.safetensors", 1, 100, 2, 1, longrope.head_dim(), longrope.rope(100));
  // An elementwise activation and its backward.
  auto activation_case = [&](const char* file, auto forward, auto backward) {
    Case c;
    const int n = 200;
    auto& inp = c.Random("inp", {n}, rng, 3.0);
    auto& dout = c.Random("dout", {n}, rng);
    auto& out = c.Zeros("out", {n});
    auto& dinp = c.Stale("dinp", {n});
    forward(out.data(), inp.data(), n);
    backward(dinp.data(), inp.data(), dout.data(), n);
    c.Write(dir / file);
  };
  activation_case("gelu.safetensors", cpu::GeluForward, cpu::GeluBackward);
  activation_case("gelu_erf.safetensors", cpu::GeluErfForward, cpu::GeluErfBackward);
  activation_case("squared_relu.safetensors", cpu::SquaredReluForward, cpu::SquaredReluBackward);
  // A gated activation (ops/glu.h) of [gate | up] rows and its backward.
  auto glu_case = [&](const char* file, const Glu& glu) {
    Case c;
    const int F = 16;
    auto& inp = c.Random("inp", {N, 2 * F}, rng, 2.0);
    auto& dout = c.Random("dout", {N, F}, rng);
    auto& out = c.Zeros("out", {N, F});
    auto& dinp = c.Stale("dinp", {N, 2 * F});
    cpu::SwigluForward(out.data(), inp.data(), N, F, glu);
    cpu::SwigluBackward(dinp.data(), inp.data(), dout.data(), N, F, glu);
    c.Write(dir / file);
  };
  glu_case("swiglu.safetensors", {});
  // Megatron's --quick-geglu with gpt-oss's offset and a clamp that some inputs pass.
  glu_case("quick_geglu.safetensors", {kQuickGeluAlpha, 1.0f, 1.5f});
  // GeGLU (--geglu, Gemma's), with an offset and a clamp as the other.
  glu_case("geglu.safetensors", {.offset = 0.5f, .clamp = 1.5f, .gelu = true});
  {
    Case c;
    const int V = 50;
    auto& logits = c.Random("logits", {N, V}, rng, 4.0);
    auto& target_values = c.Zeros("targets", {N});
    std::vector<int32_t> targets = Tokens(target_values, rng, V);
    auto& losses = c.Zeros("losses", {N});
    auto& mean = c.Zeros("mean_loss", {1});
    auto& dlogits = c.Zeros("dlogits", {N, V});
    dlogits = logits;
    mean[0] = static_cast<float>(cpu::SoftmaxCrossEntropyForward(dlogits.data(), losses.data(), targets.data(), N, V));
    cpu::SoftmaxCrossEntropyBackward(dlogits.data(), targets.data(), N, V, 1.0f / N);
    c.Write(dir / "cross_entropy.safetensors");
  }
  // The embedding, and with the token embedding times 2.5 (--embedding-multiplier).
  for (const float scale : {1.0f, 2.5f}) {
    Case c;
    const int B = 2, T = 5, V = 11, E = 8;
    auto& token_values = c.Zeros("tokens", {B, T});
    std::vector<int32_t> tokens = Tokens(token_values, rng, V);
    auto& wte = c.Random("wte", {V, E}, rng);
    auto& wpe = c.Random("wpe", {T, E}, rng);
    auto& dout = c.Random("dout", {B, T, E}, rng);
    auto& out = c.Zeros("out", {B, T, E});
    auto& dwte = c.Zeros("dwte", {V, E});
    auto& dwpe = c.Zeros("dwpe", {T, E});
    cpu::EmbeddingForward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, E, scale);
    cpu::EmbeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, E, scale);
    c.Write(dir / (scale == 1.0f ? "embedding.safetensors" : "embedding_scaled.safetensors"));
  }
  {
    Case c;
    const int n = 64;
    auto& a = c.Random("a", {n}, rng);
    auto& b = c.Random("b", {n}, rng);
    auto& dout = c.Random("dout", {n}, rng);
    auto& out = c.Zeros("out", {n});
    auto& da = c.Zeros("da", {n});
    auto& db = c.Zeros("db", {n});
    cpu::ResidualForward(out.data(), a.data(), b.data(), n);
    cpu::ResidualBackward(da.data(), db.data(), dout.data(), n);
    c.Write(dir / "residual.safetensors");
  }
}

// The dropout masks (0 or 1 / (1 - p)) of every site of a training step, named "_mask.SITE", for PyTorch to
// apply: site 0 the embeddings [B, T, C]; layer l: 1 + 3l the attention projection [B, T, C], 2 + 3l the
// attention probabilities [B, H, T, T], 3 + 3l the MLP output [B, T, C].
std::vector<std::vector<float>> DropoutMasks(const ModelConfig& c, const DropoutContext& ctx, float p, int B, int T) {
  std::vector<std::vector<float>> masks;
  for (int site = 0; site < 1 + 3 * c.n_layer; ++site) {
    const bool attention = site % 3 == 2;
    const int64_t per_sample = attention ? int64_t{c.n_head} * T * T : int64_t{T} * c.d_model;
    const uint64_t key = cpu::DropoutKey(ctx.seed, ctx.step, site);
    std::vector<float> mask(static_cast<size_t>(B * per_sample));
    for (size_t i = 0; i < mask.size(); ++i) {
      const uint64_t index = static_cast<uint64_t>(ctx.first_sample * per_sample) + i;
      mask[i] = cpu::DropoutKeeps(key, index, p) ? 1.0f / (1.0f - p) : 0.0f;
    }
    masks.push_back(std::move(mask));
  }
  return masks;
}

// What a step's model has beside its preset; the step's files are named after it.
struct Variant {
  bool qkv_bias = false;      // a Llama's biases on q, k and v (--add-qkv-bias)
  bool linear_bias = false;   // a Llama's biases on every linear layer (no --disable-bias-linear)
  bool squared_relu = false;  // a GPT's FFN as relu(x)^2 (--squared-relu)
  bool exact_gelu = false;    // a GPT's FFN's GELU exact (--no-bias-gelu-fusion)
  bool qk_norm = false;       // norms on each head's q and k (--qk-layernorm)
  int head_dim = 0;           // heads of this width, not d_model / n_head (--kv-channels)
  bool other_norm = false;    // the other architecture's norms (--normalization): GPT's RMSNorm, Llama's LayerNorm
  bool other_tie = false;     // the other architecture's head: GPT's its own (--untie-...), Llama's tied
  double rotary_percent = 1;  // a Llama's RoPE over part of each head (--rotary-percent)
  bool rotary_interleaved = false;  // a Llama's RoPE pairs side by side (--rotary-interleaved)
  bool no_positions = false;        // neither learned positions nor RoPE (--position-embedding-type none)
  int no_rope_freq = 0;             // a Llama's RoPE skipped in the last of every N layers (--no-rope-freq N)
  int window = -1;                  // each query sees itself and this many keys before (--window-size W,0)
  int window_skip = 0;              // every Nth layer attends to every key (--window-attn-skip-freq N)
  Softmax softmax = Softmax::kVanilla;  // --softmax-type
  bool quick_geglu = false;             // --quick-geglu --glu-linear-offset 1 --activation-func-clamp-value 0.1
  bool gemma = false;  // --geglu --embedding-multiplier 8 --apply-layernorm-1p (Gemma's: 8 the root of the width 64)
  bool yarn = false;  // YaRN, 4x over 64 original positions (--position-embedding-type yarn, --yarn-*)
  bool longrope = false;  // LongRoPE, Phi-3's, over 16 original positions (a factor per pair, q and k times 1.2)
  // Nemotron's GPT: RoPE over half of each head, no biases, 2 KV heads, squared ReLU, norms 1 + weight, its own head
  // (--position-embedding-type rope --rotary-percent 0.5 --disable-bias-linear --num-query-groups 2 --squared-relu
  // --apply-layernorm-1p --untie-embeddings-and-output-weights).
  bool nemotron = false;
  bool learned = false;  // a Llama's learned position table in place of RoPE (its gated FFN alone: Megatron's default)
};

// One training step: forward, backward, clip at 1.0, AdamW (lr 1e-3, weight decay 0.1), as the trainer does it;
// with `dropout` > 0 both hidden and attention dropout, their masks written beside the step. The parameters of a
// variant are drawn at random (RandomizeVariantParams).
void DumpStep(const fs::path& dir, const std::string& preset, float dropout, const Variant& variant = {}) {
  ModelConfig config = *Preset(preset);
  config.qkv_bias = variant.qkv_bias;
  config.linear_bias = variant.linear_bias;
  config.squared_relu = variant.squared_relu;
  config.exact_gelu = variant.exact_gelu;
  config.qk_norm = variant.qk_norm;
  if (variant.head_dim > 0) SetHeadDim(config, variant.head_dim);
  if (variant.other_norm) SwapNorms(config);
  if (variant.other_tie) SetTiedEmbeddings(config, !config.tied_embeddings());
  config.rotary_percent = variant.rotary_percent;
  config.rotary_interleaved = variant.rotary_interleaved;
  config.no_positions = variant.no_positions;
  if (variant.no_rope_freq > 0) config.no_rope = *NoRopeLayers(std::to_string(variant.no_rope_freq), config.n_layer);
  config.window = variant.window;
  if (variant.window_skip > 0) config.window_layers = *WindowLayers(std::to_string(variant.window_skip), config.n_layer);
  config.softmax = variant.softmax;
  if (variant.yarn) config.yarn = YarnScaling{.factor = 4.0f, .original_positions = 64};  // ramp over pairs 0 to 3
  if (variant.longrope) {  // the step's 32 positions past the 16 original ones: the long factors
    config.longrope = LongRope{.short_factor = std::vector<float>(8, 1.0f),
                               .long_factor = {1.0f, 1.5f, 2.0f, 3.0f, 5.0f, 8.0f, 13.0f, 21.0f},
                               .original_positions = 16, .attention_factor = 1.2f};
  }
  if (variant.nemotron) {
    config.other_positions = true;
    config.rotary_percent = 0.5;
    config.no_linear_bias = true;
    config.n_kv_head = 2;
    config.squared_relu = true;
    config.norm_1p = true;
    SetTiedEmbeddings(config, false);
  }
  if (variant.learned) config.other_positions = true;
  if (variant.gemma) {
    config.geglu = true;
    config.embedding_multiplier = 8.0f;
    config.norm_1p = true;
  }
  if (variant.quick_geglu) {  // a clamp that the tiny model's FFN inputs (about 0.16 apart) cross
    config.quick_geglu = true;
    config.glu_linear_offset = 1.0f;
    config.glu_clamp = 0.1f;
  }
  const int B = 2, T = 32;
  Model model(config, B);
  model.set_dropout(dropout, dropout);
  const DropoutContext context{99, 3, 5};
  const std::string name_of_run = preset + (variant.qkv_bias ? "-qkv-bias" : "") +
                                  (variant.linear_bias ? "-biases" : "") +
                                  (variant.squared_relu ? "-squared-relu" : "") +
                                  (variant.exact_gelu ? "-exact-gelu" : "") + (variant.qk_norm ? "-qk-norm" : "") +
                                  (variant.head_dim > 0 ? fmt::format("-kv{}", variant.head_dim) : "") +
                                  (variant.other_norm ? (config.layernorm() ? "-layernorm" : "-rmsnorm") : "") +
                                  (variant.other_tie ? (config.tied_embeddings() ? "-tied" : "-untied") : "") +
                                  (variant.rotary_percent != 1 ? fmt::format("-rotary{}", variant.rotary_percent)
                                                               : "") +
                                  (variant.rotary_interleaved ? "-interleaved" : "") +
                                  (variant.no_positions ? "-nope" : "") +
                                  (variant.no_rope_freq > 0 ? fmt::format("-no-rope-freq{}", variant.no_rope_freq) : "") +
                                  (variant.window >= 0 ? fmt::format("-window{}", variant.window) : "") +
                                  (variant.window_skip > 0 ? fmt::format("-skip{}", variant.window_skip) : "") +
                                  (config.sinks() ? fmt::format("-{}", SoftmaxName(config.softmax)) : "") +
                                  (variant.quick_geglu ? "-quick-geglu" : "") + (variant.gemma ? "-gemma" : "") +
                                  (variant.yarn ? "-yarn" : "") + (variant.longrope ? "-longrope" : "") +
                                  (variant.nemotron ? "-nemotron" : "") + (variant.learned ? "-learned" : "") +
                                  (dropout > 0 ? "-dropout" : "");
  Rng rng(42);
  InitParams(config, model.layout(), rng, model.params());
  RandomizeVariantParams(model.layout(), rng, model.params());
  if (variant.exact_gelu) {  // FFN inputs about 2 wide, where erf's GELU and the tanh form differ (up to 4.7e-4)
    for (int l = 0; l < config.n_layer; ++l) {
      const TensorSpec& fc = *model.layout().Find(fmt::format("layers.{}.fc.weight", l));
      for (int64_t i = 0; i < fc.numel; ++i) model.params()[fc.offset + i] *= 12.5f;
    }
  }
  std::vector<float> token_values(B * (T + 1));
  std::vector<int32_t> stream = Tokens(token_values, rng, config.vocab);
  std::vector<int32_t> tokens, targets;
  for (int b = 0; b < B; ++b) {
    tokens.insert(tokens.end(), stream.begin() + b * (T + 1), stream.begin() + b * (T + 1) + T);
    targets.insert(targets.end(), stream.begin() + b * (T + 1) + 1, stream.begin() + (b + 1) * (T + 1));
  }
  auto write = [&](const std::string& name, std::span<const float> base, std::vector<NamedTensor> extra) {
    std::vector<NamedTensor> tensors = std::move(extra);
    for (const TensorSpec& spec : model.layout().tensors()) tensors.push_back({spec.name, spec.shape, base.data() + spec.offset});
    if (common::Status status = WriteSafetensors(dir / fmt::format("{}-{}.safetensors", name_of_run, name), tensors);
        !status.ok()) {
      fmt::print(stderr, "torch_dump: {}\n", status.ToString());
      std::exit(1);
    }
  };
  std::vector<float> tokens_f(tokens.begin(), tokens.end()), targets_f(targets.begin(), targets.end());
  std::vector<NamedTensor> inputs = {{"_tokens", {B, T}, tokens_f.data()}, {"_targets", {B, T}, targets_f.data()}};
  const std::vector<std::vector<float>> masks = DropoutMasks(config, context, dropout, B, T);
  std::vector<std::string> mask_names;
  for (size_t site = 0; dropout > 0 && site < masks.size(); ++site) mask_names.push_back(fmt::format("_mask.{}", site));
  for (size_t site = 0; site < mask_names.size(); ++site) {
    const bool attention = site % 3 == 2;
    std::vector<int64_t> shape = attention ? std::vector<int64_t>{B, config.n_head, T, T}
                                           : std::vector<int64_t>{B, T, config.d_model};
    inputs.push_back({mask_names[site], shape, masks[site].data()});
  }
  write("before", model.params(), inputs);

  std::vector<float> loss(1), norm(1);
  loss[0] = static_cast<float>(model.Forward(tokens.data(), targets.data(), B, T, dropout > 0 ? &context : nullptr));
  model.Backward(1.0f);
  norm[0] = static_cast<float>(GlobalNorm(model.grads()));
  write("grads", model.grads(), {{"_loss", {1}, loss.data()}, {"_grad_norm", {1}, norm.data()}});
  ClipByGlobalNorm(model.grads(), norm[0], 1.0);
  AdamWConfig adam;
  adam.weight_decay = 0.1f;
  AdamW optimizer(model.layout(), adam);
  optimizer.Step(model.params(), model.grads(), 1e-3f, 1);
  write("after", model.params(), {});
}

}  // namespace
}  // namespace srunway::trainer

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  srunway::trainer::DumpOps(argv[1]);
  for (float dropout : {0.0f, 0.1f}) {
    srunway::trainer::DumpStep(argv[1], "gpt-tiny", dropout);
    srunway::trainer::DumpStep(argv[1], "llama-tiny", dropout);
  }
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.qkv_bias = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.squared_relu = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.1f, {.exact_gelu = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.1f, {.nemotron = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.learned = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.qk_norm = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.qk_norm = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.qk_norm = true, .head_dim = 32});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.head_dim = 8});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.qk_norm = true, .other_norm = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.other_norm = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.rotary_percent = 0.25});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.longrope = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.rotary_interleaved = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.no_positions = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.no_positions = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.no_rope_freq = 2});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.window = 5});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.window = 5, .window_skip = 2});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.0f, {.softmax = srunway::trainer::Softmax::kOffByOne});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.1f, {.softmax = srunway::trainer::Softmax::kLearnable});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.quick_geglu = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.other_tie = true, .gemma = true});
  srunway::trainer::DumpStep(argv[1], "gpt-tiny", 0.1f, {.other_tie = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.0f, {.yarn = true});
  srunway::trainer::DumpStep(argv[1], "llama-tiny", 0.1f, {.linear_bias = true});
  return 0;
}
