// Tests for the half-precision conversions the MPI backend reduces with, and the one-rank communicator.
#include "common/dynlib.h"
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
  auto comm = CreateComm(CommKind::kSelf, *bootstrap);
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
  float out[3] = {};
  ASSERT_TRUE((*comm)->AllToAll(data, out, 3, DataType::kFloat32).ok());
  EXPECT_EQ(out[0], 1.0f);
  ASSERT_TRUE((*comm)->Reduce(data, out, 3, DataType::kFloat32, ReduceOp::kSum, 0).ok());
  EXPECT_FALSE((*comm)->Reduce(data, out, 3, DataType::kFloat32, ReduceOp::kSum, 1).ok());
  ASSERT_TRUE((*comm)->SendRecv(&mine, 0, &gathered, 0, 1, DataType::kInt32).ok());
  auto split = (*comm)->Split(0, 0);
  ASSERT_TRUE(split.ok() && *split != nullptr);
  EXPECT_EQ((*split)->size(), 1);
  auto none = (*comm)->Split(-1, 0);  // a negative color: in no communicator, as comm.h promises
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ(ParseCommKind("gloo").status().message(),
            "unknown communicator 'gloo' (expected auto, nccl, mpi or self)");
  EXPECT_EQ(*ParseCommKind("nccl"), CommKind::kNccl);
}

// Without a GPU, auto falls back to self for one rank, and asking for NCCL says why it cannot be had.
TEST(CommChoice, NcclWithoutGpu) {
  if (common::DynamicLibrary::Open("libcuda.so.1").ok()) GTEST_SKIP() << "this machine has a CUDA driver";
  auto bootstrap = CreateSingleBootstrap();
  auto fallback = CreateComm(CommKind::kAuto, *bootstrap);
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ((*fallback)->kind(), CommKind::kSelf);
  auto nccl = CreateComm(CommKind::kNccl, *bootstrap);
  ASSERT_FALSE(nccl.ok());
  EXPECT_TRUE(nccl.status().message().starts_with("rank 0 cannot use NCCL: ")) << nccl.status().message();
}

}  // namespace
}  // namespace srunway::launcher
