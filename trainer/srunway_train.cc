// srunway-train: GPT/Llama pretraining with Megatron/NeMo flag names; --config FILE.yaml holds the same keys.
// Exit codes: see trainer/train/trainer.h (0 ok, 1 error, 2 usage, 3 diverged, 4 stopped by a signal).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "common/cli.h"
#include "common/log.h"
#include "trainer/ckpt/checkpoint.h"
#include "trainer/ckpt/weights.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/config.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/train/config_file.h"
#include "trainer/train/megatron_args.h"
#include "trainer/train/planner.h"
#include "trainer/train/trainer.h"

namespace {

using srunway::trainer::TrainOptions;

volatile std::sig_atomic_t g_stop_signal = 0;

// OpenMP threads that wait for work sleep at once (OMP_WAIT_POLICY=passive) unless the user chose a policy or a
// spin count. libgomp's default spins 3 ms at every barrier first: on a quiet machine that gains nothing
// measurable (gpt-tiny, 2 threads: 54 to 73 ms per step either way), but beside one busy process on the same two
// cores a step took 1206 to 1280 ms instead of 74 to 88, the spinning threads taking the CPU from the one with
// work left. libgomp reads the variable once, in its own constructor (default priority), which the linker orders
// after this one in the static program; main takes the variable back out, so that what the program starts sees
// the environment it was given. With a shared libgomp this comes too late and changes nothing.
bool g_set_wait_policy = false;
__attribute__((constructor(101))) void PassiveOpenMpWaits() {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    g_set_wait_policy = setenv("OMP_WAIT_POLICY", "passive", 0) == 0;
  }
}

int ExitCode(srunway::trainer::TrainResult::Ending ending) {
  switch (ending) {
    case srunway::trainer::TrainResult::Ending::kFinished: return srunway::trainer::kExitOk;
    case srunway::trainer::TrainResult::Ending::kDiverged: return srunway::trainer::kExitDiverged;
    case srunway::trainer::TrainResult::Ending::kReplicasDiffer: return srunway::trainer::kExitDiverged;
    case srunway::trainer::TrainResult::Ending::kSignalled: return srunway::trainer::kExitSignalled;
    case srunway::trainer::TrainResult::Ending::kTimeLimit: return srunway::trainer::kExitSignalled;
    case srunway::trainer::TrainResult::Ending::kExitInterval: return srunway::trainer::kExitSignalled;
  }
  return srunway::trainer::kExitError;
}
void OnStopSignal(int signal) { g_stop_signal = signal; }

// Megatron's architecture flags, as its scripts pass them.
struct MegatronArch {
  std::string normalization, position_embedding;  // "" when not given
  bool swiglu = false, untie = false, disable_bias = false;
  bool quick_geglu = false;  // takes --swiglu's place in Llama's set, or changes a --preset's Llama
  bool geglu = false;        // likewise
  // Megatron's older spellings: --use-rotary-position-embeddings is --position-embedding-type rope, and
  // --no-position-embedding, which it takes only with RoPE, says what RoPE already means.
  bool use_rotary = false, no_position_embedding = false;
};

// The architecture, norms and positions Megatron's flags ask for, each empty where they ask for none.
struct ArchFlags {
  std::optional<srunway::trainer::Arch> arch;
  std::optional<srunway::trainer::Norm> norm;
  bool no_positions = false;  // --position-embedding-type none
  bool linear_bias = false;   // a Llama without --disable-bias-linear: every linear layer's bias, Megatron's default
  bool rope = false;     // without a gated FFN, RoPE (or YaRN's) for the model's positions: a GPT's other_positions
  bool learned = false;  // with one, a learned table for the model's positions: a Llama's other_positions
  bool no_bias = false;       // without a gated FFN, --disable-bias-linear: a GPT's no_linear_bias
  std::optional<bool> tied;   // the output layer tied to the embedding or not; empty: the --preset's
};

// Megatron's flags are apart, and srunway-train takes them so. A gated FFN (--swiglu, --quick-geglu, --geglu) asks
// for a Llama, GPT's explicit learned positions for a GPT. Without a --preset the rest are Megatron's defaults: learned
// positions unless --position-embedding-type says otherwise (RoPE for Llama's scripts, which give it), LayerNorm
// unless --normalization (Megatron's own Llama 3 scripts give none), a bias on every linear layer unless
// --disable-bias-linear, the output layer tied to the embedding unless --untie-embeddings-and-output-weights (Llama 2's
// and 3's scripts give it; Llama 3.2 1B's, Qwen2.5's and Gemma's small models leave it out); a --preset keeps its own
// where a flag does not say. Without a gated FFN, RoPE (or YaRN's) and --disable-bias-linear change whatever model the
// rest gives (a GPT's positions RoPE's, its layers without biases: Nemotron's GPT). --quick-geglu or --geglu alone
// changes a --preset's activation, as --position-embedding-type yarn its RoPE, and both together that model's, without
// asking for the rest of Llama's defaults (biases). --position-embedding-type none leaves either without positions.
srunway::common::StatusOr<ArchFlags> ArchFromFlags(MegatronArch m, bool preset_given) {
  using srunway::trainer::Arch, srunway::trainer::Norm;
  if (m.use_rotary) {
    if (!m.position_embedding.empty() && m.position_embedding != "rope") {
      return srunway::common::InvalidArgument("--use-rotary-position-embeddings asks for RoPE, --position-embedding-type "
                                              "{} for {}: give one", m.position_embedding,
                                              m.position_embedding == "none" ? "no positions" : "learned positions");
    }
    m.position_embedding = "rope";
  }
  if (m.no_position_embedding && m.position_embedding != "rope") {
    return srunway::common::InvalidArgument("--no-position-embedding is Megatron's deprecated flag, taken with RoPE "
                                            "only (--position-embedding-type rope): for a model without learned "
                                            "positions give that, for one without any --position-embedding-type none");
  }
  if ((m.swiglu ? 1 : 0) + (m.quick_geglu ? 1 : 0) + (m.geglu ? 1 : 0) > 1) {
    return srunway::common::InvalidArgument("--swiglu, --quick-geglu and --geglu are three activations of a gated FFN "
                                            "(SiLU, quick GELU and GELU): give one");
  }
  const bool other_glu = m.quick_geglu || m.geglu;
  ArchFlags flags;
  flags.norm = srunway::trainer::NormFromName(m.normalization);  // none when not given (CLI11 takes those two)
  flags.no_positions = m.position_embedding == "none";
  if (m.untie) flags.tied = false;
  if (!m.swiglu && !other_glu) {
    flags.rope = m.position_embedding == "rope" || m.position_embedding == "yarn";
    flags.no_bias = m.disable_bias;
    if (m.position_embedding == "learned_absolute") flags.arch = Arch::kGpt;
    return flags;
  }
  flags.learned = m.position_embedding == "learned_absolute" || (m.position_embedding.empty() && !preset_given);
  // Changes alone: --quick-geglu or --geglu, and YaRN or no positions or none said, without Llama's other flags.
  const bool changes_only = other_glu && m.position_embedding != "rope" && !m.disable_bias;
  if (changes_only && preset_given) return flags;
  flags.arch = Arch::kLlama;
  flags.linear_bias = !m.disable_bias;
  if (!flags.norm && !preset_given) flags.norm = Norm::kLayerNorm;
  if (!flags.tied && !preset_given) flags.tied = true;
  return flags;
}

}  // namespace

