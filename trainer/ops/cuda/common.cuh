// What the CUDA operations share: bf16 loads and stores in fp32, launch shapes, the error code of a launch (the
// launch itself and the instructions below C++ are hardware.cuh's).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "trainer/ops/cuda/hardware.cuh"
#include "trainer/ops/cuda/kernels.h"

namespace srunway::trainer::cuda {

__device__ __forceinline__ float Load(const bf16* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void Store(bf16* p, int64_t i, float x) {
  reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x);  // round to nearest even
}

// An attention row's softmax with its head's sink (--softmax-type off-by-one or learnable: one more key, of score
// `sink` and value 0) added once its keys are done: max_score and sum (of exp(score - max_score)) become the row's
// with the sink; returns the factor the row's output, summed against the old max_score, is to be multiplied by
// (before it is divided by the new sum). kBase2: scores, sink and max in base 2 (exp2).
template <bool kBase2>
__device__ __forceinline__ float FoldSink(float sink, float& max_score, float& sum) {
  const float new_max = fmaxf(max_score, sink);
  const float rescale = kBase2 ? exp2f(max_score - new_max) : expf(max_score - new_max);
  sum = sum * rescale + (kBase2 ? exp2f(sink - new_max) : expf(sink - new_max));
  max_score = new_max;
  return rescale;
}

constexpr int kThreads = 256;
constexpr int kWarp = 32;

// Eight bf16 values in 16 bytes, loaded or stored at once where rows of them allow it (Vectorizable).
constexpr int kPack = 8;
union Pack8 {
  uint4 raw;
  __nv_bfloat162 pairs[kPack / 2];
};
// A Pack8's values in fp32, in order.
__device__ __forceinline__ void Unpack(const Pack8& pack, float (&values)[kPack]) {
#pragma unroll
  for (int j = 0; j < kPack / 2; ++j) {
    const float2 pair = __bfloat1622float2(pack.pairs[j]);
    values[2 * j] = pair.x;
    values[2 * j + 1] = pair.y;
  }
}
// The bf16 values nearest 8 floats, as a Pack8's 16 bytes.
__device__ __forceinline__ uint4 PackRounded(const float (&values)[kPack]) {
  Pack8 pack;
#pragma unroll
  for (int j = 0; j < kPack / 2; ++j) pack.pairs[j] = __floats2bfloat162_rn(values[2 * j], values[2 * j + 1]);
  return pack.raw;
}
// Whether rows of `row_length` bf16 values starting at `p` can be read and written a Pack8 at a time.
inline bool Vectorizable(const bf16* p, int64_t row_length) {
  return row_length % kPack == 0 && reinterpret_cast<uintptr_t>(p) % sizeof(uint4) == 0;
}

// Enough blocks of kThreads for n elements in a grid-stride loop, capped where more would only queue.
inline unsigned Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

inline cudaStream_t AsStream(Stream stream) { return static_cast<cudaStream_t>(stream); }

// The error of the launch just made (0 when it was queued).
inline int Launched() { return static_cast<int>(cudaGetLastError()); }

// Lets `kernel` use `bytes` of dynamic shared memory: above the default 48 KiB it must ask.
template <typename Kernel>
int AllowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return 0;
  return static_cast<int>(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

__device__ __forceinline__ uint64_t Mix(uint64_t z) {  // splitmix64's finaliser, as ops/cpu/dropout.cc's
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// ops/cpu/dropout.cc's DropoutKeeps: 24 random bits of (key, index) against p.
__device__ __forceinline__ bool DropoutKeeps(uint64_t key, uint64_t index, float p) {
  const uint32_t bits = static_cast<uint32_t>(Mix(key ^ (index * 0x9e3779b97f4a7c15ULL)) >> 40);
  return static_cast<float>(bits) * (1.0f / 16777216.0f) >= p;
}

__device__ __forceinline__ float WarpSum(float x) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// The sum of every thread's `sum` (in thread 0; the others get their warp's): the warps' fixed tree, then the
// warps in order through `warps` (shared, one per warp), so that the same values give the same sum every time.
__device__ __forceinline__ double BlockSum(double sum, double* warps) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % kWarp == 0) warps[threadIdx.x / kWarp] = sum;
  __syncthreads();
  if (threadIdx.x != 0) return sum;
  double total = 0;
  for (unsigned w = 0; w < blockDim.x / kWarp; ++w) total += warps[w];
  return total;
}

}  // namespace srunway::trainer::cuda
