// GPU suite: one training step of the whole model on the GPU (trainer/ops/cuda through the ops table) against
// the same step on the CPU (ops/cpu, fp32), from the same parameters (rounded to bf16, so both start equal) and
// batch: gpt-tiny (also with --squared-relu) and llama-tiny (also with --add-qkv-bias's biases, or every linear
// layer's), both also with
// --qk-layernorm's norms (these parameters drawn at random: tests/variant_params.h), without and with
// dropout 0.1 (with it, the GPU's classifier makes its gradients
// with the losses, as training does), and with several documents in each sequence (--reset-position-ids and
// --reset-attention-mask: on the GPU attention's own kernels, whatever SRUNWAY_ATTENTION says). The GPU keeps activations in bf16, so the two
// differ by bf16 rounding along the network: the loss within 1e-2 relative, and each gradient tensor within 5e-2
// of its largest element on the CPU (every tensor's worst is printed); then the global norm and one clipped AdamW
// update through the same ops table (see Step). Arguments name the cases to run (gpt-tiny, llama-tiny, each also
// with -dropout and -documents; llama-tiny-qkv-bias, whose q, k and v have biases; llama-tiny-biases-dropout, whose
// every linear layer has (Megatron's add_bias_linear), with dropout; gpt-tiny-squared-relu, whose FFN
// is relu(x)^2; llama-tiny-qk-norm-kv32 and gpt-tiny-qk-norm-kv32, whose heads' q and k have norms
// (--qk-layernorm) and are 32 wide (--kv-channels) instead of 16; llama-tiny-qk-norm-layernorm and gpt-tiny-rmsnorm,
// each with the other's norms (--normalization), a Llama's LayerNorms with biases; llama-tiny-rotary0.5-documents,
// whose RoPE turns half of each head (--rotary-percent 0.5) at each document's positions; llama-tiny-interleaved,
// whose RoPE turns side-by-side pairs (--rotary-interleaved); all of them without any).
// Exits 77 where there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/half.h"
#include "tests/gpu/open_gpu.h"
#include "tests/variant_params.h"
#include "trainer/model/model.h"
#include "trainer/model/rng.h"
#include "trainer/ops/cuda/cuda_ops.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/schedule.h"

namespace {

using srunway::trainer::Device;
using srunway::trainer::Model;

int g_failures = 0;

void Check(const srunway::common::Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "cuda_model: %s: %s\n", what, status.ToString().c_str());
  std::exit(EXIT_FAILURE);
}

struct Case {
  const char* name;
  const char* preset;
  float dropout;
  bool documents;
  int biases = 0;  // 1: q's, k's and v's (--add-qkv-bias); 2: every linear layer's (no --disable-bias-linear)
  bool squared_relu = false;
  bool qk_norm = false;
  int head_dim = 0;  // --kv-channels
  bool other_norm = false;  // --normalization: the other architecture's norms
  double rotary_percent = 1;  // --rotary-percent: RoPE over part of each head
  bool rotary_interleaved = false;  // --rotary-interleaved: RoPE's pairs side by side
  srunway::trainer::Softmax softmax = srunway::trainer::Softmax::kVanilla;  // --softmax-type
  srunway::trainer::Glu glu = {};  // --quick-geglu (alpha 1.702), --glu-linear-offset, --activation-func-clamp-value,
                                   // --geglu (gelu)
  float embedding_multiplier = 1.0f;  // --embedding-multiplier
  bool norm_1p = false;               // --apply-layernorm-1p
  bool other_tie = false;             // the other architecture's head: a Llama's tied, a GPT's its own
  bool exact_gelu = false;            // --no-bias-gelu-fusion: a GPT's GELU erf's
  // Nemotron's GPT: RoPE over half of each head, no biases, 2 KV heads, squared ReLU, norms 1 + weight, its own head.
  bool nemotron = false;
  bool learned = false;  // a Llama's learned position table in place of RoPE
};

