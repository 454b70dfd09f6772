// Model configuration: one struct describes every GPT and Llama the trainer builds, presets included.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "trainer/ops/glu.h"
#include "trainer/ops/rope_frequency.h"

namespace srunway::trainer {

enum class Arch { kGpt, kLlama };

std::string_view ArchName(Arch arch);

// The norms: LayerNorm (a weight and a bias; GPT's) or RMSNorm (a weight; Llama's), by Megatron's names.
enum class Norm { kLayerNorm, kRmsNorm };

std::string_view NormName(Norm norm);
// The norm NormName names (LayerNorm, RMSNorm), if any.
std::optional<Norm> NormFromName(std::string_view name);
// An architecture's own norms: GPT's LayerNorm, Llama's RMSNorm.
constexpr Norm ArchNorm(Arch arch) { return arch == Arch::kGpt ? Norm::kLayerNorm : Norm::kRmsNorm; }

// Attention's softmax, by Megatron's names (--softmax-type): vanilla; off-by-one, one more term, 1, in each row's
// denominator (a sink key of score 0 and value 0, which a query can attend to so as to attend to nothing); learnable,
// that sink's score learned per head and layer (gpt-oss's attention sinks).
enum class Softmax { kVanilla, kOffByOne, kLearnable };

std::string_view SoftmaxName(Softmax softmax);
std::optional<Softmax> SoftmaxFromName(std::string_view name);

// YaRN's numbers (Megatron's --yarn-* flags; its YarnRotaryEmbedding's defaults): RoPE's frequencies blended
// between theta^(-2i/hd) and that divided by `factor` over the pairs that turn between beta_slow and beta_fast times
// in `original_positions` (the range's bounds rounded outwards to whole pairs unless round_to_int is false, as
// gpt-oss's), and q and k multiplied by the attention factor m(mscale) / m(mscale_all_dim), m(a) = 0.1 a ln(factor)
// + 1 (1 where factor <= 1).
struct YarnScaling {
  float factor = 1.0f;
  int original_positions = 4096;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float mscale = 1.0f;
  float mscale_all_dim = 0.0f;
  bool round_to_int = true;

  float attention_factor() const;
  friend bool operator==(const YarnScaling&, const YarnScaling&) = default;
};

// LongRoPE (Phi-3's long-context RoPE, Hugging Face's rope_type longrope; Megatron has no flag for it, so it comes from
// a Hugging Face config or a checkpoint): pair i of the rotary dimensions turns at theta^(-2i/rotary_dim) divided by
// short_factor[i] where the largest position + 1 is up to original_positions and by long_factor[i] past it
// (rope(T), T that reach: transformers chooses by its position_ids' largest), q and k multiplied by attention_factor
// either way.
struct LongRope {
  std::vector<float> short_factor;
  std::vector<float> long_factor;
  int original_positions = 4096;
  float attention_factor = 1.0f;

