// The backward of a norm over rows of C (LayerNorm, RMSNorm): each row's input gradient, added into dinp, and the
// per-column parameter gradients, added into the norm's. Grads says what the norm computes from an element's input
// x, output gradient d and weight w: its per-row statistics (Begin, Accumulate over the lane's elements, Finish
// over the warp) and, per element, dinp's increment and the element's shares of the column sums (Element). Rows of
// up to 2048 columns read 16 bytes at a time take NormBackwardRowsKernel (below); the others this one. Block b
// takes rows 64 b ... 64 b + 63, warp w of them rows w, w + 8, ...; the warp walks its rows in slabs of 256
// columns, each lane taking 8 of them: 8 side by side, read and written 16 bytes at a time, where the rows allow
// it (kVector: C a multiple of 8, aligned tensors), else every 32nd, one bf16 at a time. Each lane sums its columns'
// shares over the warp's 8 rows in registers and adds them to the block's shared sums once (not once per element:
// with an atomic add per element, eight warps contending for each column, the LayerNorm backward took 4 times the
// forward's time on an H200); the block adds its sums to the parameter gradients once per column. The tensors are
// __restrict__: dinp (the residual stream's gradient) is never the norm's input or output gradient, so the next
// row's loads need not wait for this row's stores. The forwards (layernorm.cu, rmsnorm.cu) walk their rows by the
// same columns (NormColumn, LoadNormColumns, StoreNormColumns), and their row kernels hold a row as
// NormBackwardRowsKernel does (LoadNormRow, WithRowSlabs).
#pragma once

#include <algorithm>
#include <type_traits>

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {

inline constexpr int kNormWarps = kThreads / kWarp;
inline constexpr int kNormForwardRows = kNormWarps;  // a forward block's rows: one per warp
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
    *reinterpret_cast<uint4*>(row + c) = PackRounded(values);
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

// The row kernels' widths: rows of up to kNormRowSlabs slabs read 16 bytes at a time, held in registers.
inline constexpr int kNormRowSlabs = 8;

// launch(std::integral_constant<int, S>{}) for S the slabs of a row of C columns (C at most kNormRowSlabs slabs),
// for the row kernels, whose registers hold the row's slabs.
template <typename Launch>
int WithRowSlabs(int C, Launch&& launch) {
  switch ((C + kNormSlab - 1) / kNormSlab) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 5: return launch(std::integral_constant<int, 5>{});
    case 6: return launch(std::integral_constant<int, 6>{});
    case 7: return launch(std::integral_constant<int, 7>{});
    default: return launch(std::integral_constant<int, kNormRowSlabs>{});
  }
}

// The forwards' row kernels: a lane's columns of row `row` of `inp` (C a multiple of 8; 0 past C), 8 per slab, into
// registers, every slab's load issued before the first is used. With kResidual the row is first a + b, rounded to
// bf16 as ResidualForward writes it and stored to `inp` (after all of a's and b's loads: `inp` may be `a`, so a
// store before them would hold each slab's loads back until the previous slab's sum was stored): what is held is
// what was stored.
template <bool kResidual, int kSlabs>
__device__ __forceinline__ void LoadNormRow(Pack8 (&x)[kSlabs], bf16* inp, const bf16* a, const bf16* b, int64_t row,
                                            int lane, int C) {
  const int64_t base = row * C;
  auto load = [&](const bf16* from, int s) {
    const int c = NormColumn<true>(s * kNormSlab, lane, 0);
    return c < C ? *reinterpret_cast<const uint4*>(from + base + c) : uint4{};
  };
  if constexpr (kResidual) {
    Pack8 other[kSlabs];
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      x[s].raw = load(a, s);
      other[s].raw = load(b, s);
    }
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      const int c = NormColumn<true>(s * kNormSlab, lane, 0);
      if (c >= C) continue;
      float sum[kPack], addend[kPack];
      Unpack(x[s], sum);
      Unpack(other[s], addend);
#pragma unroll
      for (int j = 0; j < kPack; ++j) sum[j] += addend[j];
      x[s].raw = PackRounded(sum);
      *reinterpret_cast<uint4*>(inp + base + c) = x[s].raw;
    }
  } else {
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) x[s].raw = load(inp, s);
  }
}

