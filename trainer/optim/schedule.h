// Learning-rate schedule and gradient clipping.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"

namespace srunway::trainer {

// --lr-decay-style, Megatron's names: cosine, linear, constant, inverse-square-root and WSD.
enum class DecayStyle { kCosine, kLinear, kConstant, kInverseSquareRoot, kWsd };
common::StatusOr<DecayStyle> ParseDecayStyle(std::string_view name);
// --lr-wsd-decay-style: how WSD's final decay falls, Megatron's exponential, linear, cosine and minus_sqrt.
enum class WsdDecay { kExponential, kLinear, kCosine, kMinusSqrt };
common::StatusOr<WsdDecay> ParseWsdDecay(std::string_view name);

// Linear warmup from lr / warmup_steps to lr over warmup_steps (from warmup_init + (lr - warmup_init) / warmup_steps
// with a warmup_init), then decay to min_lr at decay_steps (cosine,
// linear, or none), min_lr after. `step` counts from 0.
// Counted in samples (Megatron's with a batch ramp: warmup_steps and decay_steps are samples), At(done, batch)
// is the rate of the step of `batch` samples after `done`: in the warmup the one its end reaches (as At(step) is
// step + 1's), after it the one its start has, as Megatron's.
// With constant_steps > 0, NeMo's CosineAnnealing with constant_steps (Megatron's warmup, then a constant tail):
// lr * step / warmup_steps up to step warmup_steps, the decay over decay_steps - constant_steps - warmup_steps
// steps, then min_lr for the last constant_steps.
// After the warmup, as Megatron's OptimizerParamScheduler: inverse-square-root is lr x sqrt(warmup / step) (each
// at least 1), not below min_lr, and min_lr past decay_steps; WSD holds lr until its last wsd_decay_steps before
// decay_steps, and falls to min_lr over them as `wsd` says.
struct LrSchedule {
  float lr = 3e-4f;
  float min_lr = 0.0f;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 1;
  DecayStyle style = DecayStyle::kCosine;
  int64_t constant_steps = 0;
  int64_t wsd_decay_steps = 0;  // WSD: its final decay, ending at decay_steps (1 to decay_steps)
  WsdDecay wsd = WsdDecay::kExponential;
  // Megatron's --decoupled-lr and --decoupled-min-lr: the word embeddings' and the untied output layer's own peak
  // and final rates along the same schedule (negative: not given; without the second, min_lr).
  float decoupled_lr = -1, decoupled_min_lr = -1;
  // Megatron's --lr-warmup-init: the warmup rises from this rate to lr (and to decoupled_lr) instead of from 0.
  float warmup_init = 0;

  float At(int64_t step) const { return At(step, 1); }
  float At(int64_t done, int64_t batch) const;
  bool decoupled() const { return decoupled_lr >= 0; }
  // The schedule of those parameters: this one with their rates for lr and min_lr (itself when not decoupled).
  LrSchedule Decoupled() const;

 private:
  // The warmup's rate once `reached` of its warmup_steps are done (1 to warmup_steps).
  float WarmingUp(int64_t reached) const;
};

// Megatron's --weight-decay-incr-style, --start-weight-decay and --end-weight-decay: from start to end over the
// run's `steps` (its steps, or its samples where the schedule counts samples), linearly or along a half cosine
// (Megatron's get_wd); constant is start throughout. `done` counts from 0, as LrSchedule's.
enum class WeightDecayStyle { kConstant, kLinear, kCosine };
common::StatusOr<WeightDecayStyle> ParseWeightDecayStyle(std::string_view name);
struct WeightDecaySchedule {
  float start = 0.01f;
  float end = 0.01f;
  int64_t steps = 1;
  WeightDecayStyle style = WeightDecayStyle::kConstant;

  float At(int64_t done) const;
};

// Megatron's --rampup-batch-size START INCREMENT SAMPLES: the global batch starts at START and grows by INCREMENT
// every SAMPLES / ((GLOBAL - START) / INCREMENT) samples consumed, to GLOBAL once SAMPLES are consumed. The step
// after `consumed` samples takes START + INCREMENT x int(consumed / that share) (its
// RampupBatchsizeNumMicroBatchesCalculator, whose double division this repeats, so that each increase falls on
// the step it falls on there). Without a ramp every step takes GLOBAL.
class BatchRamp {
 public:
  explicit BatchRamp(int64_t global = 1) : start_(global), global_(global) {}
  // Megatron's conditions on the three numbers, and that every batch of the ramp is whole micro-batches of the
  // data-parallel ranks (`micro` x `ranks`).
  static common::StatusOr<BatchRamp> Make(int64_t start, int64_t increment, int64_t samples, int64_t global,
                                          int64_t micro, int64_t ranks);

  bool ramps() const { return start_ < global_; }
  int64_t start() const { return start_; }
  int64_t increment() const { return increment_; }
  int64_t samples() const { return samples_; }
  // The global batch of the step that starts after `consumed` samples.
  int64_t At(int64_t consumed) const;
  // The steps whose samples all fit in `samples` (a partial last batch is not trained, as Megatron's).
  int64_t StepsIn(int64_t samples) const;
  // The samples the first `steps` steps take.
  int64_t SamplesOf(int64_t steps) const;

 private:
  int64_t start_, increment_ = 0, samples_ = 0, global_;
  double samples_per_increment_ = 0;
  int64_t ramp_steps_ = 0, ramp_consumed_ = 0;  // the steps before the batch is GLOBAL, and their samples
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
