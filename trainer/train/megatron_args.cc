// Megatron's flags that srunway-train refuses by name, and the files its data flags name.
#include "trainer/train/megatron_args.h"

#include <fmt/format.h>

#include <sstream>

#include "common/fs.h"
#include "common/json.h"

namespace srunway::trainer {
namespace {

// Megatron's flags for what srunway-train has none of, refused by name where they would be unknown arguments, so
// that a pasted script hears why: a flag, or every flag that starts with a prefix ending in '-'.
struct Refused {
  std::string_view flag, why;
};
constexpr std::string_view kNoMoe =
    "srunway-train trains dense models: it has no mixture of experts (Megatron's MoE layers): leave the MoE flags out";
constexpr std::string_view kNoMla =
    "srunway-train has no multi-latent attention (DeepSeek's): its attention has query, key and value heads of one "
    "width (--kv-channels): leave the MLA flags out";
constexpr std::string_view kNoPipeline =
    "srunway-train is data parallel only, every rank holding the whole model, so there are no pipeline stages to "
    "lay out: leave it out";
constexpr std::string_view kNoRerun =
    "srunway-train has no rerun state machine to tell a transient fault from a reproducible one; a loss or gradient "
    "norm that is not finite ends the run (exit 3), and --check-weight-hash-across-dp-replicas-interval finds ranks "
    "whose weights differ: leave it out";
constexpr std::string_view kOtherModel =
    "srunway-train trains decoder-only GPT and Llama models (--help lists what shapes them): leave it out";
constexpr std::string_view kNoFsdp =
    "srunway-train keeps the whole model on every rank and shards only the optimizer state "
    "(--use-distributed-optimizer, ZeRO-1), with nothing offloaded to the host: leave it out";
constexpr std::string_view kNoFaultTolerancePackage =
    "srunway-train has no in-process restart or NVIDIA resiliency package: srunway-launch ends every rank when one "
    "fails or hangs (--hang-timeout), and a requeued job resumes from --save: leave it out";
constexpr std::string_view kNoFp8 =
    "srunway-train has no FP8 training (Transformer Engine's recipes): its GEMMs run in bf16: leave the FP8 flags out";
constexpr std::string_view kNoFp4 =
    "srunway-train has no FP4 training (Transformer Engine's NVFP4 recipes): its GEMMs run in bf16: leave the FP4 "
    "flags out";
constexpr std::string_view kNoOffload =
    "srunway-train keeps the activations it saves on the device (--recompute-activations keeps fewer), with nothing "
    "offloaded to the host: leave it out";
constexpr std::string_view kDecoderLayers = "srunway-train trains decoder-only models: give --num-layers";
constexpr std::string_view kDecoderLength = "srunway-train trains decoder-only models: give --seq-length";
constexpr std::string_view kNoConversion =
    "srunway-train converts no checkpoints: --export-hf writes the weights for Hugging Face";
constexpr std::string_view kNoMemoryHistory =
    "srunway-train has no PyTorch allocator whose history to record: --log-memory-to-tensorboard writes the device's "
    "allocated bytes, and each log line's peak (peak_memory_gib in --metrics-file): leave it out";
constexpr std::string_view kNoAutoresume =
    "srunway-train has no ADLR autoresume (NVIDIA's internal scheduler): it saves and exits on Slurm's signals "
    "(SIGTERM, or SIGUSR1 from sbatch --signal) and after --exit-duration-in-mins, and a requeued job resumes from "
    "--save: leave it out";
constexpr std::string_view kNoSft =
    "srunway-train pretrains on token streams (Megatron's indexed datasets, llm.c shards); it has no SFT datasets of "
    "conversations: leave it out";
constexpr Refused kRefused[] = {
    {"--num-experts", kNoMoe},
    {"--moe-", kNoMoe},
    {"--expert-model-parallel-size", kNoMoe},
    {"--expert-tensor-parallel-size", kNoMoe},
    {"--multi-latent-attention", kNoMla},
    {"--q-lora-rank", kNoMla},
    {"--kv-lora-rank", kNoMla},
    {"--qk-head-dim", kNoMla},
    {"--qk-pos-emb-head-dim", kNoMla},
    {"--v-head-dim", kNoMla},
    {"--mtp-", "srunway-train has no multi-token prediction (DeepSeek-V3's MTP layers): leave the --mtp-* flags out"},
    {"--num-layers-per-virtual-pipeline-stage", kNoPipeline},
    {"--num-virtual-stages-per-pipeline-rank", kNoPipeline},
    {"--decoder-first-pipeline-num-layers", kNoPipeline},
    {"--decoder-last-pipeline-num-layers", kNoPipeline},
    {"--pipeline-model-parallel-layout", kNoPipeline},
    {"--check-for-spiky-loss", kNoRerun},
    {"--check-for-large-grads", kNoRerun},
    {"--error-injection-", kNoRerun},
    {"--use-pytorch-profiler",
     "srunway-train has no PyTorch profiler: --profile (Megatron's) puts steps --profile-step-start + 1 to "
     "--profile-step-end inside the CUDA profiler's capture range, for nsys profile --capture-range=cudaProfilerApi"},
    {"--record-memory-history", kNoMemoryHistory},
    {"--memory-snapshot-path", kNoMemoryHistory},
    {"--apply-residual-connection-post-layernorm",
     "srunway-train's layers add each norm's input to the residual stream (GPT's and Llama's order); BERT's order, "
     "which adds the norm's output, is another model: leave it out"},
    {"--overlap-moe-expert-parallel-comm", kNoMoe},
    {"--encoder-num-layers", kDecoderLayers},
    {"--decoder-num-layers", kDecoderLayers},
    {"--encoder-seq-length", kDecoderLength},
    {"--decoder-seq-length", kDecoderLength},
    {"--spec", kOtherModel},
    {"--hybrid-", kOtherModel},
    {"--heterogeneous-", kOtherModel},
    {"--retro-", kOtherModel},
    {"--ict-", kOtherModel},
    {"--biencoder-", kOtherModel},
    {"--vision-", kOtherModel},
    {"--kitchen-", kOtherModel},
    {"--vocab-extra-ids", kOtherModel},
    {"--sft", kNoSft},
    {"--sft-", kNoSft},
    {"--data-parallel-random-init",
     "srunway-train starts every rank from the same parameters, which data parallelism keeps the same: leave it out"},
    {"--batch-size", "Megatron's of before 2021, which Megatron refuses too: give --micro-batch-size"},
    {"--warmup", "Megatron's of before 2021, which Megatron refuses too: give --lr-warmup-fraction"},
    {"--yaml-cfg", "srunway-train's --config takes a YAML file of flag: value (Megatron's flag names): give --config"},
    {"--optimizer-cpu-offload", kNoFsdp},
    {"--optimizer-offload-fraction", kNoFsdp},
    {"--use-custom-fsdp", kNoFsdp},
    {"--use-megatron-fsdp", kNoFsdp},
    {"--use-torch-fsdp2", kNoFsdp},
    {"--data-parallel-sharding-strategy", kNoFsdp},
    {"--num-layers-at-start-in-bf16", kNoFp8},
    {"--fp8-", kNoFp8},
    {"--keep-fp8-transpose-cache", kNoFp8},
    {"--no-fp8-weight-transpose-cache", kNoFp8},
    {"--fp4-", kNoFp4},
    {"--te-precision-config-file", kNoFp4},
    {"--fine-grained-activation-offloading", kNoOffload},
    {"--offload-modules", kNoOffload},
    {"--min-offloaded-tensor-size", kNoOffload},
    {"--use-fused-weighted-squared-relu", kNoMoe},
    {"--mamba-", kOtherModel},
    {"--is-hybrid-model", kOtherModel},
    {"--phase-transition-iterations",
     "srunway-train draws one blend for the whole run, where Megatron starts each phase's blend afresh at these "
     "steps: leave it out (a run resumed with another --data-path goes on with its samples from the samples "
     "consumed)"},
    {"--num-layers-at-end-in-bf16", kNoFp8},
    {"--fp16-lm-cross-entropy",
     "srunway-train computes the cross-entropy in fp32 from bf16 logits, and has no fp16 training: leave it out"},
    {"--inprocess-", kNoFaultTolerancePackage},
    {"--enable-ft-package", kNoFaultTolerancePackage},
    {"--calc-ft-timeouts", kNoFaultTolerancePackage},
    {"--log-energy", "srunway-train does not read the GPUs' energy counters: leave it out"},
    {"--object-storage-cache-path", "srunway-train reads its data from files (mmap): leave it out"},
    {"--ckpt-convert-format", kNoConversion},
    {"--ckpt-convert-save", kNoConversion},
    {"--nccl-communicator-config-path",
     "srunway-train configures NCCL from the environment (the SPANK plugin's NCCL_* settings): leave it out"},
    {"--onnx-safe",
     "srunway-train exports safetensors (--export, --export-hf), not through PyTorch's ONNX exporter: leave it out"},
    {"--lazy-mpu-init", "Megatron's hook for its own tests: srunway-train sets up its ranks itself: leave it out"},
    {"--test-mode", "Megatron's hook for its own tests: leave it out"},
    {"--adlr-autoresume", kNoAutoresume},
    {"--adlr-autoresume-", kNoAutoresume},
    {"--config-logger-dir",
     "srunway-train logs no module configs: each checkpoint's header holds the model (--use-checkpoint-args reads "
     "it) and the run's settings: leave it out"},
    {"--run-workload-inspector-server",
     "srunway-train runs no workload inspector server: --profile (Megatron's) marks steps for nsys, and "
     "--timing-log-level prints each phase's time: leave it out"},
    {"--straggler-ctrlr-port",
     "srunway-train has no port to switch the straggler watch on and off while it runs: it watches from the start, "
     "or not at all with --disable-straggler-on-startup: leave it out"},
};

// The words of `text`, whitespace apart (Python's str.split(), as Megatron splits them).
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace

std::string RefusedMegatronFlag(const std::vector<std::string>& words) {
  for (const std::string& word : words) {
    const std::string_view flag = std::string_view(word).substr(0, word.find('='));
    for (const Refused& refused : kRefused) {
      const bool prefix = refused.flag.ends_with('-');
      if (prefix ? flag.starts_with(refused.flag) : flag == refused.flag) {
        return fmt::format("{}: {}", flag, refused.why);
      }
    }
  }
  return {};
}

common::StatusOr<std::vector<std::string>> ReadDataArgsFile(const std::string& path) {
  SRUNWAY_ASSIGN_OR_RETURN(const std::string text, common::ReadFile(path));
  std::vector<std::string> words = Words(text);
  if (words.empty()) {
    return common::InvalidArgument("{}: holds no dataset (a prefix, or weights and prefixes)", path);
  }
  return words;
}

common::StatusOr<PerSplitDataArgs> ReadPerSplitDataArgsFile(const std::string& path) {
  SRUNWAY_ASSIGN_OR_RETURN(const std::string text, common::ReadFile(path));
  SRUNWAY_ASSIGN_OR_RETURN(const common::Json json, common::ParseJson(text, path));
  if (!json.is_object()) {
    return common::InvalidArgument("{}: not a JSON object of train, valid and test", path);
  }
  auto split = [&](const char* key) -> common::StatusOr<std::vector<std::string>> {
    std::vector<std::string> words;
    if (!json.contains(key) || json[key].is_null()) return words;
    const common::Json& value = json[key];
    if (value.is_string()) return Words(value.get<std::string>());
    if (!value.is_array()) {
      return common::InvalidArgument("{}: key '{}' is {}, not a list of words or a string", path, key,
                                     value.type_name());
    }
    for (const common::Json& word : value) {
      if (!word.is_string() && !word.is_number()) {
        return common::InvalidArgument("{}: key '{}' holds {}, not a word", path, key, word.type_name());
      }
      words.push_back(word.is_string() ? word.get<std::string>() : word.dump());
    }
    return words;
  };
  PerSplitDataArgs data;
  SRUNWAY_ASSIGN_OR_RETURN(data.train, split("train"));
  SRUNWAY_ASSIGN_OR_RETURN(data.valid, split("valid"));
  SRUNWAY_ASSIGN_OR_RETURN(const std::vector<std::string> test, split("test"));
  if (data.train.empty()) return common::InvalidArgument("{}: no training data (key 'train')", path);
  data.test = !test.empty();
  return data;
}

}  // namespace srunway::trainer