// The sum of f(value) over a lane's columns of the row LoadNormRow holds (its slabs past C left out), in column
// order: the forwards' row statistics.
template <int kSlabs, typename F>
__device__ __forceinline__ float LaneSum(const Pack8 (&x)[kSlabs], int lane, int C, F f) {
  float sum = 0;
#pragma unroll
  for (int s = 0; s < kSlabs; ++s) {
    if (NormColumn<true>(s * kNormSlab, lane, 0) >= C) continue;
    float v[kPack];
    Unpack(x[s], v);
    for (int j = 0; j < kPack; ++j) sum += f(v[j]);
  }
  return sum;
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

// The same backward for rows of up to kNormRowSlabs slabs (2048 columns) read 16 bytes at a time, which the
// models' widths are: each warp takes one row at a time and keeps its inputs and output gradients in registers
// from the first walk to the second (NormBackwardKernel reads them twice, and with its eight rows per warp the
// second read comes from memory at the 1.3B's width: its backward ran at 1.9 TB/s, 3.8% of the step on an H200).
// A warp adds its columns' shares, row after row, into a slice of shared memory of its own (no atomics), 32 bytes
// per lane at a time; the block adds its warps' slices to the parameter gradients once, at its end. The blocks
// stay resident (a few per multiprocessor, as shared memory allows) and take rows in turn.
inline constexpr int kNormRowWarps = 4;
inline constexpr int kNormRowBlocksPerSm = 4;  // 128 threads at up to 128 registers each fill the register file
inline constexpr size_t kNormRowSharedPerSm = 200 * 1024;

template <typename Grads, int kSlabs>
__global__ void __launch_bounds__(kNormRowWarps * kWarp)
    NormBackwardRowsKernel(Grads grads, bf16* __restrict__ dinp, const bf16* __restrict__ dout,
                           const bf16* __restrict__ inp, const bf16* __restrict__ weight, int N, int C) {
  constexpr int kSums = Grads::kSums;
  float* sums = DynamicShared<float>();  // [kNormRowWarps][kSums][C]: each warp's own
  for (int i = threadIdx.x; i < kNormRowWarps * kSums * C; i += blockDim.x) sums[i] = 0;
  __syncthreads();
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  float* mine = sums + warp * kSums * C;
  for (int row = blockIdx.x * kNormRowWarps + warp; row < N; row += gridDim.x * kNormRowWarps) {
    const int64_t base = int64_t{row} * C;
    Pack8 x[kSlabs], d[kSlabs];  // the lane's columns of the row, 8 per slab (C is a multiple of 8)
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      const int c = NormColumn<true>(s * kNormSlab, lane, 0);
      x[s].raw = c < C ? *reinterpret_cast<const uint4*>(inp + base + c) : uint4{};
      d[s].raw = c < C ? *reinterpret_cast<const uint4*>(dout + base + c) : uint4{};
    }
    typename Grads::Row stats = grads.Begin(row);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      if (NormColumn<true>(s * kNormSlab, lane, 0) >= C) continue;
      float xs[kPack], ds[kPack], w[kPack];
      Unpack(x[s], xs);
      Unpack(d[s], ds);
      LoadNormColumns<true>(weight, s * kNormSlab, lane, C, w);
#pragma unroll
      for (int j = 0; j < kPack; ++j) grads.Accumulate(stats, xs[j], ds[j], w[j]);
    }
    grads.Finish(stats, C);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      const int c = NormColumn<true>(s * kNormSlab, lane, 0);
      if (c >= C) continue;
      float xs[kPack], ds[kPack], w[kPack], updated[kPack], shares[kPack][kSums] = {};
      Unpack(x[s], xs);
      Unpack(d[s], ds);
      LoadNormColumns<true>(weight, s * kNormSlab, lane, C, w);
      LoadNormColumns<true>(dinp + base, s * kNormSlab, lane, C, updated);
#pragma unroll
      for (int j = 0; j < kPack; ++j) updated[j] += grads.Element(xs[j], ds[j], w[j], stats, shares[j]);
      StoreNormColumns<true>(dinp + base, s * kNormSlab, lane, C, updated);
#pragma unroll
      for (int k = 0; k < kSums; ++k) {
        auto* at = reinterpret_cast<float4*>(mine + k * C + c);
        float4 low = at[0], high = at[1];
        low.x += shares[0][k];
        low.y += shares[1][k];
        low.z += shares[2][k];
        low.w += shares[3][k];
        high.x += shares[4][k];
        high.y += shares[5][k];
        high.z += shares[6][k];
        high.w += shares[7][k];
        at[0] = low;
        at[1] = high;
      }
    }
  }
  __syncthreads();
  for (int k = 0; k < kSums; ++k) {
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float total = 0;
      for (int w = 0; w < kNormRowWarps; ++w) total += sums[(w * kSums + k) * C + c];
      atomicAdd(&grads.out[k][c], total);
    }
  }
}

