// fp32 to bf16, for the bf16 copy of the parameters that the operations read, and both ways for the gradients
// reduced in bf16 (--grad-reduce-in-bf16).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void ToBf16Kernel(bf16* out, const float* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    Store(out, i, in[i]);
  }
}

__global__ void FromBf16Kernel(float* out, const bf16* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = Load(in, i);
  }
}

}  // namespace

int ToBf16(bf16* out, const float* in, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(ToBf16Kernel, Blocks(n), kThreads, 0, AsStream(stream), out, in, n);
  return Launched();
}

int FromBf16(float* out, const bf16* in, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(FromBf16Kernel, Blocks(n), kThreads, 0, AsStream(stream), out, in, n);
  return Launched();
}

}  // namespace srunway::trainer::cuda
