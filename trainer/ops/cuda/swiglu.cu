// SwiGLU (Llama's FFN activation) and the other gated activations of ops/glu.h, gate and up side by side in one
// row, as ops/cpu/swiglu.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void SwigluForwardKernel(bf16* out, const bf16* inp, int F, int64_t n, Glu glu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / F, f = i % F;
    Store(out, i, GluForward(glu, Load(inp, row * 2 * F + f), Load(inp, row * 2 * F + F + f)));
  }
}

__global__ void SwigluBackwardKernel(bf16* dinp, const bf16* inp, const bf16* dout, int F, int64_t n, Glu glu) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / F, f = i % F;
    const int64_t g_at = row * 2 * F + f, u_at = g_at + F;
    float dgate, dup;
    GluBackward(glu, Load(inp, g_at), Load(inp, u_at), Load(dout, i), dgate, dup);
    Store(dinp, g_at, dgate);
    Store(dinp, u_at, dup);
  }
}

}  // namespace

int SwigluForward(bf16* out, const bf16* inp, int N, int F, const Glu& glu, Stream stream) {
  const int64_t n = int64_t{N} * F;
  if (n <= 0) return 0;
  LaunchKernel(SwigluForwardKernel, Blocks(n), kThreads, 0, AsStream(stream), out, inp, F, n, glu);
  return Launched();
}

int SwigluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F, const Glu& glu, Stream stream) {
  const int64_t n = int64_t{N} * F;
  if (n <= 0) return 0;
  LaunchKernel(SwigluBackwardKernel, Blocks(n), kThreads, 0, AsStream(stream), dinp, inp, dout, F, n, glu);
  return Launched();
}

}  // namespace srunway::trainer::cuda
