// Residual addition, as ops/cpu/residual.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void ResidualForwardKernel(bf16* out, const bf16* a, const bf16* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    Store(out, i, Load(a, i) + Load(b, i));
  }
}

__global__ void ResidualBackwardKernel(bf16* da, bf16* db, const bf16* dout, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float d = Load(dout, i);
    Store(da, i, Load(da, i) + d);
    Store(db, i, Load(db, i) + d);
  }
}

}  // namespace

int ResidualForward(bf16* out, const bf16* a, const bf16* b, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(ResidualForwardKernel, Blocks(n), kThreads, 0, AsStream(stream), out, a, b, n);
  return Launched();
}

int ResidualBackward(bf16* da, bf16* db, const bf16* dout, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(ResidualBackwardKernel, Blocks(n), kThreads, 0, AsStream(stream), da, db, dout, n);
  return Launched();
}

}  // namespace srunway::trainer::cuda
