// Inverted dropout with the mask of ops/cpu/dropout.cc: a pure function of (key, global element index).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void DropoutKernel(bf16* x, int64_t n, float p, float scale, uint64_t key, int64_t first_index) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    Store(x, i, DropoutKeeps(key, static_cast<uint64_t>(first_index + i), p) ? Load(x, i) * scale : 0.0f);
  }
}

}  // namespace

int Dropout(bf16* x, int64_t n, float p, uint64_t key, int64_t first_index, Stream stream) {
  if (n <= 0 || p <= 0) return 0;
  LaunchKernel(DropoutKernel, Blocks(n), kThreads, 0, AsStream(stream), x, n, p, 1.0f / (1.0f - p), key, first_index);
  return Launched();
}

}  // namespace srunway::trainer::cuda
