// Rotary position embedding (Llama), "rotate half" pairing (or interleaved pairs), applied in place to the q and k
// heads of qkv.
#include <vector>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {
namespace {

// direction +1 rotates (forward), -1 rotates back (backward: the transpose of a rotation is its inverse); either
// scales by the attention factor (YaRN's), as Megatron multiplies its cos and sin by it.
void Rotate(float* qkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope, float direction,
            const Documents& docs) {
  const int row = (H + 2 * KV) * hd;
  const int rotary = RotaryDim(rope, hd), half = rotary / 2, gap = RopePairGap(rope, half);
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = RopeInverseFrequency(rope, i, rotary);
#pragma omp parallel for collapse(2)
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int64_t bt = int64_t{b} * T + t;
      float* r = qkv + bt * row;
      const int position = docs.positions != nullptr ? docs.positions[bt] : t;
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(position) * inv_freq[i];
        const float cos = rope.attention_factor * std::cos(angle);
        const float sin = direction * rope.attention_factor * std::sin(angle);
        for (int head = 0; head < H + KV; ++head) {  // q heads then k heads; v is not rotated
          float* x = r + head * hd + RopePairFirst(rope, i);
          const float x1 = x[0], x2 = x[gap];
          x[0] = x1 * cos - x2 * sin;
          x[gap] = x2 * cos + x1 * sin;
        }
      }
    }
  }
}

}  // namespace

void RopeForward(float* qkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                 const Documents& docs) {
  Rotate(qkv, B, T, H, KV, hd, rope, 1.0f, docs);
}

void RopeBackward(float* dqkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                  const Documents& docs) {
  Rotate(dqkv, B, T, H, KV, hd, rope, -1.0f, docs);
}

}  // namespace srunway::trainer::cpu
