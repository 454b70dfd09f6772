// Softmax cross-entropy, as ops/cpu/cross_entropy.cc's forward then backward, one block per row of bf16 logits:
// the losses in one pass over each row (a running maximum and sum per thread, combined across the block), which
// also keeps each row's log-sum-exp; the gradients in one more pass that reads the logits and writes their
// gradients over them; or both in one kernel, each row's second pass right after its first (training's step). The
// full-vocabulary probabilities never exist in memory. Rows of a multiple of 8 values are read 16 bytes at a time.
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
// time. The row of block b starts at logits + b * V.

// The row's softmax state, combined across the block and returned to every thread.
template <bool kVector>
__device__ MaxSum RowState(const bf16* logits, int64_t base, int V) {
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
  return BlockCombine(mine);
}

// The row's logits turned into their gradients in place, (softmax - onehot) * dloss; zeros for a row without
// loss (a negative target).
template <bool kVector>
__device__ void WriteGradients(bf16* logits, int64_t base, int V, float row_lse, int target, float dloss) {
  if (target < 0) dloss = 0.0f;
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

template <bool kVector>
__global__ void LossesKernel(float* losses, float* lse, const bf16* logits, const int32_t* targets, int V) {
  const int64_t base = int64_t{blockIdx.x} * V;
  const MaxSum row = RowState<kVector>(logits, base, V);
  if (threadIdx.x == 0) {
    const float row_lse = row.max + logf(row.sum);
    lse[blockIdx.x] = row_lse;
    const int target = targets[blockIdx.x];
    losses[blockIdx.x] = target < 0 ? 0.0f : row_lse - Load(logits, base + target);
  }
}

template <bool kVector>
__global__ void GradientsKernel(bf16* logits, const float* lse, const int32_t* targets, int V, float dloss) {
  WriteGradients<kVector>(logits, int64_t{blockIdx.x} * V, V, lse[blockIdx.x], targets[blockIdx.x], dloss);
}

// Both in one pass over the row's memory: the gradients' reads come right after the losses' reads of the same row
// (a block's row, 100 KB at GPT-2's vocabulary, is still in L2), where the two kernels read every row twice from
// memory. The target's logit is read before any thread can pass the block's combine and overwrite it.
template <bool kVector>
__global__ void LossesAndGradientsKernel(float* losses, float* lse, bf16* logits, const int32_t* targets, int V,
                                         float dloss) {
  const int64_t base = int64_t{blockIdx.x} * V;
  const int target = targets[blockIdx.x];
  const float target_logit = threadIdx.x == 0 && target >= 0 ? Load(logits, base + target) : 0.0f;
  const MaxSum row = RowState<kVector>(logits, base, V);
  const float row_lse = row.max + logf(row.sum);
  if (threadIdx.x == 0) {
    lse[blockIdx.x] = row_lse;
    losses[blockIdx.x] = target < 0 ? 0.0f : row_lse - target_logit;
  }
  WriteGradients<kVector>(logits, base, V, row_lse, target, dloss);
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

int ClassifierLossesAndGradients(float* losses, float* lse, bf16* logits_to_dlogits, const int32_t* targets, int N,
                                 int V, float dloss, Stream stream) {
  if (N <= 0) return 0;
  auto kernel = Vectorizable(logits_to_dlogits, V) ? LossesAndGradientsKernel<true> : LossesAndGradientsKernel<false>;
  LaunchKernel(kernel, static_cast<unsigned>(N), kClassifierThreads, 0, AsStream(stream), losses, lse,
               logits_to_dlogits, targets, V, dloss);
  return Launched();
}

}  // namespace srunway::trainer::cuda
