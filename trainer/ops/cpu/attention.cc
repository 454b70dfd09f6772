// Causal multi-head attention with grouped-query heads: softmax(q k^T / sqrt(hd)) v, row by row; with documents,
// each query row over the keys of its own document only; with sinks, over one more key of each head's sink score
// and value 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {
namespace {

float Dot(const float* a, const float* b, int n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int H, int KV, int hd,
                      const DropoutSite& dropout, const Documents& docs, const float* sinks) {
  const float keep_scale = dropout.p > 0 ? 1.0f / (1.0f - dropout.p) : 1.0f;
  const int row = (H + 2 * KV) * hd;
  const int group = H / KV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
#pragma omp parallel for collapse(3)
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      for (int t = 0; t < T; ++t) {
        const float* base = qkv + int64_t{b} * T * row;
        const float* q = base + int64_t{t} * row + h * hd;
        const int kv = h / group;
        float* a = att + ((int64_t{b} * H + h) * T + t) * T;
        const int first = docs.starts != nullptr ? docs.starts[int64_t{b} * T + t] : 0;
        const float sink = sinks != nullptr ? sinks[h] : -INFINITY;
        float max_score = sink;
        for (int t2 = 0; t2 < first; ++t2) a[t2] = 0.0f;
        for (int t2 = first; t2 <= t; ++t2) {
          const float* k = base + int64_t{t2} * row + (H + kv) * hd;
          a[t2] = Dot(q, k, hd) * scale;
          max_score = std::max(max_score, a[t2]);
        }
        float sum = std::exp(sink - max_score);  // 0 without a sink
        for (int t2 = first; t2 <= t; ++t2) {
          a[t2] = std::exp(a[t2] - max_score);
          sum += a[t2];
        }
        const float inv = 1.0f / sum;
        for (int t2 = first; t2 <= t; ++t2) a[t2] *= inv;
        for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
        float* o = out + (int64_t{b} * T + t) * H * hd + h * hd;
        for (int i = 0; i < hd; ++i) o[i] = 0.0f;
        const int64_t index = ((int64_t{b} * H + h) * T + t) * T;
        for (int t2 = first; t2 <= t; ++t2) {
          const float* v = base + int64_t{t2} * row + (H + KV + kv) * hd;
          float w = a[t2];
          if (dropout.p > 0) {
            w = DropoutKeeps(dropout.key, static_cast<uint64_t>(dropout.first_index + index + t2), dropout.p)
                    ? w * keep_scale : 0.0f;
          }
#pragma omp simd
          for (int i = 0; i < hd; ++i) o[i] += w * v[i];
        }
      }
    }
  }
}

void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int H, int KV,
                       int hd, const DropoutSite& dropout, const Documents& docs, float* dsinks) {
  const float keep_scale = dropout.p > 0 ? 1.0f / (1.0f - dropout.p) : 1.0f;
  const int row = (H + 2 * KV) * hd;
  const int group = H / KV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Each (batch, head)'s part of dsinks, added up in order after the loop: the same sums every run.
  std::vector<float> sink_parts(dsinks != nullptr ? static_cast<size_t>(B) * H : 0);
  // One thread owns a (batch, kv head) pair: the k and v gradients of that head and the q gradients of its group
  // are written by nobody else.
#pragma omp parallel
  {
    std::vector<float> datt(T);
#pragma omp for collapse(2)
    for (int b = 0; b < B; ++b) {
      for (int kv = 0; kv < KV; ++kv) {
        const float* base = qkv + int64_t{b} * T * row;
        float* dbase = dqkv + int64_t{b} * T * row;
        // This pair's part of dqkv starts from zero: the q heads of its group, its k and v head.
        for (int t = 0; t < T; ++t) {
          float* drow = dbase + int64_t{t} * row;
          std::fill_n(drow + kv * group * hd, group * hd, 0.0f);
          std::fill_n(drow + (H + kv) * hd, hd, 0.0f);
          std::fill_n(drow + (H + KV + kv) * hd, hd, 0.0f);
        }
        for (int h = kv * group; h < (kv + 1) * group; ++h) {
          for (int t = 0; t < T; ++t) {
            const float* a = att + ((int64_t{b} * H + h) * T + t) * T;
            const float* d = dout + (int64_t{b} * T + t) * H * hd + h * hd;
            // Through out = m a v (m: the dropout mask and scale): dv += m a d and d a = m (v . d).
            const int64_t index = ((int64_t{b} * H + h) * T + t) * T;
            const int first = docs.starts != nullptr ? docs.starts[int64_t{b} * T + t] : 0;
            float weighted = 0, seen = 0;  // seen: the keys' probabilities, 1 less the sink's
            for (int t2 = first; t2 <= t; ++t2) {
              const float* v = base + int64_t{t2} * row + (H + KV + kv) * hd;
              float* dv = dbase + int64_t{t2} * row + (H + KV + kv) * hd;
              float m = 1.0f;
              if (dropout.p > 0) {
                m = DropoutKeeps(dropout.key, static_cast<uint64_t>(dropout.first_index + index + t2), dropout.p)
                        ? keep_scale : 0.0f;
              }
              const float w = a[t2] * m;
#pragma omp simd
              for (int i = 0; i < hd; ++i) dv[i] += w * d[i];
              datt[t2] = m * Dot(v, d, hd);
              weighted += a[t2] * datt[t2];
              seen += a[t2];
            }
            // The sink's score, with d(att) 0 (its value is 0): d(sink) = p_sink (0 - weighted).
            if (dsinks != nullptr) sink_parts[static_cast<size_t>(b) * H + h] -= (1.0f - seen) * weighted;
            // Through the softmax, then the scaled q k^T.
            const float* q = base + int64_t{t} * row + h * hd;
            float* dq = dbase + int64_t{t} * row + h * hd;
            for (int t2 = first; t2 <= t; ++t2) {
              const float dscore = a[t2] * (datt[t2] - weighted) * scale;
              const float* k = base + int64_t{t2} * row + (H + kv) * hd;
              float* dk = dbase + int64_t{t2} * row + (H + kv) * hd;
#pragma omp simd
              for (int i = 0; i < hd; ++i) {
                dq[i] += dscore * k[i];
                dk[i] += dscore * q[i];
              }
            }
          }
        }
      }
    }
  }
  if (dsinks == nullptr) return;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) dsinks[h] += sink_parts[static_cast<size_t>(b) * H + h];
  }
}

}  // namespace srunway::trainer::cpu
