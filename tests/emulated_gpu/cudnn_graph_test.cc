// cudnn_attention.cc's graphs against the real cuDNN of this machine, without a GPU: cuDNN checks every
// operation's tensors and the graph, and its heuristics, told an H100's properties, find the fused attention
// engines that take them (running them is the gpu suite's). Skipped where no cuDNN 9 can be loaded.
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

// An H100 SXM 80GB in cuDNN's device-property JSON (CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION), as cuDNN 9.14
// printed it on one (the gpu suite's cuda_ops_cudnn, 2026-11-27): 132 SMs, 227 KiB of shared memory per block
// opted in, 50 MiB of L2, compute capability 9.0.
constexpr char kH100[] =
    R"({"maxGridSize":[2147483647,65535,65535],"maxBlockSize":[1024,1024,64],"regsPerBlock":65536,)"
    R"("multiProcessorCount":132,"warpSize":32,"maxSharedMemoryPerBlock":49152,)"
    R"("maxSharedMemoryPerBlockOptin":232448,"reservedSharedMemoryPerBlock":1024,"maxRegistersPerSM":65536,)"
    R"("maxCtasPerSM":32,"maxThreadsPerBlock":1024,"maxThreadsPerSM":2048,"pciDeviceId":6,"isTccDriver":0,)"
    R"("supportCoopLaunch":1,"totalGlobalMem":85017493504,"smClockRateKHz":1980000,"memClockRateKHz":2619000,)"
    R"("l2CacheSize":52428800,"cudaDeviceId":0,"deviceVer":900,"driverVer":13000,)"
    R"("deviceName":"NVIDIA H100 80GB HBM3"})";

// The fused engines recognise both graphs as attention (forward and backward, plain and grouped heads, the
// presets' head sizes); with the exponential of the softmax replaced by tanh every engine refused the forward.
TEST_F(CudnnGraphTest, FusedEnginesTakeTheGraphsOnAnH100) {
  for (const AttentionShape& shape : {AttentionShape{16, 1024, 12, 12, 64}, AttentionShape{8, 2048, 16, 16, 128},
                                      AttentionShape{2, 256, 8, 2, 128}, AttentionShape{2, 100, 4, 2, 16}}) {
    const common::Status status = CudnnAttention::CheckEngines("", shape, kH100);
    EXPECT_TRUE(status.ok()) << status.message();
  }
}

TEST_F(CudnnGraphTest, DevicePropertiesThatCudnnCannotReadAreAnError) {
  const common::Status status = CudnnAttention::CheckEngines("", {1, 16, 1, 1, 16}, R"({"maxGridSize":[1,1,1]})");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("reading the device properties failed"), std::string::npos) << status.message();
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
