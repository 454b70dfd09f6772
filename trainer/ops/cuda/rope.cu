// Rotary position embedding (Llama), "rotate half" pairing (or interleaved pairs), in place on the q and k heads of
// qkv, as ops/cpu/rope.cc (the first RotaryDim of each head's dimensions). One thread per (row, head, pair).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

// direction +1 rotates (forward), -1 rotates back (backward); either scales by the attention factor (YaRN's).
__global__ void RopeKernel(bf16* qkv, const int32_t* positions, int T, int H, int KV, int hd, RopeFrequencies rope,
                           float direction, int64_t n) {
  const int rotary = RotaryDim(rope, hd), half = rotary / 2, gap = RopePairGap(rope, half);
  const int heads = H + KV;  // q heads then k heads; v is not rotated
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n; j += int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(j % half);
    const int head = static_cast<int>(j / half % heads);
    const int64_t row = j / half / heads;  // b * T + t
    const int position = positions != nullptr ? positions[row] : static_cast<int>(row % T);
    const float angle = static_cast<float>(position) * RopeInverseFrequency(rope, i, rotary);
    const float cos = rope.attention_factor * cosf(angle), sin = direction * rope.attention_factor * sinf(angle);
    const int64_t at = row * (H + 2 * KV) * hd + int64_t{head} * hd + RopePairFirst(rope, i);
    const float x1 = Load(qkv, at), x2 = Load(qkv, at + gap);
    Store(qkv, at, x1 * cos - x2 * sin);
    Store(qkv, at + gap, x2 * cos + x1 * sin);
  }
}

int Rope(bf16* qkv, const int32_t* positions, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
         float direction, Stream stream) {
  const int64_t n = int64_t{B} * T * (H + KV) * (RotaryDim(rope, hd) / 2);
  if (n <= 0) return 0;
  LaunchKernel(RopeKernel, Blocks(n), kThreads, 0, AsStream(stream), qkv, positions, T, H, KV, hd, rope, direction,
               n);
  return Launched();
}

}  // namespace

int RopeForward(bf16* qkv, const int32_t* positions, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                Stream stream) {
  return Rope(qkv, positions, B, T, H, KV, hd, rope, 1.0f, stream);
}

int RopeBackward(bf16* dqkv, const int32_t* positions, int B, int T, int H, int KV, int hd,
                 const RopeFrequencies& rope, Stream stream) {
  return Rope(dqkv, positions, B, T, H, KV, hd, rope, -1.0f, stream);
}

}  // namespace srunway::trainer::cuda
