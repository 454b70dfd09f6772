// bfloat16 as trainer/ops/cuda's kernels use it, for compiling them as C++ on tests/emulated_gpu's emulator:
// the storage types and the conversions, rounding to nearest even as the hardware does.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct alignas(2) __nv_bfloat16 {
  uint16_t __x;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __bfloat162float(__nv_bfloat16 value) {
  const uint32_t bits = uint32_t{value.__x} << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

inline __nv_bfloat16 __float2bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((bits >> 16) | 0x0040u)};  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<uint16_t>(bits >> 16)};
}
inline __nv_bfloat16 __float2bfloat16_rn(float value) { return __float2bfloat16(value); }

inline __nv_bfloat162 __floats2bfloat162_rn(float low, float high) {
  return {__float2bfloat16(low), __float2bfloat16(high)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 pair) { return {__bfloat162float(pair.x), __bfloat162float(pair.y)}; }