  friend bool operator==(const LongRope&, const LongRope&) = default;
};

struct ModelConfig {
  Arch arch = Arch::kGpt;
  int n_layer = 2;
  int d_model = 64;   // hidden size
  int n_head = 4;
  int n_kv_head = 4;  // < n_head: grouped-query attention
  int d_ff = 256;     // FFN hidden size (per branch for SwiGLU)
  int seq_len = 128;  // longest sequence; GPT's learned position table has this many rows
  // No positions at all (NoPE): neither GPT's learned table nor Llama's RoPE, which Megatron's
  // --position-embedding-type none builds for either (the causal mask alone tells tokens apart by order).
  bool no_positions = false;
  // The other architecture's positions, as Megatron's --position-embedding-type chooses them apart from the rest: a
  // GPT's RoPE in place of its learned table (Nemotron's; the RoPE settings below then apply to it), a Llama's learned
  // table in place of RoPE (its gated FFN without --position-embedding-type rope, Megatron's learned_absolute default).
  bool other_positions = false;
  int vocab = 512;
  float init_std = 0.02f;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;  // Llama only
  // Llama 3.1's RoPE scaling (Llama only; --use-rope-scaling, Hugging Face's rope_scaling of rope_type llama3):
  // factor 0 is none. The other three are Megatron's fixed values unless a Hugging Face config gives others.
  float rope_scaling_factor = 0.0f;
  float rope_low_freq_factor = 1.0f;
  float rope_high_freq_factor = 4.0f;
  int rope_original_positions = 8192;
  // Linear RoPE scaling (Llama only; not with the above): Megatron's --rotary-seq-len-interpolation-factor, Hugging
  // Face's rope_scaling of rope_type linear. 1 is none.
  float rope_linear_factor = 1.0f;
  // The share of each head's dimensions that RoPE turns (Llama only): Megatron's --rotary-percent, whose rotary
  // dimensions are int(head_dim x it), the first of each head's (rotate-half pairs among them); the rest pass as
  // they are. 1 is all. A double, as Python multiplies it.
  double rotary_percent = 1.0;
  // RoPE's pairs side by side, (2i, 2i + 1), rather than the two halves' (i, i + rotary_dim / 2) (Llama only):
  // Megatron's --rotary-interleaved, the layout of GPT-J's and Meta's own Llama code.
  bool rotary_interleaved = false;
  // YaRN (Llama only; Megatron's --position-embedding-type yarn, gpt-oss's RoPE): empty where RoPE is not YaRN's.
  // Not with the other scalings, --rotary-percent or --rotary-interleaved (Megatron's YaRN turns whole heads in
  // halves).
  std::optional<YarnScaling> yarn;
  // LongRoPE (Llama only): empty where RoPE is not LongRoPE's. Not with the other scalings.
  std::optional<LongRope> longrope;
  // The layers that turn no RoPE (Llama only), 1 at each such layer and n_layer long: Megatron's --no-rope-freq, as
  // Llama 4 skips it in every fourth layer (its iRoPE). Empty where every layer turns it.
  std::vector<uint8_t> no_rope;
  // Sliding-window attention: each query attends to itself and the `window` keys before it (Megatron's --window-size
  // window,0, Mistral's and Gemma's local attention; -1 is none), in the layers window_layers marks with 1
  // (--window-attn-skip-freq; empty: every layer), the others attending to every key before.
  int window = -1;
  std::vector<uint8_t> window_layers;
  // Attention's softmax; with kLearnable each layer has a parameter of n_head sink scores ("softmax_offset").
  Softmax softmax = Softmax::kVanilla;
  // Biases on q, k and v alone (a Llama's, or a GPT's with no_linear_bias; GPT has every bias unless that): Megatron's
  // --add-qkv-bias, Qwen2's attention.
  bool qkv_bias = false;
  // GPT only: no bias on its linear layers (Megatron's --disable-bias-linear beside GPT's other flags: Nemotron's); a
  // Llama has none unless linear_bias. LayerNorm's own biases stay.
  bool no_linear_bias = false;
  // Biases on every linear layer, q, k and v, the attention's output projection and both FFN layers (Llama only: GPT
  // has them all): Megatron's add_bias_linear, its default, which a Llama's --disable-bias-linear turns off; gpt-oss's
  // attention has them. qkv_bias is then false, as this holds that one too.
  bool linear_bias = false;
  // GPT only: the FFN's activation relu(x)^2 instead of GELU (Megatron's --squared-relu; Hugging Face's relu2).
  bool squared_relu = false;
  // GPT only: the FFN's GELU exact, 0.5 x (1 + erf(x / sqrt(2))), rather than its tanh approximation (Megatron's
  // --no-bias-gelu-fusion, whose unfused MLP computes PyTorch's gelu; Hugging Face's "gelu").
  bool exact_gelu = false;
  // Llama only: the gated FFN's activation (ops/glu.h): quick GELU, x sigmoid(1.702 x), in place of SiLU (Megatron's
  // --quick-geglu), the offset added to up (--glu-linear-offset), and the clamp of gate and up before it
  // (--activation-func-clamp-value; 0: none), gpt-oss's three; or GELU's tanh approximation in place of SiLU (GeGLU,
  // --geglu: Gemma's gelu_pytorch_tanh).
  bool quick_geglu = false;
  float glu_linear_offset = 0.0f;
  float glu_clamp = 0.0f;
  bool geglu = false;
  // The token embedding times it (--embedding-multiplier): Gemma's sqrt(d_model), Granite's embedding_multiplier.
  float embedding_multiplier = 1.0f;
  // Each head's q and k through the model's norm (norm(): GPT's LayerNorm, Llama's RMSNorm) over its head_dim values,
  // with weights of their own shared by the heads, before RoPE: Megatron's --qk-layernorm, Qwen3's q_norm and k_norm.
  bool qk_norm = false;
  // Megatron's --apply-layernorm-1p (its layernorm_zero_centered_gamma): every norm's weight is stored as its
  // difference from 1, drawn as 0, and the norms multiply by 1 + weight, which a bf16 copy of the weights then holds
  // to bf16's precision near 0 rather than near 1. The same model, trained the same way (norm weights have no decay).
  bool norm_1p = false;
  // The norms where they are not the architecture's own (GPT's LayerNorm, Llama's RMSNorm): Megatron's
  // --normalization, which it chooses apart from the rest. Its default LayerNorm with Llama's other flags, as
  // Megatron's own Llama 3 scripts pass them, builds a Llama whose norms are LayerNorms, biases included; RMSNorm with
  // GPT's, a GPT whose norms have no biases. Empty where they are the architecture's own, which is how every entry
  // point stores that case (SetNorm), so that a model reads the same whichever way it is told.
  std::optional<Norm> other_norm;
  // Whether the output layer is the token embedding again where that is not the architecture's own (GPT ties it,
  // Llama has its own): Megatron ties it unless --untie-embeddings-and-output-weights, so its Llama flags without that
  // build a tied Llama (Llama 3.2's, Qwen2.5's and Gemma's small models) and a GPT with it an untied one. Empty where
  // it is the architecture's own, which is how every entry point stores that case (SetTiedEmbeddings).
  std::optional<bool> other_tie;

