// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as ops/cpu/gelu.cc.
#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/glu.h"

namespace srunway::trainer::cuda {
namespace {

__global__ void GeluForwardKernel(bf16* out, const bf16* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    Store(out, i, GeluTanh(Load(inp, i)));
  }
}

__global__ void GeluBackwardKernel(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    Store(dinp, i, GeluTanhGrad(Load(inp, i)) * Load(dout, i));
  }
}

}  // namespace

int GeluForward(bf16* out, const bf16* inp, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(GeluForwardKernel, Blocks(n), kThreads, 0, AsStream(stream), out, inp, n);
  return Launched();
}

int GeluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(GeluBackwardKernel, Blocks(n), kThreads, 0, AsStream(stream), dinp, inp, dout, n);
  return Launched();
}

}  // namespace srunway::trainer::cuda
