// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as ops/cpu/gelu.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__global__ void GeluForwardKernel(bf16* out, const bf16* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = Load(inp, i);
    Store(out, i, 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x))));
  }
}

__global__ void GeluBackwardKernel(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = Load(inp, i);
    const float th = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    const float sech2 = 1.0f - th * th;
    const float grad = 0.5f * (1.0f + th) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    Store(dinp, i, grad * Load(dout, i));
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