int main(int argc, char** argv) {
  if (g_set_wait_policy) unsetenv("OMP_WAIT_POLICY");  // read by now: PassiveOpenMpWaits
  srunway::common::InitLogging("srunway-train");
  srunway::common::ExitIfStdoutLost(srunway::trainer::kExitError);  // --help, --version, --dry-run's plan
  TrainOptions o;
  std::string preset = "gpt-tiny", config_file;
  int num_layers = 0, hidden_size = 0, heads = 0, query_groups = 0, ffn = 0, max_positions = 0, vocab = 0;
  float init_std = 0;

  CLI::App app{"Pretrain a GPT or Llama model (Megatron/NeMo flag names)."};
  srunway::common::SetUpProgram(app, "srunway-train");
  app.set_config();  // no INI/TOML: --config is YAML, handled below
  app.footer(
      "Environment (GPU runs; any other value of the first four is refused with exit 2):\n"
      "  SRUNWAY_ATTENTION=mma|cudnn|auto|wmma|simple  attention; unset: cuDNN's fused engine where cuDNN loads, else\n"
      "                                                the mma.sync kernels; auto: the faster, timed once per shape\n"
      "  SRUNWAY_GELU_EPILOGUE=0|1                     0: no cuBLASLt epilogues (GELU, bias gradients), to compare\n"
      "  SRUNWAY_BGRADB=0|1                            0: weight gradients' bias sums by our kernel, not cuBLASLt's\n"
      "  SRUNWAY_GEMM_TUNE=0|1                         1 (the default): each GEMM's algorithm the fastest of\n"
      "                                                cuBLASLt's first 8, timed at its first call, kept in\n"
      "                                                checkpoints for a resumed run; 0: the heuristic's first\n"
      "  SRUNWAY_CUDA_DRIVER, SRUNWAY_NCCL_LIBRARY, SRUNWAY_CUBLASLT_LIBRARY, SRUNWAY_CUDNN_LIBRARY\n"
      "                                                the libraries to open instead of searching for them\n"
      "Example: srun --mpi=pmix -N2 --ntasks-per-node=8 --gpus-per-node=8 srunway-launch -- srunway-train "
      "--device cuda --preset gpt2-124m --data-path data/web --micro-batch-size 16 --global-batch-size 256");
  app.add_option("--config", config_file, "YAML file of flag: value (command-line flags win)");
  app.add_option("--preset", preset, "model: " + fmt::format("{}", fmt::join(srunway::trainer::PresetNames(), ", ")))
      ->capture_default_str();
  MegatronArch megatron_arch;
  float norm_eps = 0, rotary_base = 0;
  bool group_query_attention = false;
  app.add_option("--normalization", megatron_arch.normalization,
                 "Megatron's: the norms, LayerNorm (GPT's; Megatron's default, also with the four flags below) or "
                 "RMSNorm (Llama's)")
      ->check(CLI::IsMember({"LayerNorm", "RMSNorm"}));
  app.add_flag("--swiglu", megatron_arch.swiglu, "Megatron's: SwiGLU (Llama's)");
  app.add_flag("--quick-geglu", megatron_arch.quick_geglu,
               "Megatron's: a Llama's gated FFN with quick GELU, x sigmoid(1.702 x), in place of SiLU (gpt-oss's); "
               "with Llama's other three flags it takes --swiglu's place");
  app.add_flag("--geglu", megatron_arch.geglu,
               "a Llama's gated FFN with GELU's tanh approximation in place of SiLU (GeGLU, Gemma's "
               "gelu_pytorch_tanh); with Llama's other three flags it takes --swiglu's place");
  float embedding_multiplier = 1.0f;
  app.add_option("--embedding-multiplier", embedding_multiplier,
                 "the token embedding times it (Gemma's: the square root of --hidden-size; default 1)")
      ->check(srunway::common::Positive());
  float glu_linear_offset = 0, glu_clamp = 0;
  app.add_option("--glu-linear-offset", glu_linear_offset,
                 "Megatron's: a Llama's gated FFN computes act(gate) * (up + it) (gpt-oss's: 1; default 0)");
  app.add_option("--activation-func-clamp-value", glu_clamp,
                 "Megatron's: a Llama's gated FFN clamps gate above at it and up to [-it, it] first (gpt-oss's: 7)")
      ->check(srunway::common::Positive());
  app.add_option("--position-embedding-type", megatron_arch.position_embedding,
                 "Megatron's: learned_absolute (GPT's), rope (Llama's; without a gated FFN, a GPT's: Nemotron's), "
                 "yarn (RoPE scaled by YaRN, gpt-oss's: the --yarn-* flags) or none (either model without positions: "
                 "NoPE)")
      ->check(CLI::IsMember({"learned_absolute", "rope", "yarn", "none"}));
  srunway::trainer::YarnScaling yarn;
  std::vector<CLI::Option*> yarn_options = {
      app.add_option("--yarn-rotary-scaling-factor", yarn.factor,
                     "Megatron's: YaRN's factor, how many times longer than the original positions the model reads "
                     "(gpt-oss's 32)")->capture_default_str(),
      app.add_option("--yarn-original-max-position-embeddings", yarn.original_positions,
                     "Megatron's: the positions the RoPE before YaRN was trained on (gpt-oss's 4096)")
          ->capture_default_str(),
      app.add_option("--yarn-beta-fast", yarn.beta_fast,
                     "Megatron's: RoPE's pairs that turn more than this many times over the original positions "
                     "keep their frequency")->capture_default_str(),
      app.add_option("--yarn-beta-slow", yarn.beta_slow,
                     "Megatron's: those that turn fewer times are interpolated (frequency / the factor), those "
                     "between blended")->capture_default_str(),
      app.add_option("--yarn-mscale", yarn.mscale,
                     "Megatron's: q and k are multiplied by m(it) / m(--yarn-mscale-all-dim), m(a) = 0.1 a "
                     "ln(factor) + 1")->capture_default_str(),
      app.add_option("--yarn-mscale-all-dim", yarn.mscale_all_dim, "Megatron's: see --yarn-mscale")
          ->capture_default_str(),
      app.add_option("--yarn-correction-range-round-to-int", yarn.round_to_int,
                     "Megatron's: true rounds the interpolated pairs' bounds outwards to whole pairs; false (gpt-oss's) "
                     "keeps them as they fall")->default_str("true")};
  app.add_flag("--use-rotary-position-embeddings", megatron_arch.use_rotary,
               "Megatron's older spelling of --position-embedding-type rope");
  app.add_flag("--no-position-embedding", megatron_arch.no_position_embedding,
               "Megatron's: taken with RoPE, whose model has no learned positions (Megatron refuses it otherwise)");
  app.add_flag("--untie-embeddings-and-output-weights", megatron_arch.untie,
               "Megatron's: an output layer of its own, not the embedding again (Llama 2's and 3's; a --preset's "
               "Llama has it, Llama's flags without a --preset do not)");
  app.add_flag("--disable-bias-linear", megatron_arch.disable_bias,
               "Megatron's: no biases on the linear layers (Llama's, and without a gated FFN a GPT's: Nemotron's; "
               "with Llama's other flags and without it, a Llama has a bias on every linear layer, as Megatron's)");
  bool add_qkv_bias = false, squared_relu = false, qk_layernorm = false, layernorm_1p = false,
       rotary_interleaved = false;
  app.add_flag("--squared-relu", squared_relu,
               "Megatron's: the FFN's activation relu(x)^2 instead of GELU (a GPT's; a Llama's FFN is SwiGLU)");
  app.add_flag("--add-qkv-bias", add_qkv_bias,
               "Megatron's: biases on q, k and v alone (a Llama's, as Qwen2's, or a GPT's with "
               "--disable-bias-linear; a GPT has every bias otherwise)");
  app.add_flag("--qk-layernorm", qk_layernorm,
               "Megatron's: each head's q and k through the model's norm (LayerNorm or RMSNorm) over its head "
               "dimension, before RoPE, with weights of their own (Qwen3's q_norm and k_norm)");
  app.add_flag("--rotary-interleaved", rotary_interleaved,
               "Megatron's: RoPE turns side-by-side pairs (2i, 2i + 1) of each head, not its two halves (a Llama)");
  std::string no_rope_freq, window_size, window_attn_skip_freq;
  app.add_option("--window-size", window_size,
                 "Megatron's: L,0, sliding-window attention, each query attending to itself and the L keys before it "
                 "(Mistral's, Gemma's local layers); -1,0: none");
  app.add_option("--window-attn-skip-freq", window_attn_skip_freq,
                 "Megatron's: the layers that attend to every key despite --window-size: N, every Nth, or a list "
                 "expression such as [1,1,1,0]*2, 1 where a layer attends through the window")
      ->needs("--window-size");
  app.add_option("--no-rope-freq", no_rope_freq,
                 "Megatron's: the layers that turn no RoPE (a Llama): N, the last of every N layers (4: Llama 4's), or "
                 "a list expression such as ([0]*3+[1])*2, 1 where a layer skips it");
  std::string softmax_type = "vanilla";
  app.add_option("--softmax-type", softmax_type,
                 "Megatron's: attention's softmax, vanilla (its default); off-by-one, 1 more in each row's "
                 "denominator (a sink key of score 0); learnable, that sink's score learned per head (gpt-oss's "
                 "attention sinks)")
      ->check(CLI::IsMember({"vanilla", "off-by-one", "learnable"}));
  app.add_flag("--apply-layernorm-1p", layernorm_1p,
               "Megatron's: the norms' weights stored as their difference from 1 (drawn as 0; the norms multiply by "
               "1 + weight), which bf16 copies of the weights hold more finely; the same model");
  app.add_flag("--group-query-attention", group_query_attention,
               "Megatron's: --num-query-groups sets the key-value heads here, with or without it");
  app.add_option("--norm-epsilon", norm_eps, "the norms' epsilon (default: the preset's, 1e-5)")
      ->check(srunway::common::Positive());
  app.add_option("--rotary-base", rotary_base, "RoPE's theta (Llama; default: the preset's)")
      ->check(srunway::common::Positive());
  bool use_rope_scaling = false;
  float rope_scaling_factor = 8.0f;
  CLI::Option* rope_scaling =
      app.add_flag("--use-rope-scaling", use_rope_scaling,
                   "Megatron's: Llama 3.1's RoPE scaling (Llama): wavelengths past 8192 positions turn "
                   "--rope-scaling-factor times slower, those under 2048 stay, those between are interpolated");
  app.add_option("--rope-scaling-factor", rope_scaling_factor, "Megatron's: --use-rope-scaling's factor")
      ->capture_default_str()->check(srunway::common::Positive())->needs(rope_scaling);
  float interpolation_factor = 1.0f;
  app.add_option("--rotary-seq-len-interpolation-factor", interpolation_factor,
                 "Megatron's: linear RoPE scaling (Llama): positions this many times nearer, every wavelength that "
                 "many times longer")->check(srunway::common::Positive());
  // A size given is at least 1 (0 would otherwise read as "the preset's", silently); so are the other numbers
  // whose 0 stands for "not given".
  const CLI::Range size_range(1, 1 << 24);
  app.add_option("--num-layers", num_layers, "override the preset")->check(size_range);
  app.add_option("--hidden-size", hidden_size, "override the preset")->check(size_range);
  app.add_option("--num-attention-heads", heads, "override the preset")->check(size_range);
  app.add_option("--num-query-groups", query_groups, "KV heads (grouped-query attention)")->check(size_range);
  app.add_option("--ffn-hidden-size", ffn,
                 "override the preset (default with --hidden-size H: 4 H, or for Llama's SwiGLU 8 H / 3 rounded down "
                 "to a multiple of 64, as Megatron)")->check(size_range);
  app.add_option("--max-position-embeddings", max_positions, "longest sequence (override the preset)")
      ->check(size_range);
  app.add_option("--vocab-size", vocab, "override the preset (must hold every token id of the data)")
      ->check(size_range);
  bool xavier = false;
  app.add_flag("--init-method-xavier-uniform", xavier,
               "Megatron's: every weight matrix, embeddings and output layer too, drawn ~ U(-a, a), a = sqrt(6 / (fan "
               "in + fan out)), instead of N(0, --init-std), which it leaves unused (as Megatron)");
  app.add_option("--init-std,--init-method-std", init_std, "weight init std (default: the preset's)")
      ->check(srunway::common::Positive());
  app.add_option("--embedding-init-method-std", o.embedding_init_std,
                 "Megatron's: the embedding tables drawn ~ N(0, S) (either init method) and trained without weight "
                 "decay (\"Spike No More\": S = 1 keeps them from shrinking)")->check(srunway::common::NonNegative());
  app.add_option("--micro-batch-size", o.micro_batch_size, "sequences per forward/backward")->capture_default_str();
  app.add_option("--global-batch-size", o.global_batch_size, "sequences per optimizer step (default: micro batch)")
      ->check(size_range);
  app.add_option("--seq-length", o.seq_length, "tokens per sequence (default: the model's maximum)")->check(size_range);
  app.add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  app.add_option("--min-lr", o.min_lr, "learning rate at the end of the cosine decay")->capture_default_str();
  CLI::Option* decoupled_lr =
      app.add_option("--decoupled-lr", o.decoupled_lr,
                     "Megatron's: the word embeddings' and the untied output layer's own peak learning rate, along "
                     "the same warmup and decay (default: --lr)")
          ->check(srunway::common::NonNegative());
  app.add_option("--decoupled-min-lr", o.decoupled_min_lr,
                 "Megatron's: their rate at the end of the decay (default: --min-lr)")
      ->check(srunway::common::NonNegative())->needs(decoupled_lr);
  CLI::Option* warmup_steps =
      app.add_option("--warmup-steps,--lr-warmup-iters", o.warmup_steps, "linear warmup steps")->capture_default_str();
  app.add_option("--lr-warmup-init", o.lr_warmup_init,
                 "Megatron's: the warmup rises from this rate instead of from 0")
      ->capture_default_str()->check(srunway::common::NonNegative());
  CLI::Option* warmup_fraction =
      app.add_option("--lr-warmup-fraction", o.warmup_fraction,
                     "warm up over this fraction of --lr-decay-steps (Megatron's; rounded to whole steps)")
          ->check(srunway::common::NonNegative())->excludes(warmup_steps);
  CLI::Option* train_steps =
      app.add_option("--train-steps,--train-iters", o.train_steps, "optimizer steps")->capture_default_str();
  CLI::Option* decay_steps = app.add_option("--lr-decay-steps,--lr-decay-iters", o.lr_decay_steps,
                                            "cosine decay ends here (default: --train-steps)")
                                 ->check(srunway::common::Positive());
  // Megatron's sample-based schedule (its --train-samples, --lr-decay-samples, --lr-warmup-samples).
  const auto samples = CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max());
  app.add_option("--train-samples", o.train_samples, "train this many samples: --train-steps of them / the global "
                 "batch, rounded down (Megatron's)")->check(samples)->excludes(train_steps);
  app.add_option("--lr-decay-samples", o.lr_decay_samples, "--lr-decay-steps in samples (rounded to whole steps)")
      ->check(samples)->excludes(decay_steps);
  app.add_option("--lr-warmup-samples", o.lr_warmup_samples, "--warmup-steps in samples (rounded to whole steps)")
      ->check(samples)->excludes(warmup_steps)->excludes(warmup_fraction);
  app.add_option("--rampup-batch-size", o.rampup_batch_size,
                 "START INCREMENT SAMPLES: the global batch grows from START by INCREMENT to --global-batch-size "
                 "over SAMPLES samples (Megatron's; with --train-samples the schedule counts samples)")
      ->expected(3)->check(samples);
  app.add_option("--lr-decay-style", o.lr_decay_style,
                 "cosine, linear, constant, inverse-square-root or WSD (Megatron's: --lr-warmup-iters' rate until "
                 "the last --lr-wsd-decay-iters steps of the decay, then down to --min-lr)")
      ->capture_default_str();
  CLI::Option* wsd_steps = app.add_option("--lr-wsd-decay-iters", o.lr_wsd_decay_steps,
                                          "--lr-decay-style WSD: the steps of its final decay (Megatron's)")
                               ->check(srunway::common::Positive());
  app.add_option("--lr-wsd-decay-samples", o.lr_wsd_decay_samples, "--lr-wsd-decay-iters in samples (Megatron's)")
      ->check(samples)->excludes(wsd_steps);
  app.add_option("--lr-wsd-decay-style", o.lr_wsd_decay_style,
                 "--lr-decay-style WSD: how its final decay falls: exponential, linear, cosine or minus_sqrt "
                 "(Megatron's)")
      ->capture_default_str()->check(CLI::IsMember({"exponential", "linear", "cosine", "minus_sqrt"}));
  app.add_option("--constant-steps", o.constant_steps,
                 "hold --min-lr for the last N steps of the schedule, with NeMo's warmup (CosineAnnealing's "
                 "constant_steps)")->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay (not on norms and biases)")->capture_default_str();
  app.add_option("--weight-decay-incr-style", o.weight_decay_incr_style,
                 "Megatron's: constant (--weight-decay), or linear or cosine from --start-weight-decay to "
                 "--end-weight-decay over the run")
      ->capture_default_str()->check(CLI::IsMember({"constant", "linear", "cosine"}));
  app.add_option("--start-weight-decay", o.start_weight_decay, "Megatron's: --weight-decay-incr-style's first");
  app.add_option("--end-weight-decay", o.end_weight_decay, "Megatron's: --weight-decay-incr-style's last");
  app.add_option("--adam-beta1", o.adam_beta1)->capture_default_str();
  app.add_option("--adam-beta2", o.adam_beta2)->capture_default_str();
  app.add_option("--adam-eps", o.adam_eps)->capture_default_str();
  app.add_option("--clip-grad", o.clip_grad, "clip the global gradient norm (0: off)")->capture_default_str();
  app.add_option("--hidden-dropout", o.hidden_dropout,
                 "dropout on the embeddings and on each attention and MLP output")->capture_default_str();
  app.add_option("--attention-dropout", o.attention_dropout, "dropout on the attention probabilities")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "initialisation and data order")->capture_default_str();
  CLI::Option* data_path =
      app.add_option("--data-path", o.data_path, "PREFIX (Megatron .bin/.idx or llm.c shards) or a blend 'W1 P1 W2 P2'");
  // Megatron's per-split paths, in place of --data-path and --split.
  CLI::Option* train_path = app.add_option("--train-data-path", o.train_data_path,
                                           "the training data whole (a prefix or a blend), in place of --data-path "
                                           "and --split (Megatron's)")->excludes(data_path);
  app.add_option("--valid-data-path", o.valid_data_path, "the validation data whole, with --train-data-path")
      ->needs(train_path);
  std::vector<std::string> test_path;
  app.add_option("--test-data-path", test_path,
                 "Megatron's: taken with --train-data-path and not read (srunway-train runs no test evaluation)")
      ->needs(train_path);
  app.add_flag("--mock-data", o.mock_data, "deterministic random tokens instead of a dataset");
  app.add_option("--split", o.split, "train,valid,test shares of the documents")->capture_default_str();
  train_path->excludes("--mock-data")->excludes("--split");
  // Megatron's for blends too long for a command line: --data-path's words, or each split's, from a file.
  std::string data_args_path, per_split_args_path;
  app.add_option("--data-args-path", data_args_path,
                 "Megatron's: a file holding --data-path's words (a prefix, or a blend 'W1 P1 W2 P2 ...')")
      ->excludes(data_path)->excludes(train_path)->excludes("--mock-data");
  app.add_option("--per-split-data-args-path", per_split_args_path,
                 "Megatron's: a JSON file {\"train\": ..., \"valid\": ..., \"test\": ...}, each a list of words or "
                 "one string of them: --train-data-path's and --valid-data-path's (test's is not read)")
      ->excludes(data_path)->excludes(train_path)->excludes("--valid-data-path")->excludes("--mock-data")
      ->excludes("--split")->excludes("--data-args-path");
  app.add_option("--data-cache-path", o.data_cache_path,
                 "directory for the sample index: built once (by each node's first rank), mapped by the node's ranks");
  app.add_option("--save", o.save, "checkpoint directory");
  CLI::Option* load = app.add_option("--load", o.load, "checkpoint directory or file to resume from (a directory "
                                                        "without one: start fresh), or weights (FILE.safetensors: "
                                                        "--export's or Hugging Face GPT-2/Llama; with --finetune or "
                                                        "--skip-train)");
  app.add_flag("--finetune", o.finetune,
               "take only the parameters from --load: step, data position, optimizer and random state start afresh "
               "(where --save holds a checkpoint already, a requeued job, that one resumes in full)")->needs(load);
  CLI::Option* pretrained =
      app.add_option("--pretrained-checkpoint", o.pretrained_checkpoint,
                     "Megatron's: where --load holds no checkpoint (or is not given), fine-tune from this one, as "
                     "--finetune --load would: a job's first run, whose requeues resume its own");
  CLI::Option* ckpt_step =
      app.add_option("--ckpt-step", o.ckpt_step,
                     "Megatron's: load this step's checkpoint of --load's directory instead of the newest (with "
                     "--pretrained-checkpoint, of that one's: the run's own in --load resume from their newest)")
          ->check(CLI::NonNegativeNumber);
  app.add_flag("--exit-on-missing-checkpoint", o.exit_on_missing_checkpoint,
               "a --load that holds no checkpoint ends the run, exit 1, instead of training from scratch "
               "(Megatron's)")->needs(load);
  // Megatron's: with --finetune (which loads neither) its scripts often pass them again; alone, a resume without them.
  app.add_flag("--no-load-optim", o.no_load_optim,
               "Megatron's: resume --load's step, data position and schedule with AdamW's moments at zero (its bias "
               "correction from its first step again); with --finetune, what it does anyway");
  app.add_flag("--no-load-rng", o.no_load_rng,
               "Megatron's: resume without --load's random state (which only drew the initial parameters: dropout's "
               "masks are a function of --seed, the step and the sample); with --finetune, what it does anyway");
  app.add_flag("--no-save-optim", o.no_save_optim,
               "Megatron's: --save's checkpoints hold the parameters without AdamW's moments (a third of the bytes); "
               "a run resumes from one only with --no-load-optim or --finetune");
  app.add_flag("--no-save-rng", o.no_save_rng,
               "Megatron's: --save's checkpoints hold no random state (a run resumed from one draws from --seed, "
               "as with --no-load-rng)");
  bool checkpoint_args = false;
  CLI::Option* use_checkpoint_args =
      app.add_flag("--use-checkpoint-args", checkpoint_args,
                   "the model as --load's checkpoint was saved with (or --pretrained-checkpoint's, where --load "
                   "holds none), instead of --preset and the size flags (Megatron's)");
  app.add_flag("--skip-train", o.skip_train,
               "train no step: the validation loss (--eval-iters) of --load's parameters, then --export, "
               "--export-hf and --sample; nothing is saved (Megatron's)");
  CLI::Option* keep = app.add_option("--keep-checkpoints", o.keep_checkpoints,
                                     "keep the newest N complete checkpoints, deleting older ones (0: keep all)")
                          ->capture_default_str();
  app.add_option("--save-retain-interval", o.save_retain_interval,
                 "Megatron's: keep the checkpoints of the steps that are multiples of N (a multiple of "
                 "--save-interval) and the newest, deleting the others as the run saves")
      ->excludes(keep);
  app.add_option("--save-interval", o.save_interval, "steps between checkpoints (0: at the end only)")->capture_default_str();
  std::string non_persistent_type, non_persistent_global_dir;
  CLI::Option* non_persistent_interval =
      app.add_option("--non-persistent-save-interval", o.non_persistent_save_interval,
                     "Megatron's: steps between non-persistent checkpoints, of which only the newest is kept "
                     "(with --non-persistent-ckpt-type global)")
          ->check(CLI::PositiveNumber);
  app.add_option("--non-persistent-ckpt-type", non_persistent_type,
                 "Megatron's: global (checkpoints like the others, in --non-persistent-global-ckpt-dir); a resume "
                 "takes the newest of them and --load's")
      ->check(CLI::IsMember({"global", "local", "in_memory"}));
  app.add_option("--non-persistent-global-ckpt-dir", non_persistent_global_dir,
                 "Megatron's: where the non-persistent checkpoints go (default: --save/non_persistent; on a resume, "
                 "--load/non_persistent)");
  app.add_option("--log-interval", o.log_interval, "steps between log lines")->capture_default_str();
  app.add_option("--eval-interval", o.eval_interval, "steps between validation runs (0: none)")
      ->capture_default_str()->check(srunway::common::NonNegative());
  app.add_option("--eval-iters", o.eval_iters, "micro-batches per validation run")->capture_default_str();
  app.add_option("--metrics-file", o.metrics_file, "append one JSON object per log step");
  // Megatron's TensorBoard flags; as in Megatron, those that say what to write change nothing without the directory.
  app.add_option("--tensorboard-dir", o.tensorboard_dir,
                 "write TensorBoard event files here (rank 0): Megatron's scalars under its tags (lm loss, "
                 "learning-rate, grad-norm, batch-size, each also vs samples; lm loss validation)");
  app.add_option("--tensorboard-log-interval", o.tensorboard_log_interval, "steps between TensorBoard's scalars")
      ->capture_default_str()->check(CLI::PositiveNumber);
  const std::string unqueued = "Megatron's: taken (each event is written to the file as it comes, nothing is queued)";
  app.add_option("--tensorboard-queue-size", unqueued)->check(CLI::PositiveNumber);
  const std::string always = "Megatron's: taken (batch-size is always written)";
  app.add_flag("--log-batch-size-to-tensorboard", always);
  bool no_learning_rate = false;
  app.add_flag("--no-log-learning-rate-to-tensorboard", no_learning_rate,
               "Megatron's: TensorBoard without learning-rate (and its vs samples)");
  const std::string no_loss_scale = "Megatron's: taken (no loss scale to write: bf16, not fp16 with loss scaling)";
  app.add_flag("--no-log-loss-scale-to-tensorboard", no_loss_scale);
  app.add_option("--timing-log-level", o.timing_log_level,
                 "Megatron's: 1 prints, at each log step, the (min, max) over the ranks of each step's "
                 "forward-backward, all-grads-sync and optimizer ms (the device drained at each one's end); 2 also "
                 "batch-generator, forward-compute, backward-compute, optimizer-clip-main-grad and "
                 "optimizer-inner-step; 0 none")
      ->capture_default_str()->check(CLI::Range(0, 2));
  app.add_option("--timing-log-option", o.timing_log_option,
                 "Megatron's: --timing-log-level's timers as (min, max) over the ranks (minmax), the max alone "
                 "(max), or every rank's (all)")
      ->capture_default_str()->check(CLI::IsMember({"max", "minmax", "all"}));
  for (const auto& [flag, target, help] : std::initializer_list<std::tuple<const char*, bool*, const char*>>{
           {"--log-memory-to-tensorboard", &o.log_memory_to_tensorboard,
            "TensorBoard: mem-allocated-bytes, mem-max-allocated-bytes and mem-allocated-count of the device "
            "(Megatron's; no mem-reserved-bytes: no caching allocator holds more)"},
           {"--log-params-norm", &o.log_params_norm,
            "the L2 norm of the parameters on each log line, in --metrics-file (params_norm) and TensorBoard "
            "(params-norm) (Megatron's)"},
           {"--log-num-zeros-in-grad", &o.log_num_zeros_in_grad,
            "how many of the step's reduced gradients are zero, on each log line, in --metrics-file (num_zeros) and "
            "TensorBoard (num-zeros) (Megatron's)"},
           {"--log-world-size-to-tensorboard", &o.log_world_size_to_tensorboard,
            "TensorBoard: world-size, the number of ranks"},
           {"--log-timers-to-tensorboard", &o.log_timers_to_tensorboard,
            "TensorBoard: iteration-time (s) at each log step, throughput with --log-throughput, and "
            "--timing-log-level's timers (NAME-time, the slowest rank's, s)"},
           {"--log-throughput", &o.log_throughput,
            "TFLOP/s per GPU on each log line, and in TensorBoard (throughput) with --log-timers-to-tensorboard "
            "(Megatron's)"},
           {"--log-progress", &o.log_progress,
            "append to --save's progress.txt \"Starting job\" at the start and, after each checkpoint, the job's "
            "and the cumulative throughput (TFLOP/s/GPU), the floating-point operations and the tokens so far "
            "(Megatron's)"},
           {"--log-validation-ppl-to-tensorboard", &o.log_validation_ppl_to_tensorboard,
            "TensorBoard: lm loss validation ppl, exp of the validation loss (at most exp 20, as Megatron's)"}}) {
    app.add_flag(flag, *target, help);
  }
  app.add_option("--export", o.export_safetensors, "after training, write the weights as safetensors to this file");
  CLI::Option* export_hf = app.add_option("--export-hf", o.export_hf,
                                           "after training, write DIR/model.safetensors and DIR/config.json in "
                                           "Hugging Face's form (transformers' from_pretrained(DIR))");
  app.add_option("--export-hf-max-shard-gb", o.export_hf_max_shard_gb,
                 "--export-hf's largest file in GB (10^9 bytes), save_pretrained's max_shard_size: a larger model "
                 "is written as model-0000K-of-0000N.safetensors files and model.safetensors.index.json")
      ->capture_default_str()->check(CLI::Range(1e-6, 1e6))->needs(export_hf);
  std::string export_dtype = "fp32";
  CLI::Option* export_dtype_option =
      app.add_option("--export-dtype", export_dtype,
                     "how --export and --export-hf store the weights (rounded to the nearest; bf16 and fp16 take "
                     "half the bytes)")
          ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))->capture_default_str();
  // The options of --sample and of --dry-run are refused without them rather than taken and ignored.
  CLI::Option* sample = app.add_option("--sample", o.sample_tokens, "after training, generate N tokens and print them");
  app.add_option("--sample-top-k", o.sample_top_k, "1: greedy")->capture_default_str()->needs(sample);
  app.add_option("--sample-prompt", o.sample_prompt, "text to continue (default: start of a document)")->needs(sample);
  // Megatron's flags for the data's tokenizer: checked at the start, and --sample's and --export-hf's.
  CLI::Option* vocab_file = app.add_option(
      "--vocab-file", o.vocab_file,
      "GPT-2 BPE vocab.json of the data's tokenizer, which the model's vocabulary must hold; for --sample and "
      "--export-hf (default: beside the first --data-path)");
  app.add_option("--merge-file", o.merge_file, "its merges.txt")->needs(vocab_file);
  vocab_file->needs("--merge-file");
  app.add_option("--tokenizer-model", o.tokenizer_model,
                 "a Hugging Face tokenizer.json of BPE (byte-level: Llama 3's, Qwen2's, Qwen3's; SentencePiece-style: "
                 "Llama 2's, Mistral's) or a SentencePiece BPE model (Llama 2's tokenizer.model), or the model "
                 "directory holding it, instead of --vocab-file (default: PREFIX.tokenizer.json or "
                 "PREFIX.tokenizer.model beside the first --data-path, where srunway-prep put it)")
      ->excludes(vocab_file);
  std::string tokenizer_type;
  app.add_option("--tokenizer-type", tokenizer_type,
                 "Megatron's: GPT2BPETokenizer (GPT-2's byte-level BPE, --vocab-file and --merge-file), "
                 "HuggingFaceTokenizer, Llama2Tokenizer or GPTSentencePieceTokenizer (--tokenizer-model) or "
                 "NullTokenizer (with --vocab-size N: data of token ids "
                 "below N, N the end of document; the model's vocabulary N + 1, padded)");
  int vocab_multiple = 128;
  CLI::Option* vocab_multiple_option =
      app.add_option("--make-vocab-size-divisible-by", vocab_multiple,
                     "Megatron's: with --vocab-file and neither --preset nor --vocab-size, or NullTokenizer, the "
                     "vocabulary is the tokenizer's padded to a multiple of this")
          ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--device", o.device,
                 "auto: the rank's GPU where there is one, else the CPU (with a line saying why); cuda: the GPU or "
                 "exit 1; cpu")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--peak-tflops", o.peak_tflops,
                 "TFLOP/s that MFU is against (default: the GPU's dense bf16 peak, or the CPU's measured sgemm rate)")
      ->check(srunway::common::Positive());
  app.add_flag("--overfit-batch", o.overfit_batch, "train on the first batch every step (debugging)");
  app.add_flag("--eod-mask-loss", o.eod_mask_loss,
               "Megatron's: no loss where the input token is the tokenizer's end of document (predicting the next "
               "document's first token); the mean over the other positions");
  app.add_flag("--calculate-per-token-loss", o.per_token_loss,
               "Megatron's: the step's loss is the mean over all its positions with a loss, on every rank, instead "
               "of the mean of its micro-batches' means (they differ where --eod-mask-loss scores micro-batches "
               "unevenly); validation's likewise");
  app.add_flag("--reset-position-ids", o.reset_position_ids,
               "Megatron's: a sample's documents each start again at position 0 (after each end-of-document token "
               "of the tokenizer), for the position embeddings and RoPE");
  app.add_flag("--reset-attention-mask", o.reset_attention_mask,
               "Megatron's: each token of a sample attends to its own document's tokens only (documents end after "
               "each end-of-document token)");
  app.add_option("--threads", o.threads,
                 "CPU threads (default: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the task's CPUs)")
      ->check(CLI::Range(1, srunway::trainer::kMaxThreads));
  int64_t ddp_bucket_size = 0;
  CLI::Option* ddp_bucket = app.add_option("--ddp-bucket-size", ddp_bucket_size,
                                           "Megatron's: the gradient buckets in parameters (fp32: 4 bytes each), "
                                           "--bucket-size-mb in its units")
                                ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  int64_t ddp_num_buckets = 0;
  CLI::Option* ddp_buckets = app.add_option("--ddp-num-buckets", ddp_num_buckets,
                                            "Megatron's: the gradients in about this many buckets (the model's "
                                            "parameters / N each)")
                                 ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))->excludes(ddp_bucket);
  app.add_option("--bucket-size-mb", o.bucket_size_mb, "data parallel: gradient all-reduce bucket size")
      ->excludes(ddp_bucket)->excludes(ddp_buckets)
      ->capture_default_str();
  bool no_overlap = false;
  app.add_flag("--no-overlap-grad-reduce", no_overlap,
               "data parallel: reduce gradients after the backward instead of during it");
  app.add_option("--distributed-timeout-minutes", o.distributed_timeout_min,
                 "start-up and each collective (NCCL on GPUs, MPI between CPU ranks) may take this long before the run "
                 "ends with an error")
      ->capture_default_str()->check(srunway::common::Positive());
  // Megatron's parallelism and precision flags, as its scripts pass them: what srunway-train does is taken, the
  // rest refused by name, so that a pasted script does not train something other than it says.
  int tensor_parallel = 1, pipeline_parallel = 1, context_parallel = 1;
  bool fp16 = false;
  const std::string whole_model = "1 only (Megatron's): every rank holds the whole model";
  // --model-parallel-size: Megatron's name for it before pipelines (2020), which older published scripts still give.
  app.add_option("--tensor-model-parallel-size,--model-parallel-size", tensor_parallel, whole_model)
      ->capture_default_str();
  app.add_option("--pipeline-model-parallel-size", pipeline_parallel, whole_model)->capture_default_str();
  app.add_option("--context-parallel-size", context_parallel, whole_model)->capture_default_str();
  app.add_flag("--bf16", o.bf16,
               "Megatron's: bf16 with fp32 master weights and optimizer state, what a GPU run does anyway (the CPU "
               "path computes in fp32)");
  app.add_flag("--fp16", fp16, "Megatron's: refused (no fp16 with loss scaling; --bf16 is what there is)");
  // Megatron's FP8 training (Transformer Engine's recipes), which srunway-train has not: each refused by name.
  std::vector<std::pair<CLI::Option*, std::string>> fp8;
  const std::string no_fp8 = "Megatron's: refused (no FP8 training: the GEMMs are bf16, --bf16)";
  for (const char* flag : {"--fp8-format", "--fp8-recipe", "--fp8-margin", "--fp8-interval", "--fp8-amax-history-len",
                           "--fp8-amax-compute-algo"}) {
    fp8.emplace_back(app.add_option(flag, no_fp8), flag);
  }
  for (const char* flag : {"--fp8-param-gather", "--fp8-dot-product-attention", "--fp8-multi-head-attention",
                           "--no-fp8-wgrad", "--first-last-layers-bf16"}) {
    fp8.emplace_back(app.add_flag(flag, no_fp8), flag);
  }
  app.add_flag("--grad-reduce-in-bf16", o.grad_reduce_bf16,
               "Megatron's: the data-parallel reduction sums the gradients in bf16 (half the bytes); they are "
               "accumulated over micro-batches in fp32 as ever");
  app.add_flag("--disable-bf16-reduced-precision-matmul", o.fp32_split_k_sums,
               "Megatron's: the GEMMs that write bf16 add split-K partial sums in fp32 only (cuBLASLt's reduction "
               "schemes), not in bf16 (PyTorch's allow_bf16_reduced_precision_reduction = False); the CPU path sums "
               "in fp32 throughout");
  app.add_flag("--deterministic-mode", o.deterministic_mode,
               "Megatron's: the same bits on every run, which the CPU path gives; refused on GPUs (their backward "
               "adds with atomics)");
  // Megatron's checkpoint formats: srunway-train writes its own, sharded as torch_dist's are and, like them, loaded on
  // any number of ranks, so a script's choice among Megatron's is taken with a line saying what is written instead.
  std::string ckpt_format;
  CLI::Option* ckpt_format_option =
      app.add_option("--ckpt-format,--dist-ckpt-format", ckpt_format,
                     "Megatron's: taken with a line (srunway-train writes its own checkpoints, one shard per rank, "
                     "loaded on any number of ranks; Megatron does not read them)")
          ->check(CLI::IsMember({"torch_dist", "torch", "torch_dcp", "zarr", "fsdp_dtensor"}));
  const std::string dist_ckpt = "Megatron's --ckpt-format torch_dist of before: taken, as --ckpt-format";
  CLI::Option* use_dist_ckpt = app.add_flag("--use-dist-ckpt", dist_ckpt);
  // Megatron's flags for what srunway-train does otherwise, refused with what it does instead.
  std::vector<std::pair<CLI::Option*, std::string>> wandb;
  for (const char* flag : {"--wandb-project", "--wandb-exp-name", "--wandb-save-dir", "--wandb-entity"}) {
    wandb.emplace_back(app.add_option(flag, "Megatron's: refused (no Weights & Biases client; --tensorboard-dir)"),
                       flag);
  }
  // Megatron's choices among implementations that compute the same model: srunway-train has one, which makes the
  // choice each names (or, with one rank per model, one that changes nothing), so they are taken as its scripts
  // pass them. The fusions of kernels change the order of rounding, not the model.
  const std::string fusion = "Megatron's: taken (a kernel fusion on or off computes the same model)";
  const std::string parallel_checkpoint =
      "Megatron's: taken (how its distributed checkpoints spread over the ranks; srunway-train's each rank writes "
      "its own shard of, and any number of ranks loads)";
  auto taken_flag = [&app](const char* flag, const std::string& help) { return app.add_flag(flag, help); };
  auto taken_option = [&app](const char* flag, const std::string& help) { return app.add_option(flag, help); };
  for (const auto& [flag, what] : std::initializer_list<std::pair<const char*, std::string>>{
           {"--use-mcore-models", "Megatron's: taken (one implementation of the model)"},
           {"--use-flash-attn", "Megatron's: taken (on GPUs attention is cuDNN's fused flash attention)"},
           {"--attention-softmax-in-fp32", "Megatron's: taken (attention's softmax is computed in fp32)"},
           {"--accumulate-allreduce-grads-in-fp32",
            "Megatron's: taken (gradients are accumulated and reduced in fp32)"},
           {"--sequence-parallel",
            "Megatron's: taken (it splits tensor-parallel activations; with a tensor-parallel size of 1 there are "
            "none, and Megatron turns it off too)"},
           {"--openai-gelu", "Megatron's: taken (the GPT's GELU in the tanh form, its default, and beside "
                             "--no-bias-gelu-fusion too)"},
           {"--log-straggler",
            "Megatron's: taken (stragglers are watched unless --disable-straggler-on-startup: --straggler-threshold, "
            "--straggler-window, --straggler-minmax-count, and the metrics' slowest_rank)"},
           {"--tp-comm-overlap",
            "Megatron's: taken (it overlaps tensor-parallel communication with GEMMs, of which a tensor-parallel "
            "size of 1 has none)"},
           {"--no-masked-softmax-fusion", fusion},
           {"--no-bias-dropout-fusion", fusion},
           {"--no-bias-swiglu-fusion", fusion},
           {"--no-gradient-accumulation-fusion", fusion},
           {"--no-persist-layer-norm", fusion},
           {"--no-rope-fusion", fusion},
           {"--no-async-tensor-model-parallel-allreduce",
            "Megatron's: taken (it overlaps tensor-parallel all-reduces, of which a tensor-parallel size of 1 has "
            "none)"},
           {"--apply-query-key-layer-scaling",
            "Megatron's: taken (it divides attention's scores by the layer number and its softmax multiplies them "
            "back, for fp16's range: the same model)"},
           {"--manual-gc", "Megatron's: taken (it times Python's garbage collector; srunway-train has none)"},
           {"--no-manual-gc-eval", "Megatron's: taken (Python's garbage collector; srunway-train has none)"},
           {"--use-legacy-models", "Megatron's: taken (one implementation of the model)"},
           {"--legacy-tokenizer", "Megatron's: taken (one implementation of GPT-2's tokenizer)"},
           {"--cross-entropy-loss-fusion", fusion},
           {"--ddp-average-in-collective",
            "Megatron's: taken (the gradients' mean over the ranks, whether divided before the sum or in it)"},
           {"--check-for-nan-in-loss-and-grad",
            "Megatron's: taken (a loss or gradient norm that is not finite always ends the run, exit 3)"},
           {"--no-check-for-nan-in-loss-and-grad",
            "Megatron's: taken, and the check stays (a loss or gradient norm that is not finite ends the run, exit "
            "3, where Megatron would train on)"},
           {"--async-save",
            "Megatron's: taken (every rank writes its shard of a save before the next step: the same checkpoint, "
            "written in the run's time instead of beside it)"},
           {"--ckpt-fully-parallel-save", parallel_checkpoint},
           {"--no-ckpt-fully-parallel-save", parallel_checkpoint},
           {"--ckpt-fully-parallel-load", parallel_checkpoint},
           {"--ckpt-assume-constant-structure", parallel_checkpoint},
           {"--auto-detect-ckpt-format",
            "Megatron's: taken (what --load holds, a checkpoint, its shards or weights alone, is always found out)"},
           {"--override-opt_param-scheduler,--override-opt-param-scheduler",
            "Megatron's: taken (the learning-rate schedule comes from the flags, not from --load, unless "
            "--use-checkpoint-opt_param-scheduler)"},
           {"--use-cpu-initialization",
            "Megatron's: taken (the initial parameters are drawn on the host and then copied to the device)"},
           {"--no-barrier-with-level-1-timing",
            "Megatron's: taken (--timing-log-level's timers are each rank's own, and start without a barrier)"},
           {"--mmap-bin-files", "Megatron's: taken (the same tokens, whichever way the .bin is read)"},
           // Megatron's flags of 2020-2022 that its published scripts of then give (Megatron has since dropped or
           // renamed them): the same choices among implementations.
           {"--override-lr-scheduler", "Megatron's older --override-opt_param-scheduler: taken"},
           {"--use-contiguous-buffers-in-local-ddp",
            "Megatron's, of before 2023: taken (the gradients live in one flat buffer)"},
           {"--no-query-key-layer-scaling",
            "Megatron's, of before 2023: taken (no scaling of attention's scores by the layer number, as "
            "Megatron's default now)"},
           {"--async-tensor-model-parallel-allreduce",
            "Megatron's, of before 2023: taken (tensor-parallel all-reduces, of which a tensor-parallel size of 1 "
            "has none)"},
           {"--distribute-checkpointed-activations",
            "Megatron's, of before 2022: taken (it spreads recomputed activations over tensor-parallel ranks, of "
            "which a size of 1 has one)"},
           {"--distribute-saved-activations",
            "Megatron's: taken (it spreads recomputed activations over tensor-parallel ranks, of which a size of 1 "
            "has one)"},
           {"--no-scaled-masked-softmax-fusion", fusion},
           {"--scaled-upper-triang-masked-softmax-fusion", fusion}}) {
    taken_flag(flag, what);
  }
  app.add_flag("--use-checkpoint-opt_param-scheduler,--use-checkpoint-opt-param-scheduler,"
               "--use-checkpoint-lr-scheduler", o.use_checkpoint_schedule,
               "Megatron's (--use-checkpoint-lr-scheduler its older name): the learning-rate and weight-decay "
               "schedule of the checkpoint resumed, not the flags'")
      ->excludes("--override-opt_param-scheduler")->excludes("--override-lr-scheduler");
  taken_option("--data-impl",
               "Megatron's, of before 2023: mmap or infer (the .bin and .idx of Megatron's indexed datasets, read "
               "through mmap; its older lazy and cached layouts are refused)")
      ->check(CLI::IsMember({"mmap", "infer"}));
  taken_option("--DDP-impl",
               "Megatron's, of before 2023: local or torch (srunway-train's own bucketed reduction, the same sums)")
      ->check(CLI::IsMember({"local", "torch"}));
  taken_option("--manual-gc-interval", "Megatron's: taken (Python's garbage collector; srunway-train has none)")
      ->check(srunway::common::NonNegative());
  taken_option("--transformer-impl", "Megatron's: taken (one implementation of the model)")
      ->check(CLI::IsMember({"transformer_engine", "local"}));
  taken_option("--attention-backend", "Megatron's: taken (on GPUs attention is cuDNN's fused flash attention)")
      ->check(CLI::IsMember({"auto", "flash", "fused", "unfused", "local"}));
  taken_option("--distributed-backend",
               "Megatron's: taken (collectives run over NCCL between GPUs and over MPI between CPU ranks)")
      ->check(CLI::IsMember({"nccl", "gloo"}));
  taken_option("--num-workers", "Megatron's: taken (samples are read from the mapped index in the training process)")
      ->check(srunway::common::NonNegative());
  taken_flag("--no-mmap-bin-files", "Megatron's: taken (the same tokens, whichever way the .bin is read)");
  // Megatron's flags for what a model on every rank, in one piece, has none of (pipeline stages, tensor-parallel
  // regions) or for how its collectives and kernels are scheduled: taken, changing nothing.
  const std::string no_pipeline = "Megatron's: taken (it schedules pipeline stages, of which srunway-train has none)";
  for (const char* flag : {"--defer-embedding-wgrad-compute", "--no-align-grad-reduce", "--no-align-param-gather",
                           "--overlap-param-gather-with-optimizer-step", "--no-scatter-gather-tensors-in-pipeline"}) {
    taken_flag(flag, no_pipeline);
  }
  taken_option("--wgrad-deferral-limit", no_pipeline)->check(srunway::common::NonNegative());
  taken_flag("--clone-scatter-output-in-embedding",
             "Megatron's: taken (sequence-parallel activations, of which a tensor-parallel size of 1 has none)");
  const std::string no_tensor_parallel =
      "Megatron's: taken (tensor-parallel communication, of which a tensor-parallel size of 1 has none)";
  taken_option("--tp-comm-overlap-cfg", no_tensor_parallel);
  for (const char* flag : {"--disable-tp-comm-overlap-ag", "--disable-tp-comm-overlap-rs", "--tp-comm-overlap-rs-dgrad",
                           "--disable-tp-comm-bulk-dgrad", "--disable-tp-comm-bulk-wgrad",
                           "--disable-tp-comm-split-ag", "--disable-tp-comm-split-rs"}) {
    taken_flag(flag, no_tensor_parallel);
  }
  taken_option("--tp-comm-bootstrap-backend", no_tensor_parallel)->check(CLI::IsMember({"nccl", "mpi", "gloo"}));
  taken_option("--cp-comm-type", "Megatron's: taken (context-parallel communication, of which a size of 1 has none)")
      ->check(CLI::IsMember({"p2p", "a2a", "allgather", "a2a+p2p"}))->expected(1, -1)->allow_extra_args();
  taken_flag("--enable-gloo-process-groups",
             "Megatron's: taken (collectives run over NCCL between GPUs and over MPI between CPU ranks)");
  taken_flag("--ddp-pad-buckets-for-high-nccl-busbw",
             "Megatron's: taken (it pads buckets for NCCL's bandwidth: the same sums)");
  taken_option("--num-distributed-optimizer-instances",
               "Megatron's: 1 only (one ZeRO-1 shard set over all data-parallel ranks)")
      ->check(CLI::Range(1, 1));
  taken_option("--train-sync-interval",
               "Megatron's: taken (srunway-train waits for the device only where a number is needed)")
      ->check(CLI::PositiveNumber);
  taken_option("--cross-entropy-fusion-impl", fusion)->check(CLI::IsMember({"native", "te"}));
  taken_option("--local-rank",
               "torch.distributed.launch's: taken (each rank's identity comes from srunway-launch, torchrun's "
               "environment or Slurm's)")
      ->check(srunway::common::NonNegative());
  taken_option("--dist-ckpt-strictness",
               "Megatron's: taken (it says what to do with keys a distributed checkpoint holds or lacks; "
               "srunway-train's checkpoints hold the keys it reads, and another layout is an error)");
  const std::string tiktoken = "Megatron's: taken (TikTokenizer's; the tokenizers srunway-train reads carry their own)";
  taken_option("--tiktoken-num-special-tokens", tiktoken)->check(srunway::common::NonNegative());
  taken_option("--tiktoken-special-tokens", tiktoken)->expected(0, -1)->allow_extra_args();
  taken_option("--sgd-momentum", "Megatron's: taken (SGD's momentum; --optimizer sgd is refused)")
      ->check(srunway::common::NonNegative());
  taken_flag("--disable-msc", "Megatron's: taken (no multi-storage client: files are read where they are)");
  taken_flag("--use-mp-args-from-checkpoint-args",
             "Megatron's: taken (the parallel sizes to copy from a checkpoint are 1, as every run's here)");
  const std::string rng_tracker =
      "Megatron's: taken (dropout's masks are srunway-train's own, a function of --seed, the step and the sample)";
  taken_flag("--te-rng-tracker", rng_tracker);
  taken_flag("--inference-rng-tracker", rng_tracker);
  const std::string no_graphs = "Megatron's: taken (no CUDA graphs: each step launches its kernels, the same step)";
  taken_flag("--enable-cuda-graph", no_graphs);
  taken_flag("--external-cuda-graph", no_graphs);
  taken_option("--cuda-graph-warmup-steps", no_graphs)->check(srunway::common::NonNegative());
  taken_option("--num-dataset-builder-threads",
               "Megatron's: taken (each node's first rank builds the sample index, on one thread)")
      ->check(CLI::PositiveNumber);
  taken_option("--tiktoken-pattern",
               "Megatron's: taken (TikTokenizer's split pattern; the tokenizers srunway-train reads carry their own)")
      ->check(CLI::IsMember({"v1", "v2"}));
  taken_option("--empty-unused-memory-level",
               "Megatron's: taken (it empties PyTorch's allocator cache; srunway-train allocates once, at start-up)")
      ->check(CLI::Range(0, 2));
  for (const char* flag : {"--main-grads-dtype", "--main-params-dtype", "--exp-avg-dtype", "--exp-avg-sq-dtype"}) {
    taken_option(flag, "Megatron's: fp32 only (the gradients, master weights and AdamW's moments are fp32)")
        ->check(CLI::IsMember({"fp32"}));
  }
  // fp16's loss scaling, which bf16 needs none of: Megatron scales the loss dynamically only with --fp16 (refused
  // here), and a constant --loss-scale multiplies the loss and divides the gradients back: the same step, but for
  // rounding.
  for (const char* flag : {"--loss-scale", "--initial-loss-scale", "--min-loss-scale", "--loss-scale-window",
                           "--hysteresis"}) {
    taken_option(flag, "Megatron's: taken (fp16's loss scaling: bf16 needs none, and --fp16 is refused)")
        ->check(srunway::common::Positive());
  }
  taken_option("--cuda-graph-impl", no_graphs)->check(CLI::IsMember({"none", "local", "transformer_engine"}));
  taken_option("--cuda-graph-scope", no_graphs)->expected(1, -1)->allow_extra_args();
  taken_option("--cuda-graph-modules", no_graphs)->expected(1, -1)->allow_extra_args();
  taken_option("--high-priority-stream-groups",
               "Megatron's: taken (its process groups' NCCL stream priorities; srunway-train's data-parallel "
               "collectives run on a stream of their own)")->expected(1, -1)->allow_extra_args();
  const std::string async_save =
      "Megatron's: taken, as --async-save (every rank writes its shard of a save before the next step)";
  taken_flag("--use-persistent-ckpt-worker", async_save);
  taken_option("--async-strategy", async_save)->check(CLI::IsMember({"nvrx", "mcore"}));
  taken_flag("--dist-ckpt-save-pre-mcore-014", parallel_checkpoint);
  taken_flag("--disable-gloo-process-groups",
             "Megatron's: taken (collectives run over NCCL between GPUs and over MPI between CPU ranks)");
  taken_option("--log-memory-interval",
               "Megatron's: taken (each log line's metrics carry the peak memory, peak_memory_gib; "
               "--log-memory-to-tensorboard writes the allocator's counts)")->check(CLI::PositiveNumber);
  taken_option("--result-rejected-tracker-filename",
               "Megatron's: taken (the rerun machine's record of rejected results: srunway-train has none, and a "
               "loss or gradient norm that is not finite ends the run, exit 3)");
  taken_flag("--use-precision-aware-optimizer",
             "Megatron's: taken (Transformer Engine's AdamW keeping the state in the dtypes given, fp32 here: the same "
             "update)");
  taken_flag("--delay-wgrad-compute",
             "Megatron's: taken (it delays weight gradients to overlap expert-parallel communication, of which "
             "srunway-train has none)");
  taken_flag("--no-use-tokenizer-model-from-checkpoint-args",
             "Megatron's: taken (srunway-train's checkpoints keep no tokenizer: it reads --tokenizer-model, or the "
             "files beside the data)");
  taken_flag("--use-nccl-ub",
             "Megatron's: taken (NCCL's user-buffer registration for the data-parallel collectives: the same sums)");
  taken_flag("--use-sharp",
             "Megatron's: taken (SHARP's in-network reductions are NCCL's to use, with NCCL_COLLNET_ENABLE=1 where the "
             "fabric has them: the same sums)");
  taken_flag("--no-initialization",
             "Megatron's: taken (the initial parameters are drawn in moments, and a checkpoint loaded replaces them)");
  // NVIDIA's one-logger, its internal telemetry, which Megatron skips where it is not installed.
  taken_flag("--no-one-logger", "Megatron's: taken (srunway-train sends no telemetry)");
  taken_flag("--one-logger-async", "Megatron's: taken (srunway-train sends no telemetry)");
  for (const char* flag : {"--one-logger-project", "--one-logger-run-name", "--app-tag-run-name",
                           "--app-tag-run-version"}) {
    taken_option(flag, "Megatron's: taken (srunway-train sends no telemetry)");
  }
  std::string rerun_mode;
  app.add_option("--rerun-mode", rerun_mode,
                 "Megatron's: disabled, or validate_results (its default): a loss or gradient norm that is not "
                 "finite ends the run (exit 3), without Megatron's rerun of the step to tell a transient fault from "
                 "a reproducible one; report_stats is refused")
      ->check(CLI::IsMember({"disabled", "validate_results", "report_stats"}));
  bool fp32_residual = false;
  app.add_flag("--fp32-residual-connection", fp32_residual,
               "Megatron's: the residual stream in fp32, as on CPUs (--device cpu); refused on GPUs, whose residual "
               "stream is bf16");
  int logging_level = -1;
  app.add_option("--logging-level", logging_level,
                 "Megatron's: Python's logging levels: 40 and above errors only, 30 warnings too, 20 info lines too "
                 "(the default), below 20 debug lines too (as SRUNWAY_LOG=error|warning|info|debug)")
      ->check(CLI::Range(0, 100));
  taken_flag("--exit-signal-handler",
             "Megatron's: taken (SIGTERM, SIGINT and SIGUSR1 always end the run after its step, saved with --save, "
             "exit 4)");
  taken_option("--dataloader-type", "Megatron's: single only (the samples in order, resuming where they stopped)")
      ->check(CLI::IsMember({"single"}));
  taken_option("--optimizer", "Megatron's: adam only (AdamW: Adam with decoupled weight decay, as Megatron's adam)")
      ->check(CLI::IsMember({"adam"}));
  bool no_attention_mask = false;
  app.add_flag("--no-create-attention-mask-in-dataloader", no_attention_mask,
               "Megatron's: taken (attention is causal by its kernels; with --reset-attention-mask, refused, as "
               "Megatron then masks no documents)");
  int kv_channels = 0;
  app.add_option("--kv-channels", kv_channels,
                 "Megatron's: each head's width (default --hidden-size / --num-attention-heads); the attention's width "
                 "is that times the heads")
      ->check(CLI::PositiveNumber);
  double rotary_percent = 1.0;
  CLI::Option* rotary_percent_option = app.add_option(
      "--rotary-percent", rotary_percent,
      "Megatron's: RoPE turns the first int(head size x P) of each head's dimensions, the rest pass as they are (a "
      "Llama; default 1: the whole head)");
  taken_flag("--overlap-grad-reduce",
             "Megatron's: taken (what srunway-train does unless --no-overlap-grad-reduce)")
      ->excludes("--no-overlap-grad-reduce");
  bool exact_gelu = false;
  app.add_flag("--no-bias-gelu-fusion", exact_gelu,
               "Megatron's: a GPT's GELU exact (erf's), as Megatron's unfused MLP computes it (its fused bias-GELU, "
               "the default, and --openai-gelu compute the tanh form); a Llama's FFN has no GELU");
  bool dry_run = false, distributed_optimizer = false, recompute = false;
  srunway::trainer::PlanInput plan;
  CLI::Option* dry_run_flag = app.add_flag("--dry-run", dry_run,
               "print parameters, FLOPs per token, memory per GPU and the expected speed for --nodes x "
               "--gpus-per-node GPUs, and exit (0 if it fits --gpu-memory-gb, 1 if not)");
  // Bounded so that their product (the GPUs) stays inside an int.
  app.add_option("--nodes", plan.nodes, "--dry-run: nodes")->capture_default_str()->needs(dry_run_flag)
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--gpus-per-node", plan.gpus_per_node, "--dry-run: GPUs per node")->capture_default_str()
      ->needs(dry_run_flag)->check(CLI::Range(1, 1024));
  app.add_option("--assume-mfu", plan.assume_mfu, "--dry-run: model FLOPs utilisation for the speed")
      ->capture_default_str()->needs(dry_run_flag);
  app.add_option("--gpu-memory-gb", plan.gpu_memory_gb, "--dry-run: memory per GPU")->capture_default_str()
      ->needs(dry_run_flag);
  app.add_flag("--use-distributed-optimizer", distributed_optimizer,
               "ZeRO-1: shard the optimizer state over the data-parallel ranks (reduce-scatter the gradients, "
               "all-gather the parameters)");
  taken_flag("--overlap-param-gather",
             "Megatron's: taken (with --use-distributed-optimizer each bucket's all-gather of the parameters "
             "overlaps the next forward, as srunway-train does)")
      ->needs("--use-distributed-optimizer");
  app.add_flag("--recompute-activations,--checkpoint-activations", recompute,
               "keep only each layer's input and run its forward again in the backward: one layer's activations "
               "in memory, for a third more compute (the same results; --checkpoint-activations: Megatron's name "
               "for it before 2022)");
  // Megatron's recomputation flags: its full recomputation of each layer from its input is srunway-train's; its
  // selective one recomputes the attention's score matrix, which fused attention keeps none of.
  std::string recompute_granularity, recompute_method = "uniform";
  int recompute_layers = 1;
  CLI::Option* granularity =
      app.add_option("--recompute-granularity", recompute_granularity,
                     "Megatron's: full is --recompute-activations; selective is taken and recomputes nothing (fused "
                     "attention keeps no score matrix to recompute)")
          ->check(CLI::IsMember({"full", "selective"}));
  std::vector<std::string> recompute_modules;
  app.add_option("--recompute-modules", recompute_modules,
                 "Megatron's, with --recompute-granularity selective: core_attn is taken as selective is; the "
                 "others are taken and recomputed none of (mlp and layernorm keep their activations; the MoE and "
                 "MLA modules are not in these models)")
      ->check(CLI::IsMember({"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"}))
      ->expected(1, -1)->needs(granularity);
  app.add_option("--recompute-method", recompute_method,
                 "Megatron's, with --recompute-granularity full: uniform (each layer from its input)")
      ->check(CLI::IsMember({"uniform", "block"}))->needs(granularity);
  app.add_option("--recompute-num-layers", recompute_layers,
                 "Megatron's, with --recompute-granularity full: 1 (each layer from its own input)")
      ->check(CLI::PositiveNumber)->needs(granularity);
  // Their names of 2021-2022, beside --checkpoint-activations, for the same choice.
  CLI::Option* old_method =
      app.add_option("--activations-checkpoint-method", recompute_method,
                     "Megatron's, of before 2023, with --checkpoint-activations: --recompute-method")
          ->check(CLI::IsMember({"uniform", "block"}))->needs("--checkpoint-activations")
          ->excludes("--recompute-method");
  CLI::Option* old_layers =
      app.add_option("--checkpoint-num-layers", recompute_layers,
                     "Megatron's, of before 2023, with --checkpoint-activations: --recompute-num-layers")
          ->check(CLI::PositiveNumber)->needs("--checkpoint-activations")->excludes("--recompute-num-layers");
  app.add_option("--exit-duration-in-mins", o.exit_duration_min,
                 "after this many minutes of training, save and exit 4 (before the job's time limit; 0: none)")
      ->capture_default_str()->check(srunway::common::NonNegative());
  app.add_option("--exit-interval", o.exit_interval,
                 "stop after a step that is a multiple of N, saving as on a signal, and exit 4 (Megatron's; 0: "
                 "never)")->capture_default_str()->check(srunway::common::NonNegative());
  app.add_flag("--decrease-batch-size-if-needed", o.decrease_batch_size,
               "Megatron's: a --global-batch-size that is not a multiple of --micro-batch-size x the ranks (a job "
               "requeued on fewer nodes) trains with the largest multiple below it, with a warning, instead of "
               "ending (not with --rampup-batch-size)");
  app.add_option("--iterations-to-skip", o.iterations_to_skip,
                 "Megatron's: pass over the samples of the step after N steps (so the step logged as N+1) for each "
                 "N given, untrained; the schedule does not count them (a loss spike's batches, from a checkpoint "
                 "before it)")->check(srunway::common::NonNegative());
  app.add_option("--exit-save-budget", o.exit_save_budget_s,
                 "on a signal, skip the save when the last one took longer than what is left of this many seconds")
      ->capture_default_str()->check(srunway::common::NonNegative());
  app.add_option("--straggler-threshold", o.straggler_threshold,
                 "name a rank whose compute time is this many times the median...")->capture_default_str();
  app.add_option("--straggler-window", o.straggler_window, "...for this many steps in a row")->capture_default_str();
  bool no_straggler_watch = false;
  app.add_flag("--disable-straggler-on-startup", no_straggler_watch,
               "Megatron's: no straggler lines (--straggler-threshold's, --straggler-minmax-count's); the metrics "
               "keep the slowest rank");
  app.add_option("--straggler-minmax-count", o.straggler_minmax_count,
                 "Megatron's: after each log line, the N slowest and N fastest ranks by the step's compute time, "
                 "also in --metrics-file (slowest_ranks, fastest_ranks)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--check-weight-hash-across-dp-replicas-interval", o.check_weight_hash_interval,
                 "Megatron's: every N steps the ranks compare a hash of their weights, which must be the same bit for "
                 "bit; ranks that differ (a memory or network fault) are named and the run stops without saving, "
                 "exit 3 (0: never)")
      ->check(srunway::common::NonNegative());
  CLI::Option* profile_step =
      app.add_option("--profile-step", o.profile_step,
                     "on a GPU, only step N inside the CUDA profiler's capture range (cuProfilerStart/Stop), for "
                     "nsys profile --capture-range=cudaProfilerApi or ncu --profile-from-start off");
  bool profile = false;
  int64_t profile_start = 10, profile_end = 12;
  std::vector<int> profile_ranks = {0};
  app.add_flag("--profile", profile,
               "Megatron's: steps --profile-step-start + 1 to --profile-step-end inside the CUDA profiler's capture "
               "range, on the ranks of --profile-ranks")
      ->excludes(profile_step);
  app.add_option("--profile-step-start", profile_start, "Megatron's: --profile's capture starts after this step")
      ->capture_default_str()->check(srunway::common::NonNegative());
  app.add_option("--profile-step-end", profile_end, "Megatron's: --profile's capture ends after this step")
      ->capture_default_str()->check(srunway::common::Positive());
  app.add_option("--profile-ranks", profile_ranks, "Megatron's: the ranks --profile captures")
      ->capture_default_str()->check(srunway::common::NonNegative());

  for (const char* name : {"--preset", "--num-layers", "--hidden-size", "--num-attention-heads", "--num-query-groups",
                           "--ffn-hidden-size", "--max-position-embeddings", "--vocab-size", "--init-std",
                           "--normalization", "--swiglu", "--position-embedding-type",
                           "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--norm-epsilon",
                           "--rotary-base", "--use-rope-scaling", "--add-qkv-bias", "--squared-relu", "--qk-layernorm",
                           "--apply-layernorm-1p", "--rotary-interleaved", "--no-rope-freq", "--window-size",
                           "--window-attn-skip-freq", "--softmax-type", "--quick-geglu", "--geglu",
                           "--embedding-multiplier", "--glu-linear-offset", "--activation-func-clamp-value",
                           "--rotary-seq-len-interpolation-factor"}) {
    use_checkpoint_args->excludes(name);
  }
  for (CLI::Option* option : yarn_options) use_checkpoint_args->excludes(option);
  for (const char* name : {"--init-std", "--norm-epsilon", "--rotary-base", "--rotary-seq-len-interpolation-factor",
                           "--lr", "--min-lr", "--decoupled-lr", "--decoupled-min-lr", "--lr-warmup-init",
                           "--weight-decay", "--adam-beta1", "--adam-beta2", "--adam-eps", "--clip-grad",
                           "--hidden-dropout", "--attention-dropout", "--yarn-rotary-scaling-factor",
                           "--yarn-beta-fast", "--yarn-beta-slow", "--yarn-mscale", "--yarn-mscale-all-dim"}) {
    app.get_option(name)->check(srunway::common::FitsFloat());  // the options held in floats
  }
  // As with most tools, a flag given twice takes its last value (lists such as --data-path keep every value).
  for (CLI::Option* option : app.get_options()) {
    if (option->get_items_expected_max() == 1) option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }

  std::vector<std::string> args;
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    given.insert(word.substr(0, word.find('=')));
    if ((word == "--config") && i + 1 < argc) config_file = argv[i + 1];
    if (word.starts_with("--config=")) config_file = word.substr(9);
  }
  if (!config_file.empty()) {
    auto words = srunway::trainer::ConfigFileWords(config_file, given, app);
    if (!words.ok()) {
      srunway::common::LogError("{}", words.status().message());
      return srunway::trainer::kExitUsage;
    }
    args = std::move(*words);
  }
  args.insert(args.end(), argv + 1, argv + argc);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector of words last first
  srunway::common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(args);
  } catch (const CLI::ExtrasError&) {
    std::vector<std::string> extras = app.remaining();  // in the order given
    if (const std::string refused = srunway::trainer::RefusedMegatronFlag(extras); !refused.empty()) {
      srunway::common::LogError("{}", refused);
      return srunway::trainer::kExitUsage;
    }
    // ExtrasError joins them last first (for the word vector CLI11 takes, which runs last first): "--num-experts 8
    // --moe-router-topk 2" read "not expected: 2 --moe-router-topk 8 --num-experts".
    std::reverse(extras.begin(), extras.end());
    return app.exit(CLI::ExtrasError(extras)) == 0 ? 0 : srunway::trainer::kExitUsage;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : srunway::trainer::kExitUsage;
  }

  for (const auto& [flag, size] : {std::pair{"--tensor-model-parallel-size", tensor_parallel},
                                   {"--pipeline-model-parallel-size", pipeline_parallel},
                                   {"--context-parallel-size", context_parallel}}) {
    if (size == 1) continue;
    srunway::common::LogError("{} {}: srunway-train is data parallel only, every rank holding the whole model "
                              "(--use-distributed-optimizer shards the optimizer state over the ranks): give 1 or "
                              "leave it out", flag, size);
    return srunway::trainer::kExitUsage;
  }
  o.log_learning_rate_to_tensorboard = !no_learning_rate;
  // Test data given, which no run reads: where they were named, and where the validation data were.
  std::pair<std::string, std::string> unread_test;
  if (!test_path.empty()) unread_test = {"--test-data-path", "--valid-data-path"};
  if (!data_args_path.empty()) {
    auto words = srunway::trainer::ReadDataArgsFile(data_args_path);
    if (!words.ok()) {
      srunway::common::LogError("--data-args-path: {}", words.status().message());
      return srunway::trainer::kExitError;
    }
    o.data_path = std::move(*words);
  }
  if (!per_split_args_path.empty()) {
    auto splits = srunway::trainer::ReadPerSplitDataArgsFile(per_split_args_path);
    if (!splits.ok()) {
      srunway::common::LogError("--per-split-data-args-path: {}", splits.status().message());
      return srunway::trainer::kExitError;
    }
    o.train_data_path = std::move(splits->train);
    o.valid_data_path = std::move(splits->valid);
    if (splits->test) {
      unread_test = {"--per-split-data-args-path " + per_split_args_path + "'s test data", "the file's valid data"};
    }
  }
  o.watch_stragglers = !no_straggler_watch;
  if (xavier) o.init_method = srunway::trainer::InitMethod::kXavierUniform;
  if (!unread_test.first.empty()) {
    srunway::common::LogInfo("{}: not read: srunway-train runs no test evaluation at the end of training (Megatron's "
                             "test run); its validation reads {}", unread_test.first, unread_test.second);
  }
  const bool null_tokenizer = tokenizer_type == "NullTokenizer";
  const bool model_type =
      tokenizer_type == "HuggingFaceTokenizer" || srunway::trainer::Tokenizer::SentencePieceType(tokenizer_type);
  if (!tokenizer_type.empty() && tokenizer_type != "GPT2BPETokenizer" && !model_type && !null_tokenizer) {
    srunway::common::LogError("--tokenizer-type {}: srunway-train reads BPE (GPT2BPETokenizer: --vocab-file and "
                              "--merge-file; HuggingFaceTokenizer: --tokenizer-model, a tokenizer.json; "
                              "Llama2Tokenizer, GPTSentencePieceTokenizer: --tokenizer-model, a SentencePiece BPE "
                              "model) or token ids (NullTokenizer) only", tokenizer_type);
    return srunway::trainer::kExitUsage;
  }
  if (model_type) o.tokenizer_type = tokenizer_type;
  // Megatron's NullTokenizer: the data are token ids below --vocab-size N, and N is the end of document.
  if (null_tokenizer && (vocab == 0 || !o.vocab_file.empty() || !o.tokenizer_model.empty())) {
    srunway::common::LogError("--tokenizer-type NullTokenizer {}", vocab == 0
                                  ? "needs --vocab-size N (token ids below N; N is the end of document)"
                                  : o.vocab_file.empty() ? "reads no --tokenizer-model: its tokens are the data's ids"
                                                         : "reads no --vocab-file: its tokens are the data's ids");
    return srunway::trainer::kExitUsage;
  }
  if (tokenizer_type == "GPT2BPETokenizer" && o.vocab_file.empty()) {
    srunway::common::LogError("--tokenizer-type GPT2BPETokenizer requires --vocab-file (and --merge-file)");
    return srunway::trainer::kExitUsage;
  }
  if (model_type && o.tokenizer_model.empty()) {
    srunway::common::LogError("--tokenizer-type {} requires --tokenizer-model (the tokenizer's file or the model "
                              "directory holding it)", tokenizer_type);
    return srunway::trainer::kExitUsage;
  }
  if (vocab_multiple_option->count() > 0 && o.vocab_file.empty() && o.tokenizer_model.empty() && !null_tokenizer) {
    srunway::common::LogError("--make-vocab-size-divisible-by requires --vocab-file, --tokenizer-model or "
                              "--tokenizer-type NullTokenizer");
    return srunway::trainer::kExitUsage;
  }
  if (no_attention_mask && o.reset_attention_mask) {
    srunway::common::LogError("--no-create-attention-mask-in-dataloader with --reset-attention-mask: Megatron then "
                              "masks no documents (its attention is causal alone); give one of them");
    return srunway::trainer::kExitUsage;
  }
  if (ddp_bucket_size > 0) o.bucket_size_mb = static_cast<double>(ddp_bucket_size) * sizeof(float) / (1 << 20);
  if (!non_persistent_type.empty() && non_persistent_type != "global") {
    srunway::common::LogError("--non-persistent-ckpt-type {}: srunway-train's non-persistent checkpoints are "
                              "global ones (every rank's shard in a directory that every node shares, as its other "
                              "checkpoints): give global", non_persistent_type);
    return srunway::trainer::kExitUsage;
  }
  if (non_persistent_interval->count() > 0 && non_persistent_type.empty()) {
    srunway::common::LogError("--non-persistent-save-interval needs --non-persistent-ckpt-type global (Megatron's "
                              "choice of where they go)");
    return srunway::trainer::kExitUsage;
  }
  if (non_persistent_interval->count() > 0 && o.save.empty() && non_persistent_global_dir.empty()) {
    srunway::common::LogError("--non-persistent-save-interval needs --save or --non-persistent-global-ckpt-dir "
                              "(where they are written)");
    return srunway::trainer::kExitUsage;
  }
  if (non_persistent_type == "global") {
    auto within = [&](const std::string& dir) {
      return dir.empty() ? std::string() : (std::filesystem::path(dir) / "non_persistent").string();
    };
    o.non_persistent_load_dir = non_persistent_global_dir.empty() ? within(o.load) : non_persistent_global_dir;
    if (o.non_persistent_save_interval > 0) {
      o.non_persistent_dir = non_persistent_global_dir.empty() ? within(o.save) : non_persistent_global_dir;
    }
  }
  if (profile) {
    if (profile_end <= profile_start) {
      srunway::common::LogError("--profile-step-end {} is not after --profile-step-start {}: the capture holds the "
                                "steps after the start, to the end", profile_end, profile_start);
      return srunway::trainer::kExitUsage;
    }
    o.profile_step = profile_start + 1;
    o.profile_last_step = profile_end;
    o.profile_ranks = profile_ranks;
  }
  if ((ckpt_format_option->count() > 0 || use_dist_ckpt->count() > 0) && (!o.save.empty() || !o.load.empty())) {
    const std::string flag = ckpt_format_option->count() > 0 ? "--ckpt-format " + ckpt_format : "--use-dist-ckpt";
    srunway::common::LogInfo("{}: srunway-train's checkpoints are its own (one shard per rank, loaded on any number of "
                             "ranks), which Megatron does not read, nor srunway-train Megatron's; --export-hf "
                             "writes the weights for Hugging Face", flag);
  }
  for (const auto& [option, flag] : wandb) {
    if (option->count() == 0) continue;
    srunway::common::LogError("{}: srunway-train has no Weights & Biases client; its scalars go to "
                              "--tensorboard-dir (Megatron's tags, which W&B's TensorBoard import reads) and "
                              "--metrics-file (JSON lines): leave the --wandb-* flags out", flag);
    return srunway::trainer::kExitUsage;
  }
  if (fp16) {
    srunway::common::LogError("--fp16: fp16 training with loss scaling is not supported: srunway-train trains in "
                              "bf16 on GPUs (Megatron's --bf16) and in fp32 on CPUs");
    return srunway::trainer::kExitUsage;
  }
  for (const auto& [option, flag] : fp8) {
    if (option->count() == 0) continue;
    const std::vector<std::string> values = option->results();
    srunway::common::LogError("{}{}: srunway-train has no FP8 training (Transformer Engine's recipes): its GEMMs "
                              "run in bf16, as Megatron's --bf16: leave the FP8 flags out", flag,
                              option->get_expected_min() > 0 && !values.empty() ? " " + values.back() : "");
    return srunway::trainer::kExitUsage;
  }
  if (rerun_mode == "report_stats") {
    srunway::common::LogError("--rerun-mode report_stats: srunway-train has no rerun state machine to rerun steps "
                              "and report how their results vary; a loss or gradient norm that is not finite ends "
                              "the run (exit 3): give disabled or validate_results, or leave it out");
    return srunway::trainer::kExitUsage;
  }
  if (fp32_residual && o.device != "cpu") {
    srunway::common::LogError("--fp32-residual-connection: on GPUs srunway-train's residual stream is bf16, as "
                              "Megatron's without it (on CPUs everything is fp32): give --device cpu or leave it out");
    return srunway::trainer::kExitUsage;
  }
  if (logging_level >= 0) {  // Python's levels: ERROR 40, WARNING 30, INFO 20, DEBUG 10
    srunway::common::SetLogLevel(logging_level >= 40   ? srunway::common::LogLevel::kError
                                 : logging_level >= 30 ? srunway::common::LogLevel::kWarn
                                 : logging_level >= 20 ? srunway::common::LogLevel::kInfo
                                                       : srunway::common::LogLevel::kDebug);
  }
  if (o.grad_reduce_bf16 && app.get_option("--accumulate-allreduce-grads-in-fp32")->count() > 0) {
    srunway::common::LogError("--grad-reduce-in-bf16 reduces the gradients in bf16, "
                              "--accumulate-allreduce-grads-in-fp32 in fp32: give one");
    return srunway::trainer::kExitUsage;
  }
  if (export_dtype_option->count() > 0 && o.export_safetensors.empty() && o.export_hf.empty()) {
    srunway::common::LogError("--export-dtype: there is nothing to export (give --export FILE or --export-hf DIR)");
    return srunway::trainer::kExitUsage;
  }
  o.export_dtype = export_dtype == "bf16"   ? srunway::trainer::StoredDtype::kBF16
                   : export_dtype == "fp16" ? srunway::trainer::StoredDtype::kF16
                                            : srunway::trainer::StoredDtype::kF32;
  // Megatron's flags alone start from the tiny model of their architecture; with a --preset they must agree with it.
  const bool preset_given = app.get_option("--preset")->count() > 0;
  auto flags = ArchFromFlags(megatron_arch, preset_given);
  if (!flags.ok()) {
    srunway::common::LogError("{}", flags.status().message());
    return srunway::trainer::kExitUsage;
  }
  const std::optional<srunway::trainer::Arch> arch = flags->arch;
  if (arch == srunway::trainer::Arch::kLlama && !preset_given) preset = "llama-tiny";
  auto model = srunway::trainer::Preset(preset);
  if (!model.ok()) {
    srunway::common::LogError("--preset: {}", model.status().message());
    return srunway::trainer::kExitUsage;
  }
  if (arch && model->arch != *arch) {
    srunway::common::LogError("--preset {} is a {} model, but Megatron's flags given ask for a {} one", preset,
                              srunway::trainer::ArchName(model->arch), srunway::trainer::ArchName(*arch));
    return srunway::trainer::kExitUsage;
  }
  o.model = *model;
  if (flags->norm) srunway::trainer::SetNorm(o.model, *flags->norm);
  if (flags->tied) srunway::trainer::SetTiedEmbeddings(o.model, *flags->tied);
  o.model.other_positions = o.model.arch == srunway::trainer::Arch::kGpt ? flags->rope : flags->learned;
  o.model.no_linear_bias = flags->no_bias && o.model.arch == srunway::trainer::Arch::kGpt;
  o.model.no_positions = flags->no_positions;
  const bool new_width = hidden_size && hidden_size != o.model.d_model;  // not the preset's own, restated
  if (num_layers) o.model.n_layer = num_layers;
  if (hidden_size) o.model.d_model = hidden_size;
  if (heads) o.model.n_head = heads;
  o.model.n_kv_head = query_groups ? query_groups : (heads ? heads : o.model.n_kv_head);
  if (o.model.arch == srunway::trainer::Arch::kGpt && !query_groups) o.model.n_kv_head = o.model.n_head;
  // Without --ffn-hidden-size the FFN's width follows --hidden-size as Megatron's (and Hugging Face's) does: 4 x the
  // hidden size, or with SwiGLU (Llama) two thirds of that rounded down to a multiple of 64 (Megatron's
  // arguments.py). A preset's own width holds only with the preset's hidden size: --hidden-size 1024 over gpt-tiny
  // kept its FFN of 256, where a pasted Megatron script meant 4096. Restating the preset's hidden size keeps its FFN
  // (llama2-7b's 11008 is not the formula's 10880).
  if (new_width && !ffn) {
    const int swiglu = 4 * hidden_size * 2 / 3 / 64 * 64;
    o.model.d_ff = o.model.arch == srunway::trainer::Arch::kGpt ? 4 * hidden_size
                   : swiglu > 0                                  ? swiglu
                                                                 : 4 * hidden_size * 2 / 3;
  }
  if (ffn) o.model.d_ff = ffn;
  if (max_positions) o.model.seq_len = max_positions;
  if (vocab) o.model.vocab = vocab;
  if (kv_channels != 0) srunway::trainer::SetHeadDim(o.model, kv_channels);
  if (null_tokenizer) {  // as Megatron's: N ids and the end of document, padded
    o.null_tokenizer_vocab = vocab;
    o.model.vocab = srunway::trainer::PaddedVocabSize(int64_t{vocab} + 1, vocab_multiple);
  }
  // Megatron's flags alone take the vocabulary from the data's tokenizer, padded, as Megatron does.
  if ((!o.vocab_file.empty() || !o.tokenizer_model.empty()) && !vocab && !preset_given) {
    auto tokenizer = srunway::trainer::TokenizerSource::Given(o.tokenizer_model, o.tokenizer_type, o.vocab_file,
                                                              o.merge_file)->Load();
    if (!tokenizer.ok()) {
      srunway::common::LogError("{}: {}", o.tokenizer_model.empty() ? "--vocab-file and --merge-file"
                                                                    : "--tokenizer-model",
                                tokenizer.status().message());
      return srunway::trainer::kExitError;
    }
    o.model.vocab = srunway::trainer::PaddedVocabSize(tokenizer->vocab_size(), vocab_multiple);
    o.tokenizer = std::make_shared<const srunway::trainer::Tokenizer>(std::move(*tokenizer));  // loaded once
  }
  if (init_std > 0) o.model.init_std = init_std;
  if (norm_eps > 0) o.model.norm_eps = norm_eps;
  if (rotary_base > 0) o.model.rope_theta = rotary_base;
  o.model.linear_bias = flags->linear_bias;
  // q's, k's and v's biases are among every linear layer's.
  o.model.qkv_bias = add_qkv_bias && !o.model.has_linear_bias();
  o.model.squared_relu = squared_relu;  // Validate refuses it for a Llama
  // Megatron's unfused MLP computes F.gelu, exact, unless --openai-gelu; a Llama's and a squared ReLU's have none.
  const bool exact_gelu_asked = exact_gelu && app.get_option("--openai-gelu")->count() == 0;
  o.model.exact_gelu = exact_gelu_asked && o.model.arch == srunway::trainer::Arch::kGpt && !squared_relu;
  o.model.quick_geglu = megatron_arch.quick_geglu;  // and these four for a GPT
  o.model.geglu = megatron_arch.geglu;
  o.model.embedding_multiplier = embedding_multiplier;
  o.model.glu_linear_offset = glu_linear_offset;
  o.model.glu_clamp = glu_clamp;
  o.model.qk_norm = qk_layernorm;
  o.model.norm_1p = layernorm_1p;
  o.model.softmax = *srunway::trainer::SoftmaxFromName(softmax_type);  // one of the names, as CLI11 checked
  o.model.rotary_interleaved = rotary_interleaved;  // Validate refuses it for a GPT
  o.model.rope_linear_factor = interpolation_factor;  // and this for a GPT
  if (use_rope_scaling) {  // Megatron's fixed bounds (its _apply_scaling's defaults), as Llama 3.1's
    o.model.rope_scaling_factor = rope_scaling_factor;
    o.model.rope_low_freq_factor = 1.0f;
    o.model.rope_high_freq_factor = 4.0f;
    o.model.rope_original_positions = 8192;
  }
  if (megatron_arch.position_embedding == "yarn") {
    o.model.yarn = yarn;  // Validate refuses it for a GPT, and checks its numbers
  } else {
    for (const CLI::Option* option : yarn_options) {
      if (option->count() == 0) continue;
      srunway::common::LogError("{} is YaRN's, for --position-embedding-type yarn", option->get_name());
      return srunway::trainer::kExitUsage;
    }
  }
  if (app.get_option("--no-rope-freq")->count() > 0) {  // over the flags' layers (Validate refuses it for a GPT)
    auto layers = srunway::trainer::NoRopeLayers(no_rope_freq, o.model.n_layer);
    if (!layers.ok()) {
      srunway::common::LogError("{}", layers.status().message());
      return srunway::trainer::kExitUsage;
    }
    o.model.no_rope = *layers;
  }
  if (app.get_option("--window-size")->count() > 0) {
    auto window = srunway::trainer::WindowSize(window_size);
    auto layers = app.get_option("--window-attn-skip-freq")->count() > 0
                      ? srunway::trainer::WindowLayers(window_attn_skip_freq, o.model.n_layer)
                      : std::vector<uint8_t>{};
    for (const srunway::common::Status& status : {window.status(), layers.status()}) {
      if (status.ok()) continue;
      srunway::common::LogError("{}", status.message());
      return srunway::trainer::kExitUsage;
    }
    o.model.window = *window;
    if (*window >= 0) o.model.window_layers = *layers;
  }
  for (CLI::Option* option : {use_checkpoint_args, ckpt_step}) {
    if (option->count() == 0 || load->count() > 0 || pretrained->count() > 0) continue;
    srunway::common::LogError("{} needs --load or --pretrained-checkpoint, the checkpoint to read",
                              option->get_name());
    return srunway::trainer::kExitUsage;
  }
  if (checkpoint_args) {
    // The checkpoint the run starts from.
    const std::string from = srunway::trainer::StartsFromPretrained(o) ? o.pretrained_checkpoint : o.load;
    const auto weights = srunway::trainer::WeightsFile(from);
    auto saved = [&]() -> srunway::common::StatusOr<srunway::trainer::ModelConfig> {
      if (weights) return srunway::trainer::WeightsModel(*weights);
      SRUNWAY_ASSIGN_OR_RETURN(auto summary, srunway::trainer::ReadCheckpointSummary(from));
      return summary.model;
    }();
    if (!saved.ok()) {
      srunway::common::LogError("--use-checkpoint-args: {}", saved.status().message());
      return srunway::trainer::kExitError;
    }
    o.model = *saved;
  }
  if (checkpoint_args && exact_gelu_asked && o.model.gelu()) {
    srunway::common::LogError("--no-bias-gelu-fusion: Megatron then computes the exact (erf) GELU, and the "
                              "checkpoint's GPT (--use-checkpoint-args) the tanh form: leave it out");
    return srunway::trainer::kExitUsage;
  }
  if (checkpoint_args && kv_channels != 0 && kv_channels != o.model.head_dim()) {
    srunway::common::LogError("--kv-channels {}: the checkpoint's heads (--use-checkpoint-args) are {} wide: give {} "
                              "or leave it out", kv_channels, o.model.head_dim(), o.model.head_dim());
    return srunway::trainer::kExitUsage;
  }
  if (checkpoint_args && rotary_percent_option->count() > 0 && rotary_percent != o.model.rotary_percent) {
    srunway::common::LogError("--rotary-percent {}: the checkpoint's RoPE (--use-checkpoint-args) turns {} of each "
                              "head: give {} or leave it out", rotary_percent, o.model.rotary_percent,
                              o.model.rotary_percent);
    return srunway::trainer::kExitUsage;
  }
  if (rotary_percent_option->count() > 0) o.model.rotary_percent = rotary_percent;  // Validate checks it
  if (auto status = srunway::trainer::Validate(o.model); !status.ok()) {
    if (checkpoint_args) {  // the file's model, not a flag: a bad file
      srunway::common::LogError("--use-checkpoint-args: the model {} holds: {}",
                                srunway::trainer::StartsFromPretrained(o) ? o.pretrained_checkpoint : o.load,
                                status.message());
      return srunway::trainer::kExitError;
    }
    srunway::common::LogError("{}", status.message());
    return srunway::trainer::kExitUsage;
  }
  o.overlap_grad_reduce = !no_overlap;
  if (ddp_num_buckets > 0) {  // Megatron's: the parameters / N in each (at least one)
    const int64_t per_bucket = std::max<int64_t>(srunway::trainer::ParameterCount(o.model) / ddp_num_buckets, 1);
    o.bucket_size_mb = static_cast<double>(per_bucket) * sizeof(float) / (1 << 20);
  }
  std::vector<std::string> kept;  // --recompute-modules' that this model has, and does not recompute
  for (const std::string& module : recompute_modules) {
    if (recompute_granularity == "selective" && (module == "mlp" || module == "layernorm")) kept.push_back(module);
  }
  if (!kept.empty()) {
    srunway::common::LogInfo("--recompute-modules {}: srunway-train recomputes no part of a layer alone, so their "
                             "activations are kept (--recompute-activations recomputes whole layers)",
                             fmt::join(kept, " "));
  }
  if (recompute_granularity == "full" || recompute) {
    const bool all_layers = recompute_method == "uniform" ? recompute_layers == 1 : recompute_layers >= o.model.n_layer;
    if (!all_layers) {
      const bool old_names = old_method->count() > 0 || old_layers->count() > 0;
      const std::string method = old_names ? "--activations-checkpoint-method" : "--recompute-method";
      const std::string layers = old_names ? "--checkpoint-num-layers" : "--recompute-num-layers";
      srunway::common::LogError("{} {} {} {}: srunway-train recomputes every layer from its own input ({} uniform "
                                "{} 1, or block over all {} layers)", method, recompute_method, layers,
                                recompute_layers, method, layers, o.model.n_layer);
      return srunway::trainer::kExitUsage;
    }
    recompute = true;
  }
  if (dry_run) {
    plan.model = o.model;
    plan.seq_length = o.seq_length;
    plan.micro_batch_size = o.micro_batch_size;
    plan.global_batch_size = o.global_batch_size;
    plan.decrease_batch_size = o.decrease_batch_size;
    plan.distributed_optimizer = distributed_optimizer;
    plan.recompute_activations = recompute;
    if (o.peak_tflops > 0) plan.peak_tflops = o.peak_tflops;
    auto made = srunway::trainer::MakePlan(plan);
    if (!made.ok()) {
      srunway::common::LogError("{}", made.status().message());
      return srunway::trainer::kExitUsage;
    }
    srunway::common::Print("{}", srunway::trainer::FormatPlan(plan, *made));
    // A script can ask before it submits: 0 when the run fits --gpu-memory-gb, 1 when it does not.
    return made->fits ? srunway::trainer::kExitOk : srunway::trainer::kExitError;
  }
  o.distributed_optimizer = distributed_optimizer;
  o.recompute_activations = recompute;

  // The library reads the flag once per step and the ranks agree on it: every rank saves and stops at one step.
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGUSR1, OnStopSignal);
  // A stdout that goes away (`| head`, a closed pipe) is a failed write the trainer warns about once, not a signal
  // that ends the run without its checkpoint.
  std::signal(SIGPIPE, SIG_IGN);
  srunway::common::ExitIfStdoutLost(0);  // the step lines: Trainer::Print warns once, and the run goes on
  const auto outcome = srunway::trainer::Train(o, &g_stop_signal, srunway::trainer::cuda::NewCudaOps);
  if (const auto* error = std::get_if<srunway::trainer::TrainError>(&outcome)) {
    if (error->rank == 0 || !error->every_rank) srunway::common::LogError("{}", error->status.message());
    // A signal that ended the start-up (a long sample index) stops the run as one during training does.
    if (error->status.code() == srunway::common::StatusCode::kAborted && g_stop_signal != 0) {
      return srunway::trainer::kExitSignalled;
    }
    return error->status.code() == srunway::common::StatusCode::kInvalidArgument ? srunway::trainer::kExitUsage
                                                                                 : srunway::trainer::kExitError;
  }
  const auto& result = std::get<srunway::trainer::TrainResult>(outcome);
  if (result.rank != 0) return ExitCode(result.ending);
  switch (result.ending) {
    case srunway::trainer::TrainResult::Ending::kFinished:
      break;
    case srunway::trainer::TrainResult::Ending::kDiverged:
      srunway::common::LogError("step {}: loss {} and gradient norm {}: training diverged; stopping without saving "
                                "(the last good checkpoint{} is kept)", result.step, result.loss, result.grad_norm,
                                o.save.empty() ? ", if any," : " in " + o.save);
      break;
    case srunway::trainer::TrainResult::Ending::kReplicasDiffer:
      srunway::common::LogError("step {}: the ranks' weights differ, where data parallelism keeps them the same bit "
                                "for bit: {}; a fault in a GPU's or a host's memory or on the network? Stopping "
                                "without saving (the last good checkpoint{} is kept)", result.step, result.replicas,
                                o.save.empty() ? ", if any," : " in " + o.save);
      break;
    case srunway::trainer::TrainResult::Ending::kSignalled:
      if (!result.not_saved.empty()) srunway::common::LogWarn("{}", result.not_saved);
      srunway::common::LogError("stopped by signal {} after step {}{}", result.signal, result.step,
                                o.save.empty() ? " (no --save: nothing kept)" : "; resume with --load " + o.save);
      break;
    case srunway::trainer::TrainResult::Ending::kTimeLimit:
      srunway::common::LogError("stopped after step {}: --exit-duration-in-mins {} has passed{}", result.step,
                                o.exit_duration_min,
                                o.save.empty() ? " (no --save: nothing kept)" : "; resume with --load " + o.save);
      break;
    case srunway::trainer::TrainResult::Ending::kExitInterval:
      srunway::common::LogInfo("stopped after step {}, a multiple of --exit-interval {}{}", result.step,
                               o.exit_interval,
                               o.save.empty() ? " (no --save: nothing kept)" : "; resume with --load " + o.save);
      break;
  }
  return ExitCode(result.ending);
}
