// Inverted dropout with the mask of ops/cpu/dropout.cc: a pure function of (key, global element index).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__device__ __forceinline__ uint64_t Mix(uint64_t z) {  // splitmix64's finaliser, as the CPU's
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__global__ void DropoutKernel(bf16* x, int64_t n, float p, float scale, uint64_t key, int64_t first_index) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t index = static_cast<uint64_t>(first_index + i);
    const uint32_t bits = static_cast<uint32_t>(Mix(key ^ (index * 0x9e3779b97f4a7c15ULL)) >> 40);
    const bool keep = static_cast<float>(bits) * (1.0f / 16777216.0f) >= p;
    Store(x, i, keep ? Load(x, i) * scale : 0.0f);
  }
}

}  // namespace

int Dropout(bf16* x, int64_t n, float p, uint64_t key, int64_t first_index, Stream stream) {
  if (n <= 0 || p <= 0) return 0;
  DropoutKernel<<<Blocks(n), kThreads, 0, AsStream(stream)>>>(x, n, p, 1.0f / (1.0f - p), key, first_index);
  return Launched();
}

}  // namespace srunway::trainer::cuda
