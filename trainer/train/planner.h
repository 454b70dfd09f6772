// srunway-train --dry-run: what a run would need per GPU and how fast it would go, before anyone queues for it.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "trainer/model/config.h"

namespace srunway::trainer {

struct PlanInput {
  ModelConfig model;
  int seq_length = 0;  // 0: the model's
  int nodes = 1;
  int gpus_per_node = 8;
  int micro_batch_size = 1;
  int global_batch_size = 0;  // 0: micro-batch x GPUs
  bool decrease_batch_size = false;  // Megatron's --decrease-batch-size-if-needed (TrainOptions')
  bool distributed_optimizer = false;
  bool recompute_activations = false;
  double assume_mfu = 0.5;
  double peak_tflops = 989;  // dense bf16 of an H100 SXM
  double gpu_memory_gb = 80;
};

// Bytes per GPU, as srunway-train keeps them: bf16 weights 2 B/parameter; fp32 gradients 4 B (accumulated in
// fp32); the fp32 parameters 4 B and AdamW's two moments 8 B, both divided by the data-parallel size under the
// distributed optimizer (ZeRO-1, as Megatron's: it reduces and gathers in place, no more).
// Activations of one micro-batch, per layer (Korthikanti et al. 2022, "Reducing Activation Recomputation", with
// fused attention keeping no s x s scores): 34 s b h bytes; with full recomputation only each layer's input,
// 2 s b h. Plus the logits of the micro-batch in fp32 for the loss (4 s b V).
struct Plan {
  int64_t parameters = 0;
  double flops_per_token = 0;  // the MFU formula: 6 N + 12 L T d
  int gpus = 0;
  int accumulation = 0;        // micro-batches per GPU per step
  double weights_bytes = 0, master_bytes = 0, grads_bytes = 0, optimizer_bytes = 0;
  double activations_bytes = 0;         // as planned (with or without recomputation)
  double activations_full_bytes = 0;    // without recomputation
  double activations_recompute_bytes = 0;
  double logits_bytes = 0;
  double total_bytes = 0;
  bool fits = false;
  double step_seconds = 0, tokens_per_second = 0;
};

common::StatusOr<Plan> MakePlan(const PlanInput& input);
std::string FormatPlan(const PlanInput& input, const Plan& plan);

}  // namespace srunway::trainer
