// The --dry-run planner's arithmetic.
#include "trainer/train/planner.h"

#include <fmt/format.h>

#include <cmath>

namespace srunway::trainer {

common::StatusOr<Plan> MakePlan(const PlanInput& in) {
  SRUNWAY_RETURN_IF_ERROR(Validate(in.model));
  if (in.nodes < 1 || in.gpus_per_node < 1 || in.micro_batch_size < 1) {
    return common::InvalidArgument("--nodes, --gpus-per-node and --micro-batch-size must be at least 1");
  }
  if (!(in.assume_mfu > 0 && in.assume_mfu <= 1 && in.peak_tflops > 0 && in.gpu_memory_gb > 0 &&
        std::isfinite(in.peak_tflops) && std::isfinite(in.gpu_memory_gb))) {
    return common::InvalidArgument(
        "--assume-mfu must be in (0, 1], --peak-tflops and --gpu-memory-gb positive and finite");
  }
  Plan p;
  p.gpus = in.nodes * in.gpus_per_node;
  const int T = in.seq_length > 0 ? in.seq_length : in.model.seq_len;
  const int64_t step = int64_t{in.micro_batch_size} * p.gpus;  // one micro-batch on every GPU
  int64_t G = in.global_batch_size > 0 ? in.global_batch_size : step;
  if (in.decrease_batch_size && G >= step) G -= G % step;
  if (G % step != 0) {
    return common::InvalidArgument("--global-batch-size {} is not a multiple of --micro-batch-size {} x {} GPUs", G,
                                   in.micro_batch_size, p.gpus);
  }
  p.accumulation = static_cast<int>(G / (int64_t{in.micro_batch_size} * p.gpus));
  p.parameters = ParameterCount(in.model);
  p.flops_per_token = TrainingFlopsPerToken(in.model, T);
  const double n = static_cast<double>(p.parameters);
  const double shards = in.distributed_optimizer ? p.gpus : 1;
  p.weights_bytes = 2 * n;
  p.grads_bytes = 4 * n;
  p.master_bytes = 4 * n / shards;
  p.optimizer_bytes = 8 * n / shards;
  const double sbh = static_cast<double>(T) * in.micro_batch_size * in.model.d_model;
  p.activations_full_bytes = 34 * sbh * in.model.n_layer;
  p.activations_recompute_bytes = 2 * sbh * in.model.n_layer;
  p.activations_bytes = in.recompute_activations ? p.activations_recompute_bytes : p.activations_full_bytes;
  p.logits_bytes = 4.0 * T * in.micro_batch_size * in.model.vocab;
  p.total_bytes = p.weights_bytes + p.grads_bytes + p.master_bytes + p.optimizer_bytes + p.activations_bytes +
                  p.logits_bytes;
  p.fits = p.total_bytes <= in.gpu_memory_gb * 1e9;
  const double tokens_per_step = static_cast<double>(G) * T;
  // Recomputation runs each layer's forward a second time: 8 N instead of 6 N per token, 4/3 of the work.
  const double work = tokens_per_step * p.flops_per_token * (in.recompute_activations ? 4.0 / 3.0 : 1.0);
  p.step_seconds = work / (p.gpus * in.peak_tflops * 1e12 * in.assume_mfu);
  p.tokens_per_second = tokens_per_step / p.step_seconds;
  return p;
}

std::string FormatPlan(const PlanInput& in, const Plan& p) {
  const ModelConfig& m = in.model;
  auto gb = [](double bytes) { return fmt::format("{:.2f} GB", bytes / 1e9); };
  const int T = in.seq_length > 0 ? in.seq_length : m.seq_len;
  std::string out;
  out += fmt::format("model {} ({} layers, hidden {}, heads {}, FFN {}, vocab {}, seq {}): {} parameters ({:.3f} B)\n",
                     ModelKind(m), m.n_layer, m.d_model, m.n_head, m.d_ff, m.vocab, T, p.parameters,
                     p.parameters / 1e9);
  out += fmt::format("FLOPs per token: {:.4g} (6 N + 12 L T d, the MFU formula)\n", p.flops_per_token);
  out += fmt::format("{} GPUs ({} node{} x {}); micro-batch {}, {} accumulation step{} per GPU, global batch {}\n",
                     p.gpus, in.nodes, in.nodes == 1 ? "" : "s", in.gpus_per_node, in.micro_batch_size, p.accumulation,
                     p.accumulation == 1 ? "" : "s", int64_t{p.accumulation} * in.micro_batch_size * p.gpus);
  out += fmt::format("memory per GPU{}:\n", in.distributed_optimizer ? " (distributed optimizer: fp32 parameters and "
                                                                       "AdamW moments sharded over every GPU)"
                                                                     : "");
  out += fmt::format("  bf16 weights          {:>10}\n", gb(p.weights_bytes));
  out += fmt::format("  fp32 gradients        {:>10}\n", gb(p.grads_bytes));
  out += fmt::format("  fp32 parameters       {:>10}  ({})\n", gb(p.master_bytes),
                     in.distributed_optimizer ? fmt::format("1/{} on each GPU", p.gpus) : "whole on every GPU");
  out += fmt::format("  AdamW moments (fp32)  {:>10}\n", gb(p.optimizer_bytes));
  out += fmt::format("  activations           {:>10}  ({} without recomputation, {} with)\n", gb(p.activations_bytes),
                     gb(p.activations_full_bytes), gb(p.activations_recompute_bytes));
  out += fmt::format("  logits (fp32)         {:>10}\n", gb(p.logits_bytes));
  // The numbers given as they were given (80.5 GB is not "80"), and those derived from them short whatever they are
  // ("--assume-mfu 1e-300" made a step of 300 digits).
  auto readable = [](double value, int decimals) {
    return value == 0 || (value >= 0.01 && value < 1e15) ? fmt::format("{:.{}f}", value, decimals)
                                                          : fmt::format("{:.3g}", value);
  };
  out += fmt::format("  total                 {:>10}  {} in {:g} GB\n", gb(p.total_bytes),
                     p.fits ? "fits" : "does NOT fit", in.gpu_memory_gb);
  out += fmt::format("at {:g}% MFU of {:g} TFLOP/s per GPU{}: {} s per step, {} tokens/s ({} per GPU)\n",
                     100 * in.assume_mfu, in.peak_tflops, in.recompute_activations ? " (recomputing each forward)" : "",
                     readable(p.step_seconds, 2), readable(p.tokens_per_second, 0),
                     readable(p.tokens_per_second / p.gpus, 0));
  return out;
}

}  // namespace srunway::trainer
