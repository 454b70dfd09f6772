// The CUDA runtime as trainer/ops/cuda's kernels use it, mapped onto tests/emulated_gpu's CPU emulator so that the
// same .cu files compile as C++: the execution-space keywords vanish, __shared__ variables are static (one block
// runs at a time) and live in one section that the emulator fills with NaN before every block, and the built-in
// coordinates, barriers, shuffles and atomics are the emulator's.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tests/emulated_gpu/emulator.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __restrict__ __restrict
#define __shared__ static __attribute__((section("srunway_emulated_shared")))

#define threadIdx (::srunway::emulated_gpu::ThreadIdx())
#define blockIdx (::srunway::emulated_gpu::BlockIdx())
#define blockDim (::srunway::emulated_gpu::BlockDim())
#define gridDim (::srunway::emulated_gpu::GridDim())
#define warpSize 32

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = srunway::emulated_gpu::kInvalidValue,
  cudaErrorInvalidConfiguration = srunway::emulated_gpu::kInvalidConfiguration,
};
using cudaError = cudaError_t;
using cudaStream_t = struct CUstream_st*;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

// CUDA's device-side min, max and rsqrtf.
template <typename A, typename B>
std::common_type_t<A, B> min(A a, B b) {
  using T = std::common_type_t<A, B>;
  return static_cast<T>(b) < static_cast<T>(a) ? static_cast<T>(b) : static_cast<T>(a);
}
template <typename A, typename B>
std::common_type_t<A, B> max(A a, B b) {
  using T = std::common_type_t<A, B>;
  return static_cast<T>(a) < static_cast<T>(b) ? static_cast<T>(b) : static_cast<T>(a);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

inline void __syncthreads() { srunway::emulated_gpu::BlockSync(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  srunway::emulated_gpu::WarpSync(srunway::emulated_gpu::Collective::kSyncWarp, mask);
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = warpSize) {
  static_assert(sizeof(T) <= sizeof(uint32_t) * srunway::emulated_gpu::kPostWords && std::is_trivially_copyable_v<T>);
  namespace emu = srunway::emulated_gpu;
  if (width != warpSize) emu::Fail("the emulator's shuffles take only the whole warp's width");
  emu::Words words = {};
  std::memcpy(words, &value, sizeof(T));
  emu::Post(words);
  emu::WarpSync(emu::Collective::kShuffle, mask);
  emu::ReadPosted(emu::Lane() ^ lane_mask, words);
  T out;
  std::memcpy(&out, words, sizeof(T));
  return out;
}

// One thread runs at a time, so a plain read-modify-write would be atomic; an atomic one is, in addition, what
// ThreadSanitizer's race check (the tsan build) must see to tell it from a racing plain access.
template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}

inline cudaError_t cudaGetLastError() { return static_cast<cudaError_t>(srunway::emulated_gpu::TakeLastError()); }
inline cudaError_t cudaPeekAtLastError() { return static_cast<cudaError_t>(srunway::emulated_gpu::PeekLastError()); }
inline const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  }
  return "unrecognized error code";
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (attribute != cudaDevAttrMultiProcessorCount || device != 0) return cudaErrorInvalidValue;
  *value = srunway::emulated_gpu::kMultiprocessors;
  return cudaSuccess;
}
template <typename... Params>
cudaError_t cudaFuncSetAttribute(void (*kernel)(Params...), cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return static_cast<cudaError_t>(
      srunway::emulated_gpu::AllowDynamicShared(reinterpret_cast<const void*>(kernel), value));
}
// Launches run to completion, so "asynchronous" work is done when the call returns.
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
