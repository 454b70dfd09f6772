// cudnn_attention.cc's graphs against the real cuDNN of this machine, which checks every operation's tensors and
// the graph without a GPU (running them is the gpu suite's). Skipped where no cuDNN 9 can be loaded.
#include <gtest/gtest.h>

#include "trainer/ops/cuda/cudnn_attention.h"

namespace srunway::trainer::cuda {
namespace {

class CudnnGraphTest : public testing::Test {
 protected:
  void SetUp() override {
    // A shape every cuDNN builds, to tell "no cuDNN here" from a graph it refuses.
    const common::Status probe = CudnnAttention::CheckGraphs("", {1, 16, 1, 1, 16});
    if (probe.code() == common::StatusCode::kNotFound) GTEST_SKIP() << probe.message();
  }
};

TEST_F(CudnnGraphTest, BuildsGpt2Shapes) {
  const common::Status status = CudnnAttention::CheckGraphs("", {16, 1024, 12, 12, 64});
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST_F(CudnnGraphTest, BuildsGroupedQueryShapes) {
  const common::Status status = CudnnAttention::CheckGraphs("", {2, 256, 8, 2, 128});
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST_F(CudnnGraphTest, RefusesAnImpossibleShapeNamingTheOperation) {
  // Query heads that no K/V head count divides: the first matmul's batch dimensions cannot broadcast.
  const common::Status status = CudnnAttention::CheckGraphs("", {2, 64, 3, 2, 64});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("causal attention forward at B 2 T 64 H 3 KV 2 hd 64"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("matmul operation"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace srunway::trainer::cuda
