// LayerNorm over rows of C, as ops/cpu/layernorm.cc: one warp per row, fp32 statistics from bf16 inputs.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

// kResidual: `inp` is first written with a + b (rounded to bf16, as ResidualForward writes it), then normalised:
// the residual add fused in, one pass over the row fewer.
template <bool kResidual>
__global__ void LayerNormForwardKernel(bf16* out, float* mean, float* rstd, bf16* inp, const bf16* a, const bf16* b,
                                       const bf16* weight, const bf16* bias, int N, int C, float eps) {
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp; row < N; row += gridDim.x * kRowsPerBlock) {
    const int64_t base = int64_t{row} * C;
    if constexpr (kResidual) {
      for (int c = lane; c < C; c += kWarp) Store(inp, base + c, Load(a, base + c) + Load(b, base + c));
    }
    float sum = 0;
    for (int c = lane; c < C; c += kWarp) sum += Load(inp, base + c);
    const float m = WarpSum(sum) / C;
    float var = 0;
    for (int c = lane; c < C; c += kWarp) {
      const float d = Load(inp, base + c) - m;
      var += d * d;
    }
    const float s = rsqrtf(WarpSum(var) / C + eps);
    for (int c = lane; c < C; c += kWarp) {
      Store(out, base + c, (Load(inp, base + c) - m) * s * Load(weight, c) + Load(bias, c));
    }
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = s;
    }
  }
}

// Each warp takes rows; the block gathers its rows' weight and bias gradients in shared memory ([dweight | dbias],
// 2C floats) and adds them to the global ones once per channel.
__global__ void LayerNormBackwardKernel(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                        const bf16* weight, const float* mean, const float* rstd, int N, int C) {
  float* sums = DynamicShared<float>();
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) sums[c] = 0;
  __syncthreads();
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp; row < N; row += gridDim.x * kRowsPerBlock) {
    const int64_t base = int64_t{row} * C;
    const float m = mean[row], s = rstd[row];
    float dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = lane; c < C; c += kWarp) {
      const float norm = (Load(inp, base + c) - m) * s;
      const float dnorm = Load(weight, c) * Load(dout, base + c);
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean = WarpSum(dnorm_mean) / C;
    dnorm_norm_mean = WarpSum(dnorm_norm_mean) / C;
    for (int c = lane; c < C; c += kWarp) {
      const float d = Load(dout, base + c);
      const float norm = (Load(inp, base + c) - m) * s;
      const float dnorm = Load(weight, c) * d;
      atomicAdd(&sums[c], norm * d);
      atomicAdd(&sums[C + c], d);
      Store(dinp, base + c, Load(dinp, base + c) + (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    atomicAdd(&dweight[c], sums[c]);
    atomicAdd(&dbias[c], sums[C + c]);
  }
}

}  // namespace

int LayerNormForward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                     int N, int C, float eps, Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  LaunchKernel(LayerNormForwardKernel<false>, blocks, kThreads, 0, AsStream(stream), out, mean, rstd,
               const_cast<bf16*>(inp), nullptr, nullptr, weight, bias, N, C, eps);
  return Launched();
}

int ResidualLayerNormForward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* weight, const bf16* bias, int N, int C, float eps, Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  LaunchKernel(LayerNormForwardKernel<true>, blocks, kThreads, 0, AsStream(stream), out, mean, rstd, residual, a, b,
               weight, bias, N, C, eps);
  return Launched();
}

int LayerNormBackward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* mean, const float* rstd, int N, int C, Stream stream) {
  if (N <= 0) return 0;
  const size_t shared = sizeof(float) * 2 * static_cast<size_t>(C);
  if (int rc = AllowSharedMemory(LayerNormBackwardKernel, shared); rc != 0) return rc;
  const unsigned blocks = RowBlocks(N, kRowsPerBlock);
  LaunchKernel(LayerNormBackwardKernel, blocks, kThreads, shared, AsStream(stream), dinp, dweight, dbias, dout, inp,
               weight, mean, rstd, N, C);
  return Launched();
}

}  // namespace srunway::trainer::cuda
