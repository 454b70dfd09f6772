// bfloat16 as trainer/ops/cuda's kernels use it, for compiling them as C++ on tests/emulated_gpu's emulator:
// the storage types and the conversions, rounding to nearest even as the hardware does.
#pragma once

#include <cstdint>

#include "common/half.h"
#include "cuda_runtime.h"

struct alignas(2) __nv_bfloat16 {
  uint16_t __x;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __bfloat162float(__nv_bfloat16 value) { return srunway::common::BFloat16ToFloat(value.__x); }
inline __nv_bfloat16 __float2bfloat16(float value) { return {srunway::common::FloatToBFloat16(value)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float value) { return __float2bfloat16(value); }

inline __nv_bfloat162 __floats2bfloat162_rn(float low, float high) {
  return {__float2bfloat16(low), __float2bfloat16(high)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 pair) { return {__bfloat162float(pair.x), __bfloat162float(pair.y)}; }