  // Each head's width where it is not d_model / n_head (Megatron's --kv-channels, Hugging Face's head_dim); 0 where
  // it is, which is how every entry point stores that case, so that a model reads the same whichever way it is told.
  int kv_channels = 0;

  int head_dim() const { return kv_channels > 0 ? kv_channels : d_model / n_head; }
  // The attention's width, the query heads' values side by side (d_model unless kv_channels says otherwise): what the
  // output projection takes in.
  int q_dim() const { return n_head * head_dim(); }
  // How many of each head's first dimensions RoPE turns.
  int rotary_dim() const { return static_cast<int>(head_dim() * rotary_percent); }
  // RoPE's frequencies where positions reach T - 1 (LongRoPE's factors are chosen by T).
  RopeFrequencies rope(int T) const;
  int qkv_dim() const { return (n_head + 2 * n_kv_head) * head_dim(); }
  // GPT's learned position table, Llama's RoPE: the model's positions unless no_positions.
  bool learned_positions() const { return (arch == Arch::kGpt) != other_positions && !no_positions; }
  bool rope_turns() const { return (arch == Arch::kLlama) != other_positions && !no_positions; }
  bool rope_turns(int layer) const { return rope_turns() && (no_rope.empty() || no_rope[layer] == 0); }
  bool windowed(int layer) const { return window >= 0 && (window_layers.empty() || window_layers[layer] != 0); }
  bool sinks() const { return softmax != Softmax::kVanilla; }
  Glu glu() const { return {quick_geglu ? kQuickGeluAlpha : 1.0f, glu_linear_offset, glu_clamp, geglu}; }
  // A gated FFN other than Llama's SwiGLU.
  bool other_glu() const { return quick_geglu || geglu || glu_linear_offset != 0.0f || glu_clamp != 0.0f; }
  // Biases on q, k and v: GPT's (unless no_linear_bias), and a model's with qkv_bias or linear_bias.
  bool has_qkv_bias() const { return has_linear_bias() || qkv_bias; }
  // Biases on the other linear layers (the attention's output projection, the FFN's two): GPT's unless
  // no_linear_bias, and a Llama's with linear_bias.
  bool has_linear_bias() const { return (arch == Arch::kGpt && !no_linear_bias) || linear_bias; }
  // The output layer is the token embedding again (GPT's, unless other_tie says otherwise), or its own (Llama's).
  bool tied_embeddings() const { return other_tie.value_or(arch == Arch::kGpt); }
  Norm norm() const { return other_norm.value_or(ArchNorm(arch)); }
  bool layernorm() const { return norm() == Norm::kLayerNorm; }
  // GPT's GELU in its tanh approximation, whose Linear layer computes it in the GEMM's epilogue (MatmulGeluForward).
  bool gelu() const { return arch == Arch::kGpt && !squared_relu && !exact_gelu; }

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Heads head_dim wide: kv_channels is 0 where that is d_model / n_head, else head_dim.
void SetHeadDim(ModelConfig& config, int head_dim);
// Norms of this kind: other_norm is empty where that is the architecture's own, else `norm`.
void SetNorm(ModelConfig& config, Norm norm);
// The output layer tied to the token embedding or not: other_tie is empty where that is the architecture's own.
void SetTiedEmbeddings(ModelConfig& config, bool tied);
// The architecture's name, and its norms' where they are not its own, and the positions it goes without: "llama",
// "llama with LayerNorm", "gpt without positions", "llama with LayerNorm, without RoPE in 2 of 8 layers",
// "gpt with a window of 128 keys back in 6 of 8 layers", "llama with an off-by-one softmax".
std::string ModelKind(const ModelConfig& config);

// Megatron's --no-rope-freq for a model of n_layer layers: an integer N, RoPE skipped in every Nth layer (the last of
// each N; 0 skips none), or a list expression of Megatron's form, such as ([0]*3+[1])*2, 1 where a layer skips it.
// The layers it skips (ModelConfig::no_rope), or an error naming the flag.
common::StatusOr<std::vector<uint8_t>> NoRopeLayers(std::string_view text, int n_layer);
// Megatron's --window-size L,R: L, each query attending to itself and the L keys before it; -1 (from -1,0 or -1,-1)
// for no window. The right side must be 0 (the attention is causal).
common::StatusOr<int> WindowSize(std::string_view text);
// Megatron's --window-attn-skip-freq for a model of n_layer layers: an integer N, every Nth layer attending to every
// key before it and the others through the window, or a list expression, 1 where a layer attends through the
// window. The layers that do (ModelConfig::window_layers), or an error naming the flag.
common::StatusOr<std::vector<uint8_t>> WindowLayers(std::string_view text, int n_layer);

// Names accepted by --preset, in the order `srunway-train --help` lists them.
const std::vector<std::string>& PresetNames();
common::StatusOr<ModelConfig> Preset(std::string_view name);

// Every field must be positive and consistent (heads divide the hidden size, KV heads divide heads, ...); the error
// names the field and the srunway-train flag that sets it ("d_model (--hidden-size) 100 is not a multiple of ...").
common::Status Validate(const ModelConfig& config);

// The checkpoint header stores the config as JSON; FromJson names the key that is missing or wrong.
common::Json ToJson(const ModelConfig& config);
common::StatusOr<ModelConfig> FromJson(const common::Json& json, std::string_view where);

// Llama 3.1's RoPE scaling as Hugging Face's rope_scaling names its numbers (factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings), without its rope_type; null where there is none. The reader
// fills those four fields of `config` from such an object.
common::Json RopeScalingToJson(const ModelConfig& config);
common::Status RopeScalingFromJson(const common::Json& json, std::string_view where, ModelConfig& config);

// `wanted` with the settings that decide how far its positions reach taken from `stored`: seq_len where neither has
// a learned position table, RoPE's theta and its scalings (Llama 3.1's, linear, YaRN). Where the result equals
// `stored`, the two differ in nothing else and have the same parameters: a checkpoint of `stored` fine-tunes into
// `wanted`, as a longer context's does (Megatron's --finetune reads the weights whatever those settings).
ModelConfig WithPositionsOf(const ModelConfig& wanted, const ModelConfig& stored);

// "n_layer is 2 in the checkpoint and 4 here; d_model ..." or empty when equal.
std::string DescribeDifference(const ModelConfig& stored, const ModelConfig& wanted);

// Parameters of the model, embeddings included.
int64_t ParameterCount(const ModelConfig& config);

// A tokenizer's vocabulary of `tokens` padded up to a multiple of `multiple`, as Megatron pads it
// (--make-vocab-size-divisible-by, 128 by default: GPT-2's 50257 tokens become 50304); at most INT_MAX.
int PaddedVocabSize(int64_t tokens, int multiple = 128);

// Training FLOPs per token, forward and backward, for a sequence of `seq_len` tokens:
//   6 * N  +  12 * n_layer * seq_len * q_dim
// where N is ParameterCount less the tables only looked up (GPT's position table, the input embedding where the
// output layer is its own; the output layer, tied or not, is a matrix product and counts) and the second term is the attention score and value
// products (QK^T and PV, each 2 * seq_len * q_dim FLOPs per token forward with causal masking ignored, times 3 for
// forward + backward; q_dim is d_model unless kv_channels says otherwise): the formula of the PaLM paper's appendix
// B, which nanoGPT and llm.c use for MFU too. A layer with a sliding window counts the keys each query sees,
// min(seq_len, window + 1), in place of seq_len.
double TrainingFlopsPerToken(const ModelConfig& config, int seq_len);

// Megatron-LM's count behind its "throughput per GPU (TFLOP/s/GPU)" (num_floating_point_operations of its main
// branch, 2026), per token of a `seq_len` sequence: 3 (forward and backward) x 2 (a multiply-add) x
//   per layer: d x ffn x (3 for SwiGLU, else 2) + d x (q + 2 kv) + q x d + q x seq_len
//   and the output layer: d x vocab
// with q = heads x head size and kv = key-value heads x head size; the last term of a layer is its attention
// scores and values with half of them masked (causal). Norms, biases and embedding lookups count nothing. Earlier
// Megatron (the formula of Narayanan et al. 2021) counted the scores whole, as TrainingFlopsPerToken does.
double MegatronFlopsPerToken(const ModelConfig& config, int seq_len);

}  // namespace srunway::trainer
