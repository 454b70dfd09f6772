// Squared ReLU, relu(x)^2, as ops/cpu/squared_relu.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void SquaredReluForwardKernel(bf16* out, const bf16* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = fmaxf(Load(inp, i), 0.0f);
    Store(out, i, x * x);
  }
}

__global__ void SquaredReluBackwardKernel(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = Load(inp, i);
    Store(dinp, i, x > 0.0f ? 2.0f * x * Load(dout, i) : 0.0f);
  }
}

}  // namespace

int SquaredReluForward(bf16* out, const bf16* inp, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(SquaredReluForwardKernel, Blocks(n), kThreads, 0, AsStream(stream), out, inp, n);
  return Launched();
}

int SquaredReluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(SquaredReluBackwardKernel, Blocks(n), kThreads, 0, AsStream(stream), dinp, inp, dout, n);
  return Launched();
}

}  // namespace srunway::trainer::cuda
