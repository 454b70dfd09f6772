// Learning-rate schedule and gradient clipping.
#pragma once

#include <cstdint>
#include <span>

namespace srunway::trainer {

// Linear warmup from lr / warmup_steps to lr over warmup_steps, then cosine decay to min_lr at decay_steps,
// min_lr after. `step` counts from 0.
struct LrSchedule {
  float lr = 3e-4f;
  float min_lr = 0.0f;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;

  float At(int64_t step) const;
};

// The L2 norm of all gradients together (double accumulation).
double GlobalNorm(std::span<const float> grads);
// The sum of squares GlobalNorm takes the root of (ZeRO-1 ranks add theirs across ranks), in a fixed order.
double SumOfSquares(std::span<const float> values);

// torch.nn.utils.clip_grad_norm_: scales grads by max_norm / (norm + 1e-6) when that is below 1.
// Returns the scale applied (1 when nothing was clipped or max_norm <= 0, which turns clipping off).
float ClipByGlobalNorm(std::span<float> grads, double norm, double max_norm);

}  // namespace srunway::trainer
