// The one-rank communicator, and the choice of backend on a machine without a GPU.
#include "common/dynlib.h"
#include "launcher/comm_factory.h"

#include <gtest/gtest.h>


namespace srunway::launcher {
namespace {

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
