// What the two tiled attention implementations share (flash_attention.cu on WMMA, flash_attention_mma.cu on
// mma.sync): the shape of a call, the tiles in shared memory, the dropout decision, and the mma.sync kernels'
// entry points, which flash_attention.cu's FlashAttentionForward/Backward call unless SRUNWAY_ATTENTION=wmma.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda::flash {

using Half = __nv_bfloat16;

constexpr int kTile = 64;   // query rows per forward block, keys per backward block, and the other tile
constexpr int kWarps = 4;   // each owns 16 rows of a tile
constexpr int kTileThreads = kWarps * kWarp;
template <int hd> constexpr int kLd = hd + 8;  // bf16 q/k/v/dout rows in shared memory: 16 bytes of padding

struct Dims {
  int B, T, H, KV;
  float scale, p, keep_scale;
  uint64_t key;
  int64_t first_index;
  // [B, T]: the first key each query attends to, non-decreasing along a sequence (several documents in it); null:
  // 0. The mma.sync kernels alone take it.
  const int32_t* starts;
  const bf16* sinks;  // [H]: each head's sink score (--softmax-type); null: none
};

inline Dims MakeDims(int B, int T, int H, int KV, int hd, float p, uint64_t key, int64_t first_index,
                     const int32_t* starts, const bf16* sinks = nullptr) {
  return {B,   T,   H, KV, 1.0f / sqrtf(static_cast<float>(hd)), p, p > 0 ? 1.0f / (1.0f - p) : 1.0f,
          key, first_index, starts, sinks};
}

// Issues the cp.async copies of rows [row0, row0 + kTile) of one head into shared memory [kTile][kLd], 16 bytes
// each, zeros past T, shared out over a block of kTileThreads. They land once each thread has waited for them
// (WaitCopies, or LandCopies) and the block has met at a barrier. A tile's copies are all in flight at once: the
// loop of loads and stores this replaces waited for each load in turn (a store might alias the next load). Not
// unrolled: nothing in it waits, and unrolled it kept every copy's address in registers (ptxas: 128 -> 167 for
// the mma.sync forward at head size 64, one block less per multiprocessor).
template <int hd>
__device__ inline void CopyTile(Half* dst, const Half* src, int64_t stride, int row0, int T) {
  constexpr int kChunks = hd / 8;
  static_assert(kTile * kChunks % kTileThreads == 0, "every thread copies as many chunks");
#pragma unroll 1
  for (int j = 0; j < kTile * kChunks / kTileThreads; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * kTileThreads, r = i / kChunks, c = i % kChunks * 8;
    const bool valid = row0 + r < T;
    CopyAsync<16>(dst + r * kLd<hd> + c, src + (valid ? row0 + r : 0) * stride + c, valid);
  }
}

// Commits the calling thread's copies and waits for all of them.
__device__ __forceinline__ void LandCopies() {
  CommitCopies();
  WaitCopies<0>();
}

// Two floats as the bf16 pair of one 32-bit word, the first in the low half.
__device__ __forceinline__ uint32_t Pack(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// Whether attention dropout keeps the probability of (query, key) in head bh: the CPU's mask at the CPU's index.
__device__ __forceinline__ bool Keeps(const Dims& d, int64_t bh, int query, int key) {
  return DropoutKeeps(d.key, static_cast<uint64_t>(d.first_index + (bh * d.T + query) * d.T + key), d.p);
}

// Calls launch(std::integral_constant<int, hd>) for the head sizes the tiled kernels are built for.
template <typename Launch>
int ForTiledHeadSize(int hd, Launch launch) {
  switch (hd) {
    case 16: return launch(std::integral_constant<int, 16>{});
    case 32: return launch(std::integral_constant<int, 32>{});
    case 64: return launch(std::integral_constant<int, 64>{});
    case 96: return launch(std::integral_constant<int, 96>{});
    case 128: return launch(std::integral_constant<int, 128>{});
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

// flash_attention_mma.cu, launched on `stream` (0, or the CUDA error). The forward writes out and lse; the
// backward adds the gradients into dq [B, T, H, hd], dk and dv [B, T, KV, hd] (fp32, zeroed by the caller),
// given D = rowsum(dO o O) [B, H, T].
int MmaForward(bf16* out, float* lse, const bf16* qkv, const Dims& d, int hd, cudaStream_t stream);
// dqkv non-null (KV == H): dK and dV go straight to dqkv in bf16, and dk and dv are not touched.
int MmaBackward(float* dq, float* dk, float* dv, bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                const float* D, const Dims& d, int hd, cudaStream_t stream);

}  // namespace srunway::trainer::cuda::flash
