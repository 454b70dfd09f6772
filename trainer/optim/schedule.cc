// Warmup + cosine learning rate, global-norm clipping.
#include "trainer/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "trainer/ops/cpu/ordered_sum.h"

namespace srunway::trainer {

common::StatusOr<DecayStyle> ParseDecayStyle(std::string_view name) {
  if (name == "cosine") return DecayStyle::kCosine;
  if (name == "linear") return DecayStyle::kLinear;
  if (name == "constant") return DecayStyle::kConstant;
  if (name == "inverse-square-root") return DecayStyle::kInverseSquareRoot;
  if (name == "WSD") return DecayStyle::kWsd;
  return common::InvalidArgument("--lr-decay-style {}: expected cosine, linear, constant, inverse-square-root or WSD",
                                 name);
}

common::StatusOr<WsdDecay> ParseWsdDecay(std::string_view name) {
  if (name == "exponential") return WsdDecay::kExponential;
  if (name == "linear") return WsdDecay::kLinear;
  if (name == "cosine") return WsdDecay::kCosine;
  if (name == "minus_sqrt") return WsdDecay::kMinusSqrt;
  return common::InvalidArgument("--lr-wsd-decay-style {}: expected exponential, linear, cosine or minus_sqrt", name);
}

namespace {

// The learning rate at `ratio` (0 to 1) of the decay.
double Decayed(DecayStyle style, double lr, double min_lr, double ratio) {
  switch (style) {
    case DecayStyle::kCosine: return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
    case DecayStyle::kLinear: return min_lr + (1.0 - ratio) * (lr - min_lr);
    default: return lr;
  }
}

// WSD's fraction of the way from min_lr to lr at `ratio` (0 to 1) of its final decay.
double WsdCoefficient(WsdDecay wsd, double ratio) {
  switch (wsd) {
    case WsdDecay::kExponential: return 2.0 * std::pow(0.5, ratio) - 1.0;
    case WsdDecay::kLinear: return 1.0 - ratio;
    case WsdDecay::kCosine: return 0.5 * (1.0 + std::cos(M_PI * ratio));
    case WsdDecay::kMinusSqrt: return 1.0 - std::sqrt(ratio);
  }
  return 1.0;
}

}  // namespace

LrSchedule LrSchedule::Decoupled() const {
  if (!decoupled()) return *this;
  LrSchedule theirs = *this;
  theirs.lr = decoupled_lr;
  theirs.min_lr = decoupled_min_lr >= 0 ? decoupled_min_lr : min_lr;
  theirs.decoupled_lr = theirs.decoupled_min_lr = -1;
  return theirs;
}

float LrSchedule::WarmingUp(int64_t reached) const {
  // llm.c's warmup in floats; NeMo's (constant_steps) and one from warmup_init in doubles, as Python computes them.
  if (warmup_init == 0 && constant_steps == 0) {
    return lr * static_cast<float>(reached) / static_cast<float>(warmup_steps);
  }
  const double init = warmup_init;
  return static_cast<float>(init + (static_cast<double>(lr) - init) * static_cast<double>(reached) /
                                       static_cast<double>(warmup_steps));
}

float LrSchedule::At(int64_t done, int64_t batch) const {
  if (constant_steps > 0) {  // NeMo's, in steps
    const int64_t step = done;
    const int64_t decay = std::max<int64_t>(1, decay_steps - constant_steps - warmup_steps);
    if (warmup_steps > 0 && step <= warmup_steps) return WarmingUp(step);
    if (step > warmup_steps + decay) return style == DecayStyle::kConstant ? lr : min_lr;
    return static_cast<float>(Decayed(style, lr, min_lr, static_cast<double>(step - warmup_steps) / static_cast<double>(decay)));
  }
  if (done + batch <= warmup_steps) return WarmingUp(done + batch);
  if (style == DecayStyle::kConstant) return lr;
  if (style == DecayStyle::kInverseSquareRoot) {  // Megatron's min_lr starts past decay_steps here
    if (done > decay_steps) return min_lr;
    const double warmup = static_cast<double>(std::max<int64_t>(warmup_steps, 1));
    const double now = static_cast<double>(std::max<int64_t>(done, 1));
    return std::max(min_lr, static_cast<float>(static_cast<double>(lr) * std::sqrt(warmup / now)));
  }
  if (done >= decay_steps) return min_lr;
  if (style == DecayStyle::kWsd) {  // counted from the start, not from the warmup's end, as Megatron's
    const int64_t anneal_start = decay_steps - wsd_decay_steps;
    if (done <= anneal_start) return lr;
    const double ratio = static_cast<double>(done - anneal_start) / static_cast<double>(wsd_decay_steps);
    return static_cast<float>(min_lr + WsdCoefficient(wsd, ratio) * (static_cast<double>(lr) - min_lr));
  }
  if (decay_steps <= warmup_steps) return lr;  // a step of samples across the end of both
  // A step of samples across the warmup's end starts the decay at its top.
  const double ratio = std::max<double>(0, static_cast<double>(done - warmup_steps)) /
                       static_cast<double>(decay_steps - warmup_steps);
  return static_cast<float>(Decayed(style, lr, min_lr, ratio));
}

common::StatusOr<WeightDecayStyle> ParseWeightDecayStyle(std::string_view name) {
  if (name == "constant") return WeightDecayStyle::kConstant;
  if (name == "linear") return WeightDecayStyle::kLinear;
  if (name == "cosine") return WeightDecayStyle::kCosine;
  return common::InvalidArgument("--weight-decay-incr-style {}: expected constant, linear or cosine", name);
}

float WeightDecaySchedule::At(int64_t done) const {
  if (style == WeightDecayStyle::kConstant) return start;
  if (done > steps) return end;
  const double ratio = static_cast<double>(done) / static_cast<double>(std::max<int64_t>(steps, 1));
  const double coeff = style == WeightDecayStyle::kLinear ? ratio : 0.5 * (std::cos(M_PI * (1.0 - ratio)) + 1.0);
  return static_cast<float>(start + coeff * (static_cast<double>(end) - start));
}

// The ramp's steps are walked one by one (Megatron's update_train_iters does so too); this many at most.
constexpr int64_t kMostRampSteps = 100'000'000;

common::StatusOr<BatchRamp> BatchRamp::Make(int64_t start, int64_t increment, int64_t samples, int64_t global,
                                            int64_t micro, int64_t ranks) {
  const std::string given = fmt::format("--rampup-batch-size {} {} {}", start, increment, samples);
  if (start < 1 || increment < 1 || samples < 1) {
    return common::InvalidArgument("{}: the start batch, its increment and the ramp's samples must each be at least 1",
                                   given);
  }
  if (start > global || (global - start) % increment != 0) {
    return common::InvalidArgument("{}: --global-batch-size {} is not the start batch plus a whole number of "
                                   "increments", given, global);
  }
  const int64_t unit = micro * ranks;
  if (const int64_t odd = start % unit != 0 ? start : start + increment; start < global && odd % unit != 0) {
    return common::InvalidArgument("{}: its batch of {} is not a multiple of --micro-batch-size {} x {} "
                                   "data-parallel rank{}", given, odd, micro, ranks, ranks == 1 ? "" : "s");
  }
  if (samples / start >= kMostRampSteps) {
    return common::InvalidArgument("{}: the ramp takes more than {} steps", given, kMostRampSteps);
  }
  BatchRamp ramp(global);
  if (start == global) return ramp;  // no increment to make (Megatron divides by zero)
  ramp.start_ = start;
  ramp.increment_ = increment;
  ramp.samples_ = samples;
  ramp.samples_per_increment_ = static_cast<double>(samples) / static_cast<double>((global - start) / increment);
  while (ramp.ramp_consumed_ <= samples) {
    ramp.ramp_consumed_ += ramp.At(ramp.ramp_consumed_);
    ++ramp.ramp_steps_;
  }
  return ramp;
}

int64_t BatchRamp::At(int64_t consumed) const {
  if (!ramps() || consumed > samples_) return global_;
  const auto increments = static_cast<int64_t>(static_cast<double>(consumed) / samples_per_increment_);
  return std::min(global_, start_ + increments * increment_);
}

int64_t BatchRamp::StepsIn(int64_t samples) const {
  if (samples >= ramp_consumed_) return ramp_steps_ + (samples - ramp_consumed_) / global_;
  int64_t steps = 0;
  for (int64_t done = 0; done + At(done) <= samples; done += At(done)) ++steps;
  return steps;
}

int64_t BatchRamp::SamplesOf(int64_t steps) const {
  if (steps >= ramp_steps_) return ramp_consumed_ + (steps - ramp_steps_) * global_;
  int64_t done = 0;
  for (int64_t step = 0; step < steps; ++step) done += At(done);
  return done;
}

double SumOfSquares(std::span<const float> values) {
  // Fixed blocks of 4096 values added in order: the same sum for any thread count.
  constexpr int64_t kBlock = 4096;
  const int64_t n = static_cast<int64_t>(values.size());
  const std::vector<double> sum = cpu::OrderedRowSums<double>((n + kBlock - 1) / kBlock, 1, [&](int64_t block, double* s) {
    const int64_t end = std::min(n, (block + 1) * kBlock);
    for (int64_t i = block * kBlock; i < end; ++i) *s += static_cast<double>(values[i]) * values[i];
  });
  return sum[0];
}

double GlobalNorm(std::span<const float> grads) { return std::sqrt(SumOfSquares(grads)); }

float ClipScale(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  return std::min(1.0f, static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6))));
}

float ClipByGlobalNorm(std::span<float> grads, double norm, double max_norm) {
  const float scale = ClipScale(norm, max_norm);
  if (scale >= 1.0f) return 1.0f;
  const int64_t n = static_cast<int64_t>(grads.size());
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) grads[i] *= scale;
  return scale;
}

}  // namespace srunway::trainer