// NormBackwardRowsKernel for C of up to kNormRowSlabs slabs, read 16 bytes at a time.
template <typename Grads>
int LaunchNormBackwardRows(const Grads& grads, bf16* dinp, const bf16* dout, const bf16* inp, const bf16* weight,
                           int N, int C, Stream stream) {
  const size_t shared = sizeof(float) * kNormRowWarps * Grads::kSums * static_cast<size_t>(C);
  int device = 0, sms = 0;
  if (int rc = cudaGetDevice(&device); rc != 0) return rc;
  if (int rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); rc != 0) return rc;
  const int per_sm =
      static_cast<int>(std::min<size_t>(kNormRowBlocksPerSm, std::max<size_t>(1, kNormRowSharedPerSm / shared)));
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((N + kNormRowWarps - 1) / kNormRowWarps, int64_t{sms} * per_sm));
  auto launch = [&](auto kernel) {
    if (int rc = AllowSharedMemory(kernel, shared); rc != 0) return rc;
    LaunchKernel(kernel, blocks, kNormRowWarps * kWarp, shared, AsStream(stream), grads, dinp, dout, inp, weight, N,
                 C);
    return Launched();
  };
  return WithRowSlabs(C, [&](auto slabs) { return launch(NormBackwardRowsKernel<Grads, decltype(slabs)::value>); });
}

// Queues the backward of `grads`' norm over N rows of C on `stream`.
template <typename Grads>
int LaunchNormBackward(const Grads& grads, bf16* dinp, const bf16* dout, const bf16* inp, const bf16* weight, int N,
                       int C, Stream stream) {
  if (N <= 0) return 0;
  const bool vector = Vectorizable(dinp, C) && Vectorizable(dout, C) && Vectorizable(inp, C) && Vectorizable(weight, C);
  if (vector && C <= kNormRowSlabs * kNormSlab) {
    return LaunchNormBackwardRows(grads, dinp, dout, inp, weight, N, C, stream);
  }
  const size_t shared = sizeof(float) * Grads::kSums * static_cast<size_t>(C);
  const unsigned blocks = static_cast<unsigned>((N + kNormBlockRows - 1) / kNormBlockRows);
  auto launch = [&](auto kernel) {
    if (int rc = AllowSharedMemory(kernel, shared); rc != 0) return rc;
    LaunchKernel(kernel, blocks, kThreads, shared, AsStream(stream), grads, dinp, dout, inp, weight, N, C);
    return Launched();
  };
  return vector ? launch(NormBackwardKernel<Grads, true>) : launch(NormBackwardKernel<Grads, false>);
}

}  // namespace srunway::trainer::cuda
