// Softmax cross-entropy over the vocabulary, fused and in place: logits become probabilities, then gradients.
#include <cmath>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

double SoftmaxCrossEntropyForward(float* logits_to_probs, float* losses, const int32_t* targets, int N, int V) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    float* p = logits_to_probs + int64_t{n} * V;
    float max_logit = -INFINITY;
    for (int v = 0; v < V; ++v) max_logit = std::max(max_logit, p[v]);
    // -log p[target] = log(sum) - (logit[target] - max), exact even where p[target] underflows to 0.
    const bool counted = targets[n] >= 0;  // a negative target: a position without loss (--eod-mask-loss)
    const float target_shifted = counted ? p[targets[n]] - max_logit : 0.0f;
    double sum = 0;
    for (int v = 0; v < V; ++v) {
      p[v] = std::exp(p[v] - max_logit);
      sum += p[v];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int v = 0; v < V; ++v) p[v] *= inv;
    losses[n] = counted ? static_cast<float>(std::log(sum)) - target_shifted : 0.0f;
  }
  double total = 0;  // in row order, whatever the thread count
  for (int n = 0; n < N; ++n) total += losses[n];
  return total / N;
}

void SoftmaxCrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int N, int V, float dloss) {
#pragma omp parallel for
  for (int n = 0; n < N; ++n) {
    float* p = probs_to_dlogits + int64_t{n} * V;
    const float scale = targets[n] >= 0 ? dloss : 0.0f;
    for (int v = 0; v < V; ++v) p[v] *= scale;
    if (targets[n] >= 0) p[targets[n]] -= dloss;
  }
}

}  // namespace srunway::trainer::cpu
