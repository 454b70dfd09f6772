// SwiGLU (Llama's FFN activation): silu(gate) * up, gate and up side by side in one row, as ops/cpu/swiglu.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void SwigluForwardKernel(bf16* out, const bf16* inp, int F, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / F, f = i % F;
    const float gate = Load(inp, row * 2 * F + f), up = Load(inp, row * 2 * F + F + f);
    Store(out, i, gate / (1.0f + expf(-gate)) * up);
  }
}

__global__ void SwigluBackwardKernel(bf16* dinp, const bf16* inp, const bf16* dout, int F, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / F, f = i % F;
    const int64_t g_at = row * 2 * F + f, u_at = g_at + F;
    const float gate = Load(inp, g_at), up = Load(inp, u_at), d = Load(dout, i);
    const float sig = 1.0f / (1.0f + expf(-gate));
    Store(dinp, g_at, d * up * sig * (1.0f + gate * (1.0f - sig)));
    Store(dinp, u_at, d * gate * sig);
  }
}

}  // namespace

int SwigluForward(bf16* out, const bf16* inp, int N, int F, Stream stream) {
  const int64_t n = int64_t{N} * F;
  if (n <= 0) return 0;
  LaunchKernel(SwigluForwardKernel, Blocks(n), kThreads, 0, AsStream(stream), out, inp, F, n);
  return Launched();
}

int SwigluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F, Stream stream) {
  const int64_t n = int64_t{N} * F;
  if (n <= 0) return 0;
  LaunchKernel(SwigluBackwardKernel, Blocks(n), kThreads, 0, AsStream(stream), dinp, inp, dout, F, n);
  return Launched();
}

}  // namespace srunway::trainer::cuda
