// Softmax cross-entropy fused with its backward, as ops/cpu/cross_entropy.cc's forward then backward: one block
// per row reads the bf16 logits three times (max, sum, gradients) and never stores probabilities.
#include <cfloat>

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kClassifierThreads = 1024;

// The block's reduction of x (sum, or max when `max` is true), returned to every thread.
__device__ float BlockReduce(float x, bool max) {
  __shared__ float partial[kClassifierThreads / kWarp];
  __shared__ float result;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(0xffffffffu, x, offset);
    x = max ? fmaxf(x, other) : x + other;
  }
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / kWarp;
    float y = lane < warps ? partial[lane] : (max ? -FLT_MAX : 0.0f);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, y, offset);
      y = max ? fmaxf(y, other) : y + other;
    }
    if (lane == 0) result = y;
  }
  __syncthreads();
  const float out = result;
  __syncthreads();  // `result` and `partial` are reused by the next call
  return out;
}

__global__ void FusedClassifierKernel(bf16* logits, float* losses, const int32_t* targets, int V, float dloss,
                                      bool write_gradients) {
  const int64_t base = int64_t{blockIdx.x} * V;
  float local_max = -FLT_MAX;
  for (int v = threadIdx.x; v < V; v += blockDim.x) local_max = fmaxf(local_max, Load(logits, base + v));
  const float max_logit = BlockReduce(local_max, true);
  float local_sum = 0;
  for (int v = threadIdx.x; v < V; v += blockDim.x) local_sum += expf(Load(logits, base + v) - max_logit);
  const float sum = BlockReduce(local_sum, false);
  const int target = targets[blockIdx.x];
  const float target_shifted = Load(logits, base + target) - max_logit;
  __syncthreads();  // every thread has read the target's logit before it is overwritten
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(sum) - target_shifted;
  if (!write_gradients) return;
  const float inv = 1.0f / sum;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    const float p = expf(Load(logits, base + v) - max_logit) * inv;
    Store(logits, base + v, (p - (v == target ? 1.0f : 0.0f)) * dloss);
  }
}

}  // namespace

int FusedClassifier(bf16* logits_to_dlogits, float* losses, const int32_t* targets, int N, int V, float dloss,
                    bool write_gradients, Stream stream) {
  if (N <= 0) return 0;
  FusedClassifierKernel<<<static_cast<unsigned>(N), kClassifierThreads, 0, AsStream(stream)>>>(
      logits_to_dlogits, losses, targets, V, dloss, write_gradients);
  return Launched();
}

}  // namespace srunway::trainer::cuda
