// Tests for the half-precision conversions the MPI backend reduces with, and the one-rank communicator.
#include "launcher/comm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace srunway::launcher {
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

TEST(SelfComm, OneRankOperations) {
  auto bootstrap = CreateSingleBootstrap();
  auto comm = CreateComm(CommKind::kAuto, *bootstrap);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  EXPECT_EQ((*comm)->kind(), CommKind::kSelf);
  float data[3] = {1, 2, 3};
  ASSERT_TRUE((*comm)->AllReduce(data, 3, DataType::kFloat32, ReduceOp::kSum).ok());
  EXPECT_EQ(data[2], 3.0f);
  int32_t gathered = 0, mine = 7;
  ASSERT_TRUE((*comm)->AllGather(&mine, &gathered, 1, DataType::kInt32).ok());
  EXPECT_EQ(gathered, 7);
  auto handle = (*comm)->IReduceScatter(data, data, 3, DataType::kFloat32, ReduceOp::kMax);
  ASSERT_TRUE(handle.ok());
  EXPECT_TRUE((*handle)->Wait().ok());
  EXPECT_FALSE((*comm)->Send(data, 1, DataType::kFloat32, 1).ok());
  EXPECT_FALSE((*comm)->Broadcast(data, 1, DataType::kFloat32, 3).ok());
  EXPECT_EQ(ParseCommKind("nccl").status().message(), "unknown communicator 'nccl' (expected auto, mpi or self)");
}

}  // namespace
}  // namespace srunway::launcher