void Step(Device& device, srunway::trainer::Ops& ops, const Case& c) {
  const char* preset = c.preset;
  const float dropout = c.dropout;
  const bool documents = c.documents;
  auto config = srunway::trainer::Preset(preset);
  Check(config.status(), "Preset");
  config->qkv_bias = c.biases == 1;
  config->linear_bias = c.biases == 2;
  config->squared_relu = c.squared_relu;
  config->exact_gelu = c.exact_gelu;
  config->qk_norm = c.qk_norm;
  if (c.head_dim > 0) srunway::trainer::SetHeadDim(*config, c.head_dim);
  if (c.other_norm) srunway::trainer::SwapNorms(*config);
  config->rotary_percent = c.rotary_percent;
  config->rotary_interleaved = c.rotary_interleaved;
  config->softmax = c.softmax;
  config->quick_geglu = c.glu.alpha == srunway::trainer::kQuickGeluAlpha;
  config->glu_linear_offset = c.glu.offset;
  config->glu_clamp = c.glu.clamp;
  config->geglu = c.glu.gelu;
  config->embedding_multiplier = c.embedding_multiplier;
  config->norm_1p = c.norm_1p;
  if (c.other_tie) srunway::trainer::SetTiedEmbeddings(*config, !config->tied_embeddings());
  if (c.learned) config->other_positions = true;
  if (c.nemotron) {
    config->other_positions = true;
    config->rotary_percent = 0.5;
    config->no_linear_bias = true;
    config->n_kv_head = 2;
    config->squared_relu = true;
    config->norm_1p = true;
    srunway::trainer::SetTiedEmbeddings(*config, false);
  }
  const int B = 4, T = config->seq_len;
  Model cpu(*config, B);
  srunway::trainer::Rng rng(42);
  srunway::trainer::InitParams(*config, cpu.layout(), rng, cpu.params());
  srunway::trainer::RandomizeVariantParams(cpu.layout(), rng, cpu.params());
  for (float& p : cpu.params()) p = srunway::common::BFloat16ToFloat(srunway::common::FloatToBFloat16(p));
  Model gpu(*config, B, &device, &ops);
  Check(device.CopyFromHost(gpu.params().data(), cpu.params().data(), cpu.params().size_bytes(), device.main_stream()),
        "CopyFromHost");
  gpu.RefreshWeights();
  cpu.set_dropout(dropout, dropout);
  gpu.set_dropout(dropout, dropout);
  constexpr int32_t kEod = 0;  // with `documents`, about one token in 40 ends a document
  cpu.set_documents(kEod, documents, documents);
  gpu.set_documents(kEod, documents, documents);

  std::mt19937 gen(7);
  std::uniform_int_distribution<int32_t> token(0, config->vocab - 1);
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = documents && token(gen) % 40 == 0 ? kEod : token(gen);
    targets[i] = token(gen);
  }
  const srunway::trainer::DropoutContext context{1234, 1, 0};
  const double cpu_loss = cpu.Forward(tokens.data(), targets.data(), B, T, &context);
  // With dropout, as training runs it: the classifier's gradients made with the losses in one kernel; without,
  // each in its own.
  const bool fused = dropout > 0;
  const double gpu_loss = gpu.Forward(tokens.data(), targets.data(), B, T, &context, nullptr,
                                      fused ? std::optional<float>(1.0f) : std::nullopt);
  Check(ops.TakeError(), "forward");
  cpu.Backward(1.0f);
  gpu.Backward(1.0f);
  Check(ops.TakeError(), "backward");
  std::vector<float> grads(cpu.grads().size());
  Check(device.CopyToHost(grads.data(), gpu.grads().data(), gpu.grads().size_bytes(), device.main_stream()),
        "CopyToHost");
  Check(device.Synchronize(device.main_stream()), "Synchronize");

  const double loss_error = std::fabs(gpu_loss - cpu_loss) / std::fabs(cpu_loss);
  std::printf("  %s dropout %.1f%s%s: loss cpu %.6f gpu %.6f (relative %.2e) %s\n", c.name,
              static_cast<double>(dropout), fused ? " (classifier fused)" : "", documents ? " documents" : "",
              cpu_loss, gpu_loss, loss_error, loss_error <= 1e-2 ? "ok" : "FAIL");
  if (!(loss_error <= 1e-2)) ++g_failures;
  auto largest_of = [&](const srunway::trainer::TensorSpec& tensor) {
    double largest = 0;
    for (int64_t i = tensor.offset; i < tensor.offset + tensor.numel; ++i) {
      largest = std::max(largest, std::fabs(static_cast<double>(cpu.grads()[static_cast<size_t>(i)])));
    }
    return largest;
  };
  for (const auto& tensor : cpu.layout().tensors()) {
    double largest = largest_of(tensor), worst = 0;
    for (int64_t i = tensor.offset; i < tensor.offset + tensor.numel; ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(grads[static_cast<size_t>(i)]) -
                                        cpu.grads()[static_cast<size_t>(i)]));
    }
    // The softmax takes no notice of a shift common to every key, so the gradient of the keys' norm's bias is 0
    // but for rounding (the CPU's about 1e-10): it is judged against the queries' norm's bias.
    constexpr std::string_view kKeys = "k_norm.bias";
    if (tensor.name.ends_with(kKeys)) {
      const std::string layer = tensor.name.substr(0, tensor.name.size() - kKeys.size());
      largest = largest_of(*cpu.layout().Find(layer + "q_norm.bias"));
    }
    const double relative = largest > 0 ? worst / largest : worst;
    const bool ok = relative <= 5e-2;
    std::printf("    %-24s worst %.2e of largest %.2e (%.2e) %s\n", tensor.name.c_str(), worst, largest, relative,
                ok ? "ok" : "FAIL");
    if (!ok) ++g_failures;
  }

  // Then the optimizer: the global norm from each side's gradients, clipping to 0.5 folded into AdamW's gradient
  // scale on the GPU (applied to the gradients on the CPU, as srunway-train does), one update each. With
  // bf16-close gradients the first AdamW step moves almost every element by +-lr on both sides; elements whose
  // gradient is near zero may differ, so the mean |gpu update - cpu update| must stay within 0.1 lr. The GPU's
  // bf16 weights must be the bf16 rounding of its updated fp32 parameters, exactly.
  const double cpu_norm = std::sqrt(srunway::trainer::SumOfSquares(cpu.grads()));
  const double gpu_norm = std::sqrt(ops.SumOfSquares(gpu.grads().data(), static_cast<int64_t>(gpu.grads().size())));
  Check(ops.TakeError(), "SumOfSquares");
  const double norm_error = std::fabs(gpu_norm - cpu_norm) / cpu_norm;
  std::printf("    global norm cpu %.6f gpu %.6f (relative %.2e) %s\n", cpu_norm, gpu_norm, norm_error,
              norm_error <= 1e-2 ? "ok" : "FAIL");
  if (!(norm_error <= 1e-2)) ++g_failures;
  const std::vector<float> before(cpu.params().begin(), cpu.params().end());
  const srunway::trainer::AdamWConfig adam{0.9f, 0.95f, 1e-8f, 0.1f};
  const float lr = 1e-3f;
  srunway::trainer::AdamW cpu_adam(cpu.layout(), adam);
  srunway::trainer::AdamW gpu_adam(gpu.layout(), adam, {}, &device, &ops);
  const float cpu_scale = srunway::trainer::ClipByGlobalNorm(cpu.grads(), cpu_norm, 0.5);
  cpu_adam.Step(cpu.params(), cpu.grads(), lr, 1);
  const float gpu_scale = static_cast<float>(std::min(1.0, 0.5 / (gpu_norm + 1e-6)));
  gpu_adam.Step(gpu.params(), gpu.grads(), lr, 1, gpu_scale, gpu.weights());
  Check(ops.TakeError(), "AdamW");
  std::vector<float> after(before.size());
  std::vector<uint16_t> weights(before.size());
  Check(device.CopyToHost(after.data(), gpu.params().data(), gpu.params().size_bytes(), device.main_stream()),
        "CopyToHost");
  Check(device.CopyToHost(weights.data(), gpu.weights(), weights.size() * sizeof(uint16_t), device.main_stream()),
        "CopyToHost");
  Check(device.Synchronize(device.main_stream()), "Synchronize");
  double update_error = 0;
  size_t weights_off = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    update_error += std::fabs((after[i] - before[i]) - (cpu.params()[i] - before[i]));
    if (weights[i] != srunway::common::FloatToBFloat16(after[i])) ++weights_off;
  }
  update_error /= static_cast<double>(before.size()) * lr;
  std::printf("    adamw (clip scale cpu %.4f gpu %.4f): mean |update difference| %.3f lr %s; bf16 weights off: %zu %s\n",
              static_cast<double>(cpu_scale), static_cast<double>(gpu_scale), update_error,
              update_error <= 0.1 ? "ok" : "FAIL", weights_off, weights_off == 0 ? "ok" : "FAIL");
  if (!(update_error <= 0.1) || weights_off != 0) ++g_failures;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr Case kCases[] = {{"gpt-tiny", "gpt-tiny", 0.0f, false},
                             {"gpt-tiny-dropout", "gpt-tiny", 0.1f, false},
                             {"gpt-tiny-documents", "gpt-tiny", 0.0f, true},
                             {"llama-tiny", "llama-tiny", 0.0f, false},
                             {"llama-tiny-dropout", "llama-tiny", 0.1f, false},
                             {"llama-tiny-documents", "llama-tiny", 0.0f, true},
                             {"llama-tiny-qkv-bias", "llama-tiny", 0.0f, false, 1},
                             {"llama-tiny-biases-dropout", "llama-tiny", 0.1f, false, 2},
                             {"gpt-tiny-squared-relu", "gpt-tiny", 0.0f, false, false, true},
                             {"llama-tiny-qk-norm-kv32", "llama-tiny", 0.0f, false, false, false, true, 32},
                             {"gpt-tiny-qk-norm-kv32", "gpt-tiny", 0.0f, false, false, false, true, 32},
                             {"llama-tiny-qk-norm-layernorm", "llama-tiny", 0.0f, false, false, false, true, 0, true},
                             {"gpt-tiny-rmsnorm", "gpt-tiny", 0.0f, false, false, false, false, 0, true},
                             {"llama-tiny-rotary0.5-documents", "llama-tiny", 0.0f, true, false, false, false, 0, false,
                              0.5},
                             {"llama-tiny-interleaved", "llama-tiny", 0.0f, false, false, false, false, 0, false, 1,
                              true},
                             {"gpt-tiny-sinks-dropout", "gpt-tiny", 0.1f, false, false, false, false, 0, false, 1,
                              false, srunway::trainer::Softmax::kLearnable},
                             {"llama-tiny-off-by-one-documents", "llama-tiny", 0.0f, true, false, false, false, 0,
                              false, 1, false, srunway::trainer::Softmax::kOffByOne},
                             // No clamp (--activation-func-clamp-value): the GPU's bf16 FFN inputs fall on the
                             // other side of it than the CPU's fp32 ones here and there, and each such input's
                             // gradient is 0 on one side and whole on the other (0.12 of layers.1.fc.weight's largest
                             // at a clamp of 0.4; 0.006 without). cuda_ops checks the clamp, on the same inputs.
                             {"llama-tiny-quick-geglu", "llama-tiny", 0.0f, false, false, false, false, 0, false, 1,
                              false, srunway::trainer::Softmax::kVanilla,
                              {srunway::trainer::kQuickGeluAlpha, 1.0f, 0.0f}},
                             // Gemma's Llama: GeGLU, its embedding times the root of its width, norms 1 + weight,
                             // its head tied to the embedding.
                             {"llama-tiny-tied-gemma", "llama-tiny", 0.0f, false, 0, false, false, 0, false, 1, false,
                              srunway::trainer::Softmax::kVanilla, {.gelu = true}, 8.0f, true, true},
                             // A GPT with a head of its own (--untie-embeddings-and-output-weights).
                             {"gpt-tiny-untied-documents", "gpt-tiny", 0.0f, true, 0, false, false, 0, false, 1,
                              false, srunway::trainer::Softmax::kVanilla, {}, 1.0f, false, true},
                             // A GPT with exact GELU (--no-bias-gelu-fusion): its GEMM keeps no GELU epilogue.
                             {"gpt-tiny-exact-gelu-dropout", "gpt-tiny", 0.1f, false, 0, false, false, 0, false, 1,
                              false, srunway::trainer::Softmax::kVanilla, {}, 1.0f, false, false, true},
                             {"gpt-tiny-nemotron-documents", "gpt-tiny", 0.0f, true, 0, false, false, 0, false, 1,
                              false, srunway::trainer::Softmax::kVanilla, {}, 1.0f, false, false, false, true},
                             {"llama-tiny-learned-documents", "llama-tiny", 0.0f, true, 0, false, false, 0, false, 1,
                              false, srunway::trainer::Softmax::kVanilla, {}, 1.0f, false, false, false, false,
                              true}};
  const std::set<std::string> chosen(argv + 1, argv + argc);
  for (const std::string& name : chosen) {
    if (std::none_of(std::begin(kCases), std::end(kCases), [&](const Case& c) { return name == c.name; })) {
      std::fprintf(stderr, "cuda_model: no case %s (gpt-tiny, llama-tiny, each also with -dropout and -documents; "
                           "llama-tiny-qkv-bias, llama-tiny-biases-dropout, gpt-tiny-squared-relu, "
                           "llama-tiny-qk-norm-kv32, gpt-tiny-qk-norm-kv32, llama-tiny-qk-norm-layernorm, "
                           "gpt-tiny-rmsnorm, "
                           "llama-tiny-rotary0.5-documents, llama-tiny-interleaved, gpt-tiny-sinks-dropout, "
                           "llama-tiny-off-by-one-documents, llama-tiny-quick-geglu, llama-tiny-tied-gemma, "
                           "gpt-tiny-untied-documents, gpt-tiny-exact-gelu-dropout, gpt-tiny-nemotron-documents, "
                           "llama-tiny-learned-documents)\n",
                   name.c_str());
      return EXIT_FAILURE;
    }
  }
  auto device = srunway::gpu_tests::OpenGpuOrSkip("cuda_model");
  auto ops = srunway::trainer::cuda::NewCudaOps(*device);
  Check(ops.status(), "NewCudaOps");
  std::printf("cuda_model: %s\n", device->name().c_str());
  for (const Case& c : kCases) {
    if (chosen.empty() || chosen.contains(c.name)) Step(*device, **ops, c);
  }
  std::printf("cuda_model: %s\n", g_failures == 0 ? "the GPU step matches the CPU step" : "MISMATCHES above");
  return g_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
