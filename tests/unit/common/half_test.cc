// The half-precision conversions the MPI backend reduces with and the checks on GPU results use.
#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace srunway::common {
namespace {

TEST(Half, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);   // largest finite half
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);   // rounds up to infinity
  EXPECT_EQ(FloatToHalf(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(1e-9f), 0x0000);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);  // halfway between 1 and the next half: ties to even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    bool nan = (half & 0x7c00) == 0x7c00 && (half & 0x3ff) != 0;
    if (nan) continue;
    ASSERT_EQ(FloatToHalf(HalfToFloat(half)), half) << std::hex << bits;
  }
}

TEST(BFloat16, KnownValuesAndRoundTrip) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80);  // tie: to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t value = static_cast<uint16_t>(bits);
    if ((value & 0x7f80) == 0x7f80 && (value & 0x7f) != 0) continue;  // NaN payloads
    ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(value)), value) << std::hex << bits;
  }
}

}  // namespace
}  // namespace srunway::common
