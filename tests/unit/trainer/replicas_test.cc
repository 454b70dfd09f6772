// --check-weight-hash-across-dp-replicas-interval's parts: the hash of a device's bytes, read through the host in
// blocks where they live on a GPU (here the stand-in driver's, when SRUNWAY_FAKE_CUDA_DRIVER names it), and the
// line that names the ranks whose weights differ.
#include "trainer/train/replicas.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace srunway::trainer {
namespace {

std::string Name(int rank) { return "rank " + std::to_string(rank) + " on node" + std::to_string(rank / 2 + 1); }

TEST(Replicas, AllAlikeSayNothing) {
  EXPECT_EQ(DescribeReplicas({7}, Name), "");
  EXPECT_EQ(DescribeReplicas({7, 7, 7, 7}, Name), "");
}

TEST(Replicas, TheRanksApartFromMostAreNamed) {
  EXPECT_EQ(DescribeReplicas({0xaa, 0xaa, 0xaa, 0xbb}, Name),
            "rank 3 on node2 (hash 00000000000000bb) holds other weights than the 3 other ranks (hash "
            "00000000000000aa)");
  EXPECT_EQ(DescribeReplicas({0xaa, 0xbb, 0xaa, 0xcc, 0xaa}, Name),
            "rank 1 on node1 (hash 00000000000000bb), rank 3 on node2 (hash 00000000000000cc) hold other weights "
            "than the 3 other ranks (hash 00000000000000aa)");
  EXPECT_EQ(DescribeReplicas({0xbb, 0xaa, 0xaa, 0xbb, 0xaa}, Name),
            "rank 0 on node1 and rank 3 on node2 (hash 00000000000000bb) hold other weights than the 3 other ranks "
            "(hash 00000000000000aa)");
  // Six of eleven: a group of five names four.
  std::vector<uint64_t> hashes(11, 0xaa);
  for (int r : {1, 3, 5, 7, 9}) hashes[static_cast<size_t>(r)] = 0xbb;
  EXPECT_EQ(DescribeReplicas(hashes, Name),
            "rank 1 on node1, rank 3 on node2, rank 5 on node3, rank 7 on node4 and 1 more (hash 00000000000000bb) "
            "hold other weights than the 6 other ranks (hash 00000000000000aa)");
}

TEST(Replicas, WithoutAMajorityEveryGroupIsNamed) {
  EXPECT_EQ(DescribeReplicas({0xaa, 0xbb}, Name),
            "no hash is held by more than half of the ranks: rank 0 on node1 has hash 00000000000000aa; rank 1 on "
            "node1 has hash 00000000000000bb");
  EXPECT_EQ(DescribeReplicas({0xaa, 0xbb, 0xaa, 0xbb}, Name),
            "no hash is held by more than half of the ranks: rank 0 on node1 and rank 2 on node2 have hash "
            "00000000000000aa; rank 1 on node1 and rank 3 on node2 have hash 00000000000000bb");
}

// The same bytes hash alike on the host and, through blocks of any size, on a GPU.
TEST(Replicas, HashOfDeviceBytes) {
  std::vector<uint8_t> bytes(1000);
  std::iota(bytes.begin(), bytes.end(), uint8_t{3});
  const uint64_t want = XXH3_64bits(bytes.data(), bytes.size());
  std::unique_ptr<Device> cpu = NewCpuDevice();
  auto on_host = HashDeviceBytes(*cpu, bytes.data(), bytes.size());
  ASSERT_TRUE(on_host.ok()) << on_host.status().ToString();
  EXPECT_EQ(*on_host, want);
  bytes[999] ^= 1;
  EXPECT_NE(*HashDeviceBytes(*cpu, bytes.data(), bytes.size()), want);
  bytes[999] ^= 1;

#if !SRUNWAY_HAS_CUDA_DEVICE
  GTEST_SKIP() << "built without the CUDA device";
#endif
  const char* fake = getenv("SRUNWAY_FAKE_CUDA_DRIVER");
  if (fake == nullptr) GTEST_SKIP() << "SRUNWAY_FAKE_CUDA_DRIVER is not set (no stand-in driver in this build)";
  setenv("SRUNWAY_CUDA_DRIVER", fake, 1);
  setenv("FAKE_GPU_OPS_FINISH", "1", 1);
  auto gpu = OpenDevice(DeviceChoice::kCuda, 0);
  unsetenv("SRUNWAY_CUDA_DRIVER");
  unsetenv("FAKE_GPU_OPS_FINISH");
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto buffer = Buffer::Allocate(**gpu, DType::kInt32, bytes.size() / 4);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  ASSERT_TRUE((*gpu)->CopyFromHost(buffer->data(), bytes.data(), bytes.size(), (*gpu)->main_stream()).ok());
  for (size_t block : {size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 20}) {
    auto on_gpu = HashDeviceBytes(**gpu, buffer->data(), bytes.size(), block);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().ToString();
    EXPECT_EQ(*on_gpu, want) << "blocks of " << block;
  }
}

}  // namespace
}  // namespace srunway::trainer
