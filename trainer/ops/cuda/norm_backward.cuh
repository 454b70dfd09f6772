// The backward of a norm over rows of C (LayerNorm, RMSNorm): each row's input gradient, added into dinp, and the
// per-column parameter gradients, added into the norm's. Grads says what the norm computes from an element's input
// x, output gradient d and weight w: its per-row statistics (Begin, Accumulate over the lane's elements, Finish
// over the warp) and, per element, dinp's increment and the element's shares of the column sums (Element). Block b
// takes rows 64 b ... 64 b + 63, warp w of them rows w, w + 8, ...; the warp walks its rows in slabs of 256
// columns, each lane taking 8 of them: 8 side by side, read and written 16 bytes at a time, where the rows allow
// it (kVector: C a multiple of 8, aligned tensors), else every 32nd, one bf16 at a time. Each lane sums its columns'
// shares over the warp's 8 rows in registers and adds them to the block's shared sums once (not once per element:
// with an atomic add per element, eight warps contending for each column, the LayerNorm backward took 4 times the
// forward's time on an H200); the block adds its sums to the parameter gradients once per column. The tensors are
// __restrict__: dinp (the residual stream's gradient) is never the norm's input or output gradient, so the next
// row's loads need not wait for this row's stores. The forwards (layernorm.cu, rmsnorm.cu) walk their rows by the
// same columns (NormColumn, LoadNormColumns, StoreNormColumns).
#pragma once

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {

inline constexpr int kNormWarps = kThreads / kWarp;
inline constexpr int kNormRowsPerWarp = 8;
inline constexpr int kNormBlockRows = kNormWarps * kNormRowsPerWarp;
inline constexpr int kNormColumnsPerLane = kPack;
inline constexpr int kNormSlab = kWarp * kNormColumnsPerLane;

// Column j of a lane's kNormColumnsPerLane in the slab starting at `slab`.
template <bool kVector>
__device__ __forceinline__ int NormColumn(int slab, int lane, int j) {
  return kVector ? slab + lane * kNormColumnsPerLane + j : slab + lane + kWarp * j;
}

// A lane's columns of the row starting at `row` (0 past C).
template <bool kVector>
__device__ __forceinline__ void LoadNormColumns(const bf16* row, int slab, int lane, int C,
                                                float (&values)[kNormColumnsPerLane]) {
  if constexpr (kVector) {
    const int c = NormColumn<true>(slab, lane, 0);  // C is a multiple of 8: all 8 columns or none
    Pack8 pack;
    pack.raw = c < C ? *reinterpret_cast<const uint4*>(row + c) : uint4{};
    Unpack(pack, values);
  } else {
#pragma unroll
    for (int j = 0; j < kNormColumnsPerLane; ++j) {
      const int c = NormColumn<false>(slab, lane, j);
      values[j] = c < C ? Load(row, c) : 0.0f;
    }
  }
}

template <bool kVector>
__device__ __forceinline__ void StoreNormColumns(bf16* row, int slab, int lane, int C,
                                                 const float (&values)[kNormColumnsPerLane]) {
  if constexpr (kVector) {
    const int c = NormColumn<true>(slab, lane, 0);
    if (c >= C) return;
    Pack8 pack;
#pragma unroll
    for (int j = 0; j < kPack / 2; ++j) pack.pairs[j] = __floats2bfloat162_rn(values[2 * j], values[2 * j + 1]);
    *reinterpret_cast<uint4*>(row + c) = pack.raw;
  } else {
#pragma unroll
    for (int j = 0; j < kNormColumnsPerLane; ++j) {
      const int c = NormColumn<false>(slab, lane, j);
      if (c < C) Store(row, c, values[j]);
    }
  }
}

// The forwards' fused residual add: a lane's columns of row = a + b (rounded to bf16, as ResidualForward writes it).
template <bool kVector>
__device__ __forceinline__ void StoreResidualRow(bf16* row, const bf16* a, const bf16* b, int lane, int C) {
  float x[kNormColumnsPerLane], y[kNormColumnsPerLane];
  for (int slab = 0; slab < C; slab += kNormSlab) {
    LoadNormColumns<kVector>(a, slab, lane, C, x);
    LoadNormColumns<kVector>(b, slab, lane, C, y);
    for (int j = 0; j < kNormColumnsPerLane; ++j) x[j] += y[j];
    StoreNormColumns<kVector>(row, slab, lane, C, x);
  }
}

template <typename Grads, bool kVector>
__global__ void __launch_bounds__(kThreads, 3)
    NormBackwardKernel(Grads grads, bf16* __restrict__ dinp, const bf16* __restrict__ dout,
                       const bf16* __restrict__ inp, const bf16* __restrict__ weight, int N, int C) {
  constexpr int kSums = Grads::kSums;
  float* sums = DynamicShared<float>();  // [kSums][C]: this block's rows
  // The rows' statistics, warp w's at [8 w, 8 w + 8): in shared memory, not in registers through the second walk.
  __shared__ typename Grads::Row block_stats[kNormBlockRows];
  for (int i = threadIdx.x; i < kSums * C; i += blockDim.x) sums[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp, first = blockIdx.x * kNormBlockRows + warp;
  const int rows = N - first <= 0 ? 0 : min(kNormRowsPerWarp, (N - first + kNormWarps - 1) / kNormWarps);
  float x[kNormColumnsPerLane], d[kNormColumnsPerLane], w[kNormColumnsPerLane];
  typename Grads::Row stats[kNormRowsPerWarp] = {};
  // The rows' statistics: each slab's weights once, then its columns of every row.
#pragma unroll
  for (int i = 0; i < kNormRowsPerWarp; ++i) {
    if (i < rows) stats[i] = grads.Begin(first + i * kNormWarps);
  }
  for (int slab = 0; slab < C; slab += kNormSlab) {
    LoadNormColumns<kVector>(weight, slab, lane, C, w);
#pragma unroll
    for (int i = 0; i < kNormRowsPerWarp; ++i) {
      if (i >= rows) break;
      const int64_t base = int64_t{first + i * kNormWarps} * C;
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);
      LoadNormColumns<kVector>(dout + base, slab, lane, C, d);
#pragma unroll
      for (int j = 0; j < kNormColumnsPerLane; ++j) {
        if (NormColumn<kVector>(slab, lane, j) < C) grads.Accumulate(stats[i], x[j], d[j], w[j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kNormRowsPerWarp; ++i) {
    if (i >= rows) break;
    grads.Finish(stats[i], C);
    if (lane == 0) block_stats[warp * kNormRowsPerWarp + i] = stats[i];
  }
  __syncwarp();
  // The input gradients, and the column sums.
  for (int slab = 0; slab < C; slab += kNormSlab) {
    LoadNormColumns<kVector>(weight, slab, lane, C, w);
    float shares[kNormColumnsPerLane][kSums] = {};
#pragma unroll
    for (int i = 0; i < kNormRowsPerWarp; ++i) {
      if (i >= rows) break;
      const int64_t base = int64_t{first + i * kNormWarps} * C;
      float updated[kNormColumnsPerLane];
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);
      LoadNormColumns<kVector>(dout + base, slab, lane, C, d);
      LoadNormColumns<kVector>(dinp + base, slab, lane, C, updated);
      const typename Grads::Row row = block_stats[warp * kNormRowsPerWarp + i];
#pragma unroll
      for (int j = 0; j < kNormColumnsPerLane; ++j) updated[j] += grads.Element(x[j], d[j], w[j], row, shares[j]);
      StoreNormColumns<kVector>(dinp + base, slab, lane, C, updated);
    }
#pragma unroll
    for (int j = 0; j < kNormColumnsPerLane; ++j) {
      const int c = NormColumn<kVector>(slab, lane, j);
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
int LaunchNormBackward(const Grads& grads, bf16* dinp, const bf16* dout, const bf16* inp, const bf16* weight, int N,
                       int C, Stream stream) {
  if (N <= 0) return 0;
  const size_t shared = sizeof(float) * Grads::kSums * static_cast<size_t>(C);
  const unsigned blocks = static_cast<unsigned>((N + kNormBlockRows - 1) / kNormBlockRows);
  auto launch = [&](auto kernel) {
    if (int rc = AllowSharedMemory(kernel, shared); rc != 0) return rc;
    LaunchKernel(kernel, blocks, kThreads, shared, AsStream(stream), grads, dinp, dout, inp, weight, N, C);
    return Launched();
  };
  const bool vector = Vectorizable(dinp, C) && Vectorizable(dout, C) && Vectorizable(inp, C) && Vectorizable(weight, C);
  return vector ? launch(NormBackwardKernel<Grads, true>) : launch(NormBackwardKernel<Grads, false>);
}

}  // namespace srunway::trainer::cuda
