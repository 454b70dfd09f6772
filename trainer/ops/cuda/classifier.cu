// Softmax cross-entropy, as ops/cpu/cross_entropy.cc's forward then backward, one block per row of bf16 logits:
// the losses in one pass over each row (a running maximum and sum per thread, combined across the block), which
// also keeps each row's log-sum-exp; the gradients in one more pass that reads the logits and writes their
// gradients over them. The full-vocabulary probabilities never exist in memory. Rows of a multiple of 8 values are
// read 16 bytes at a time.
#include <cfloat>
#include <cstdint>

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kClassifierThreads = 1024;

// A softmax's running state: the largest value seen and the sum of exp(value - max) over what was seen.
struct MaxSum {
  float max = -FLT_MAX;
  float sum = 0.0f;
};

__device__ __forceinline__ MaxSum Combine(MaxSum a, MaxSum b) {
  const float max = fmaxf(a.max, b.max);
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// The block's combined state, returned to every thread.
__device__ MaxSum BlockCombine(MaxSum x) {
  __shared__ MaxSum partial[kClassifierThreads / kWarp];
  __shared__ MaxSum result;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    x = Combine(x, {__shfl_xor_sync(0xffffffffu, x.max, offset), __shfl_xor_sync(0xffffffffu, x.sum, offset)});
  }
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    MaxSum y = lane < static_cast<int>(blockDim.x / kWarp) ? partial[lane] : MaxSum{};
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      y = Combine(y, {__shfl_xor_sync(0xffffffffu, y.max, offset), __shfl_xor_sync(0xffffffffu, y.sum, offset)});
    }
    if (lane == 0) result = y;
  }
  __syncthreads();
  return result;
}

__device__ __forceinline__ void Add(MaxSum& state, float x) {
  if (x > state.max) {
    state.sum = state.sum * expf(state.max - x) + 1.0f;
    state.max = x;
  } else {
    state.sum += expf(x - state.max);
  }
}

// Eight values at once: their maximum first, so the running sum is rescaled at most once and each value costs one
// exponential and no branch (Add's per-value test kept the losses kernel at about twice the time of its pass over
// the logits on an H100).
__device__ __forceinline__ void AddPack(MaxSum& state, const Pack8& pack) {
  float x[kPack];
  Unpack(pack, x);
  float max = state.max;
#pragma unroll
  for (int j = 0; j < kPack; ++j) max = fmaxf(max, x[j]);
  float sum = state.sum * expf(state.max - max);
#pragma unroll
  for (int j = 0; j < kPack; ++j) sum += expf(x[j] - max);
  state = {max, sum};
}

// The kVector kernels (V a multiple of 8, as padded vocabularies are: 50304) read and write each row a Pack8 at a
// time.
template <bool kVector>
__global__ void LossesKernel(float* losses, float* lse, const bf16* logits, const int32_t* targets, int V) {
  const int64_t base = int64_t{blockIdx.x} * V;
  MaxSum mine;
  if constexpr (kVector) {
    const uint4* row = reinterpret_cast<const uint4*>(logits + base);
    for (int i = threadIdx.x; i < V / kPack; i += blockDim.x) {
      Pack8 pack;
      pack.raw = row[i];
      AddPack(mine, pack);
    }
  } else {
    for (int v = threadIdx.x; v < V; v += blockDim.x) Add(mine, Load(logits, base + v));
  }
  const MaxSum row = BlockCombine(mine);
  if (threadIdx.x == 0) {
    const float row_lse = row.max + logf(row.sum);
    lse[blockIdx.x] = row_lse;
    losses[blockIdx.x] = row_lse - Load(logits, base + targets[blockIdx.x]);
  }
}

template <bool kVector>
__global__ void GradientsKernel(bf16* logits, const float* lse, const int32_t* targets, int V, float dloss) {
  const int64_t base = int64_t{blockIdx.x} * V;
  const float row_lse = lse[blockIdx.x];
  const int target = targets[blockIdx.x];
  auto gradient = [&](float x, int v) { return (expf(x - row_lse) - (v == target ? 1.0f : 0.0f)) * dloss; };
  if constexpr (kVector) {
    uint4* row = reinterpret_cast<uint4*>(logits + base);
    for (int i = threadIdx.x; i < V / kPack; i += blockDim.x) {
      Pack8 pack;
      pack.raw = row[i];
      for (int j = 0; j < kPack / 2; ++j) {
        const float2 x = __bfloat1622float2(pack.pairs[j]);
        pack.pairs[j] = __floats2bfloat162_rn(gradient(x.x, i * kPack + 2 * j), gradient(x.y, i * kPack + 2 * j + 1));
      }
      row[i] = pack.raw;
    }
  } else {
    for (int v = threadIdx.x; v < V; v += blockDim.x) Store(logits, base + v, gradient(Load(logits, base + v), v));
  }
}

}  // namespace

int ClassifierLosses(float* losses, float* lse, const bf16* logits, const int32_t* targets, int N, int V,
                     Stream stream) {
  if (N <= 0) return 0;
  auto kernel = Vectorizable(logits, V) ? LossesKernel<true> : LossesKernel<false>;
  LaunchKernel(kernel, static_cast<unsigned>(N), kClassifierThreads, 0, AsStream(stream), losses, lse, logits, targets,
               V);
  return Launched();
}

int ClassifierGradients(bf16* logits_to_dlogits, const float* lse, const int32_t* targets, int N, int V, float dloss,
                        Stream stream) {
  if (N <= 0) return 0;
  auto kernel = Vectorizable(logits_to_dlogits, V) ? GradientsKernel<true> : GradientsKernel<false>;
  LaunchKernel(kernel, static_cast<unsigned>(N), kClassifierThreads, 0, AsStream(stream), logits_to_dlogits, lse,
               targets, V, dloss);
  return Launched();
}

}  // namespace srunway::trainer::cuda
