// Learning-rate schedule and gradient clipping.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"

namespace srunway::trainer {

enum class DecayStyle { kCosine, kLinear, kConstant };  // --lr-decay-style, Megatron's names
common::StatusOr<DecayStyle> ParseDecayStyle(std::string_view name);

// Linear warmup from lr / warmup_steps to lr over warmup_steps, then decay to min_lr at decay_steps (cosine,
// linear, or none), min_lr after. `step` counts from 0.
// With constant_steps > 0, NeMo's CosineAnnealing with constant_steps (Megatron's warmup, then a constant tail):
// lr * step / warmup_steps up to step warmup_steps, the decay over decay_steps - constant_steps - warmup_steps
// steps, then min_lr for the last constant_steps.
struct LrSchedule {
  float lr = 3e-4f;
  float min_lr = 0.0f;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;
  DecayStyle style = DecayStyle::kCosine;
  int64_t constant_steps = 0;

  float At(int64_t step) const;
};

// The L2 norm of all gradients together (double accumulation).
double GlobalNorm(std::span<const float> grads);
// The sum of squares GlobalNorm takes the root of (ZeRO-1 ranks add theirs across ranks), in a fixed order.
double SumOfSquares(std::span<const float> values);

// torch.nn.utils.clip_grad_norm_'s factor: max_norm / (norm + 1e-6) when that is below 1, else 1 (also when
// max_norm <= 0, which turns clipping off). AdamW::Step takes it as its gradient scale.
float ClipScale(double norm, double max_norm);
// Scales grads by ClipScale in place and returns it.
float ClipByGlobalNorm(std::span<float> grads, double norm, double max_norm);

}  // namespace srunway::trainer
