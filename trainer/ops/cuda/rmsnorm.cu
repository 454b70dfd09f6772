// RMSNorm (Llama) over rows of C, as ops/cpu/rmsnorm.cc: one warp per row, fp32 statistics from bf16 inputs.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

// kResidual: `inp` is first written with a + b (rounded to bf16, as ResidualForward writes it), then normalised.
template <bool kResidual>
__global__ void RmsNormForwardKernel(bf16* out, float* rstd, bf16* inp, const bf16* a, const bf16* b,
                                     const bf16* weight, int N, int C, float eps) {
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp; row < N; row += gridDim.x * kRowsPerBlock) {
    const int64_t base = int64_t{row} * C;
    if constexpr (kResidual) {
      for (int c = lane; c < C; c += kWarp) Store(inp, base + c, Load(a, base + c) + Load(b, base + c));
    }
    float sum_sq = 0;
    for (int c = lane; c < C; c += kWarp) {
      const float x = Load(inp, base + c);
      sum_sq += x * x;
    }
    const float s = rsqrtf(WarpSum(sum_sq) / C + eps);
    for (int c = lane; c < C; c += kWarp) Store(out, base + c, Load(inp, base + c) * s * Load(weight, c));
    if (lane == 0) rstd[row] = s;
  }
}

// dx = s (w d) - x s^3 mean(w d x); the block gathers its rows' dweight in shared memory first.
__global__ void RmsNormBackwardKernel(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                                      const float* rstd, int N, int C) {
  float* sums = DynamicShared<float>();
  for (int c = threadIdx.x; c < C; c += blockDim.x) sums[c] = 0;
  __syncthreads();
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp; row < N; row += gridDim.x * kRowsPerBlock) {
    const int64_t base = int64_t{row} * C;
    const float s = rstd[row];
    float dot = 0;
    for (int c = lane; c < C; c += kWarp) dot += Load(weight, c) * Load(dout, base + c) * Load(inp, base + c);
    dot = WarpSum(dot) / C;
    for (int c = lane; c < C; c += kWarp) {
      const float x = Load(inp, base + c), d = Load(dout, base + c), w = Load(weight, c);
      atomicAdd(&sums[c], x * s * d);
      Store(dinp, base + c, Load(dinp, base + c) + s * w * d - x * s * s * s * dot);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&dweight[c], sums[c]);
}

}  // namespace

int RmsNormForward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int N, int C, float eps,
                   Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  LaunchKernel(RmsNormForwardKernel<false>, blocks, kThreads, 0, AsStream(stream), out, rstd, const_cast<bf16*>(inp),
               nullptr, nullptr, weight, N, C, eps);
  return Launched();
}

int ResidualRmsNormForward(bf16* residual, bf16* out, float* rstd, const bf16* a, const bf16* b, const bf16* weight,
                           int N, int C, float eps, Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  LaunchKernel(RmsNormForwardKernel<true>, blocks, kThreads, 0, AsStream(stream), out, rstd, residual, a, b, weight, N,
               C, eps);
  return Launched();
}

int RmsNormBackward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                    const float* rstd, int N, int C, Stream stream) {
  if (N <= 0) return 0;
  const size_t shared = sizeof(float) * static_cast<size_t>(C);
  if (int rc = AllowSharedMemory(RmsNormBackwardKernel, shared); rc != 0) return rc;
  LaunchKernel(RmsNormBackwardKernel, RowBlocks(N, kRowsPerBlock), kThreads, shared, AsStream(stream), dinp, dweight,
               dout, inp, weight, rstd, N, C);
  return Launched();
}

}  // namespace srunway::trainer::cuda
