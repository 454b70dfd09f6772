// Warmup + cosine learning rate, global-norm clipping.
#include "trainer/optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "trainer/ops/cpu/ordered_sum.h"

namespace srunway::trainer {

common::StatusOr<DecayStyle> ParseDecayStyle(std::string_view name) {
  if (name == "cosine") return DecayStyle::kCosine;
  if (name == "linear") return DecayStyle::kLinear;
  if (name == "constant") return DecayStyle::kConstant;
  return common::InvalidArgument("--lr-decay-style {}: expected cosine, linear or constant", name);
}

namespace {

// The learning rate at `ratio` (0 to 1) of the decay.
double Decayed(DecayStyle style, double lr, double min_lr, double ratio) {
  switch (style) {
    case DecayStyle::kCosine: return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
    case DecayStyle::kLinear: return min_lr + (1.0 - ratio) * (lr - min_lr);
    case DecayStyle::kConstant: return lr;
  }
  return lr;
}

}  // namespace

float LrSchedule::At(int64_t step) const {
  if (constant_steps > 0) {
    const int64_t decay = std::max<int64_t>(1, decay_steps - constant_steps - warmup_steps);
    if (warmup_steps > 0 && step <= warmup_steps) {
      return static_cast<float>(static_cast<double>(lr) * static_cast<double>(step) / static_cast<double>(warmup_steps));
    }
    if (step > warmup_steps + decay) return style == DecayStyle::kConstant ? lr : min_lr;
    return static_cast<float>(Decayed(style, lr, min_lr, static_cast<double>(step - warmup_steps) / static_cast<double>(decay)));
  }
  if (step < warmup_steps) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  if (style == DecayStyle::kConstant) return lr;
  if (step >= decay_steps) return min_lr;
  const double ratio = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return static_cast<float>(Decayed(style, lr, min_lr, ratio));
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
