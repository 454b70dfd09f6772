// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and exact: 0.5 x (1 + erf(x / sqrt(2))),
// as ops/cpu/gelu.cc.
#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/glu.h"

namespace srunway::trainer::cuda {
namespace {

template <bool kExact>
__global__ void GeluForwardKernel(bf16* out, const bf16* inp, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = Load(inp, i);
    Store(out, i, kExact ? GeluErf(x) : GeluTanh(x));
  }
}

template <bool kExact>
__global__ void GeluBackwardKernel(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float x = Load(inp, i);
    Store(dinp, i, (kExact ? GeluErfGrad(x) : GeluTanhGrad(x)) * Load(dout, i));
  }
}

template <bool kExact>
int Forward(bf16* out, const bf16* inp, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(GeluForwardKernel<kExact>, Blocks(n), kThreads, 0, AsStream(stream), out, inp, n);
  return Launched();
}

template <bool kExact>
int Backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(GeluBackwardKernel<kExact>, Blocks(n), kThreads, 0, AsStream(stream), dinp, inp, dout, n);
  return Launched();
}

}  // namespace

int GeluForward(bf16* out, const bf16* inp, int64_t n, Stream stream) { return Forward<false>(out, inp, n, stream); }
int GeluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream) {
  return Backward<false>(dinp, inp, dout, n, stream);
}
int GeluErfForward(bf16* out, const bf16* inp, int64_t n, Stream stream) { return Forward<true>(out, inp, n, stream); }
int GeluErfBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream) {
  return Backward<true>(dinp, inp, dout, n, stream);
}

}  // namespace srunway::trainer::cuda
