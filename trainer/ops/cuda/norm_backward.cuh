// The backward of a norm over rows of C (LayerNorm, RMSNorm): each row's input gradient, added into dinp, and the
// per-column parameter gradients, added into the norm's. Grads says what the norm computes: its per-row statistics
// (Stats, a warp's sums over the row) and, per element, dinp's increment and the element's shares of the column
// sums (Element). Block b takes rows 64 b ... 64 b + 63, warp w of them rows w, w + 8, ...: the warp first takes
// its 8 rows' statistics, then walks the row in slabs of 256 columns, each lane summing its 8 columns over the 8
// rows in registers, and adds each sum to the block's shared sums once (not once per element: with an atomic add
// per element, eight warps contending for each column, the LayerNorm backward took 4 times the forward's time on an
// H200); the block adds its sums to the parameter gradients once per column.
#pragma once

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {

inline constexpr int kNormWarps = kThreads / kWarp;
inline constexpr int kNormRowsPerWarp = 8;
inline constexpr int kNormBlockRows = kNormWarps * kNormRowsPerWarp;
inline constexpr int kNormColumnsPerLane = 8;
inline constexpr int kNormColumnsInFlight = 4;

template <typename Grads>
__global__ void __launch_bounds__(kThreads, 3) NormBackwardKernel(Grads grads, bf16* dinp, int N, int C) {
  constexpr int kSums = Grads::kSums;
  float* sums = DynamicShared<float>();  // [kSums][C]: this block's rows
  for (int i = threadIdx.x; i < kSums * C; i += blockDim.x) sums[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % kWarp;
  const int first = blockIdx.x * kNormBlockRows + threadIdx.x / kWarp;
  typename Grads::Row rows[kNormRowsPerWarp] = {};
#pragma unroll
  for (int i = 0; i < kNormRowsPerWarp; ++i) {
    const int row = first + i * kNormWarps;
    if (row < N) rows[i] = grads.Stats(row, lane, C);
  }
  for (int slab = 0; slab < C; slab += kWarp * kNormColumnsPerLane) {
    float shares[kNormColumnsPerLane][kSums] = {};
#pragma unroll
    for (int i = 0; i < kNormRowsPerWarp; ++i) {
      const int row = first + i * kNormWarps;
      if (row >= N) break;
      const int64_t base = int64_t{row} * C;
      // Loads first, then stores, kNormColumnsInFlight columns at a time: a store the compiler must assume may
      // alias a later load held each element's loads back until the last element's store was issued, one memory
      // latency per element.
#pragma unroll
      for (int j0 = 0; j0 < kNormColumnsPerLane; j0 += kNormColumnsInFlight) {
        float updated[kNormColumnsInFlight];
#pragma unroll
        for (int j = j0; j < j0 + kNormColumnsInFlight; ++j) {
          const int c = slab + lane + kWarp * j;
          if (c < C) updated[j - j0] = Load(dinp, base + c) + grads.Element(base + c, c, rows[i], shares[j]);
        }
#pragma unroll
        for (int j = j0; j < j0 + kNormColumnsInFlight; ++j) {
          const int c = slab + lane + kWarp * j;
          if (c < C) Store(dinp, base + c, updated[j - j0]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kNormColumnsPerLane; ++j) {
      const int c = slab + lane + kWarp * j;
      if (c >= C) continue;
      for (int k = 0; k < kSums; ++k) atomicAdd(&sums[k * C + c], shares[j][k]);
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kSums; ++k) {
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&grads.out[k][c], sums[k * C + c]);
  }
}

// Queues the backward of `grads`' norm over N rows of C on `stream`.
template <typename Grads>
int LaunchNormBackward(const Grads& grads, bf16* dinp, int N, int C, Stream stream) {
  if (N <= 0) return 0;
  const size_t shared = sizeof(float) * Grads::kSums * static_cast<size_t>(C);
  if (int rc = AllowSharedMemory(NormBackwardKernel<Grads>, shared); rc != 0) return rc;
  const unsigned blocks = static_cast<unsigned>((N + kNormBlockRows - 1) / kNormBlockRows);
  LaunchKernel(NormBackwardKernel<Grads>, blocks, kThreads, shared, AsStream(stream), grads, dinp, N, C);
  return Launched();
}

}  // namespace srunway::trainer::cuda
