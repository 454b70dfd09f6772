// The emulated GPU itself: that it runs every thread once with the right coordinates, refuses the launches the
// hardware refuses, exchanges values across a warp as the hardware does, exposes a missing __syncthreads in one
// of its two warp orders and a dependence between blocks in one of its two block orders, starts shared memory as
// NaN in every block, and ends the program on a warp-wide operation that not every lane reaches; built for
// ThreadSanitizer (the race check), that a missing barrier or __syncwarp is a reported data race and that
// barriers, warp syncs and atomics are not. cp.async's copies land after the wait and a barrier, and a kernel
// that reads one before its wait, or copies into a tile another warp still reads, gets a wrong answer.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "common/sanitizers.h"
#include "cuda_runtime.h"
#include "trainer/ops/cuda/hardware.cuh"

namespace {

using srunway::trainer::cuda::CommitCopies;
using srunway::trainer::cuda::CopyAsync;
using srunway::trainer::cuda::DynamicShared;
using srunway::trainer::cuda::LaunchKernel;
using srunway::trainer::cuda::LoadMatrices;
using srunway::trainer::cuda::LoadTransposed;
using srunway::trainer::cuda::WaitCopies;

__global__ void CountThreads(int* counts, int* wrong) {
  const unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  const unsigned width = gridDim.x * blockDim.x;
  atomicAdd(&counts[y * width + x], 1);
  if (threadIdx.x >= blockDim.x || threadIdx.y >= blockDim.y || blockIdx.x >= gridDim.x) atomicAdd(wrong, 1);
}

TEST(EmulatedGpu, RunsEveryThreadOnceWithItsCoordinates) {
  const dim3 grid(3, 2), block(33, 2);  // a block that ends mid-warp
  std::vector<int> counts(3 * 33 * 2 * 2, 0);
  int wrong = 0;
  LaunchKernel(CountThreads, grid, block, 0, nullptr, counts.data(), &wrong);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i], 1) << "thread " << i;
  EXPECT_EQ(wrong, 0);
}

__global__ void Nothing(int* ran) {
  if (threadIdx.x == 0) *ran = 1;
}

TEST(EmulatedGpu, RefusesWhatTheHardwareRefuses) {
  int ran = 0;
  LaunchKernel(Nothing, dim3(1), dim3(1025), 0, nullptr, &ran);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError clears the error";
  LaunchKernel(Nothing, dim3(1, 65536), dim3(32), 0, nullptr, &ran);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  LaunchKernel(Nothing, dim3(1), dim3(32), 49 * 1024, nullptr, &ran);  // over 48 KiB without asking
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(ran, 0);
  ASSERT_EQ(cudaFuncSetAttribute(Nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024), cudaSuccess);
  LaunchKernel(Nothing, dim3(1), dim3(32), 64 * 1024, nullptr, &ran);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(cudaFuncSetAttribute(Nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
            cudaErrorInvalidValue);
}

__global__ void WarpSums(float* out) {
  float x = static_cast<float>(threadIdx.x);
  const float partner = __shfl_xor_sync(0xffffffffu, x, 5);
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  out[2 * threadIdx.x] = x;
  out[2 * threadIdx.x + 1] = partner;
}

TEST(EmulatedGpu, ShufflesExchangeAcrossTheWarp) {
  std::vector<float> out(2 * 64);
  LaunchKernel(WarpSums, dim3(1), dim3(64), 0, nullptr, out.data());
  for (int t = 0; t < 64; ++t) {
    const int warp_first = t / 32 * 32;
    EXPECT_EQ(out[2 * t], static_cast<float>(32 * warp_first + 31 * 32 / 2)) << "thread " << t;
    EXPECT_EQ(out[2 * t + 1], static_cast<float>(t ^ 5)) << "thread " << t;
  }
}

// Each thread writes its slot of shared memory and reads the next warp's: right only with the barrier.
__global__ void NextWarp(float* out, bool barrier) {
  float* slots = DynamicShared<float>();
  slots[threadIdx.x] = static_cast<float>(threadIdx.x);
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = slots[(threadIdx.x + 32) % blockDim.x];
}

TEST(EmulatedGpu, AMissingBarrierShowsInOneOfTheTwoBlockOrders) {
#ifdef SRUNWAY_TSAN
  GTEST_SKIP() << "the race check reports the race itself (EmulatedGpuRaceDeathTest)";
#endif
  for (bool barrier : {true, false}) {
    std::vector<float> out(2 * 128);
    LaunchKernel(NextWarp, dim3(2), dim3(128), 128 * sizeof(float), nullptr, out.data(), barrier);
    int wrong = 0;
    for (int i = 0; i < 256; ++i) wrong += out[i] != static_cast<float>((i % 128 + 32) % 128) ? 1 : 0;
    if (barrier) {
      EXPECT_EQ(wrong, 0);
    } else {
      EXPECT_GT(wrong, 0) << "a read of another warp's slot before __syncthreads went unnoticed";
    }
  }
}

// Thread t of a block of 64 copies in[t] (zeros for odd t when `zero_odd`) into slot t + 32 (mod 64) of shared
// memory with cp.async, waits for it only if `wait`, and after a barrier reads slot t.
__global__ void CopyToNextWarp(float* out, const float* in, bool wait, bool zero_odd) {
  float* slots = DynamicShared<float>();
  const int t = static_cast<int>(threadIdx.x);
  CopyAsync<4>(slots + (t + 32) % 64, in + blockIdx.x * 64 + t, !(zero_odd && t % 2 == 1));
  CommitCopies();
  if (wait) WaitCopies<0>();
  __syncthreads();
  out[blockIdx.x * 64 + t] = slots[t];
}

// Each thread reads the other warp's slot, then (after a barrier only if `barrier`) copies in[t] into its own.
__global__ void CopyOverTheOtherWarpsRead(float* out, const float* in, bool barrier) {
  float* slots = DynamicShared<float>();
  const int t = static_cast<int>(threadIdx.x);
  slots[t] = static_cast<float>(t);
  __syncthreads();
  const float seen = slots[(t + 32) % 64];
  if (barrier) __syncthreads();
  CopyAsync<4>(slots + t, in + t, true);
  CommitCopies();
  WaitCopies<0>();
  out[blockIdx.x * 64 + t] = seen;
}

__global__ void CopyMisaligned(const void* in) { CopyAsync<16>(DynamicShared<float>() + 1, in, true); }

TEST(EmulatedGpu, AsyncCopiesLandAfterTheWaitAndABarrier) {
  std::vector<float> in(128);
  std::iota(in.begin(), in.end(), 1000.0f);
  for (bool zero_odd : {false, true}) {
    std::vector<float> out(128);
    LaunchKernel(CopyToNextWarp, dim3(2), dim3(64), 64 * sizeof(float), nullptr, out.data(), in.data(), true, zero_odd);
    for (int i = 0; i < 128; ++i) {
      const int source = i / 64 * 64 + (i % 64 + 32) % 64;
      EXPECT_EQ(out[i], zero_odd && source % 2 == 1 ? 0.0f : in[source]) << "element " << i;
    }
  }
}

TEST(EmulatedGpu, AReadBeforeTheWaitShowsInOneOfTheTwoWarpOrders) {
  std::vector<float> in(128);
  std::iota(in.begin(), in.end(), 1000.0f);
  std::vector<float> out(128);
  LaunchKernel(CopyToNextWarp, dim3(2), dim3(64), 64 * sizeof(float), nullptr, out.data(), in.data(), false, false);
  int wrong = 0;
  for (int i = 0; i < 128; ++i) wrong += out[i] != in[i / 64 * 64 + (i % 64 + 32) % 64] ? 1 : 0;
  EXPECT_GT(wrong, 0) << "a read of a cp.async copy before the wait went unnoticed";
}

TEST(EmulatedGpu, ACopyOverATileStillReadShowsInOneOfTheTwoWarpOrders) {
#ifdef SRUNWAY_TSAN
  GTEST_SKIP() << "the race check reports the race itself (EmulatedGpuRaceDeathTest)";
#endif
  std::vector<float> in(64);
  std::iota(in.begin(), in.end(), 1000.0f);
  for (bool barrier : {true, false}) {
    std::vector<float> out(128);
    LaunchKernel(CopyOverTheOtherWarpsRead, dim3(2), dim3(64), 64 * sizeof(float), nullptr, out.data(), in.data(),
                 barrier);
    int wrong = 0;
    for (int i = 0; i < 128; ++i) wrong += out[i] != static_cast<float>((i % 64 + 32) % 64) ? 1 : 0;
    if (barrier) {
      EXPECT_EQ(wrong, 0);
    } else {
      EXPECT_GT(wrong, 0) << "a cp.async copy over a tile another warp still reads went unnoticed";
    }
  }
}

// Each thread reads its slot of static and of dynamic shared memory, written first only if `write`.
__global__ void ReadShared(float* out, bool write) {
  __shared__ float slots[32];
  float* dynamic_slots = DynamicShared<float>();
  if (write) {
    slots[threadIdx.x] = static_cast<float>(blockIdx.x);
    dynamic_slots[threadIdx.x] = static_cast<float>(blockIdx.x);
  }
  __syncthreads();
  out[2 * (blockIdx.x * 32 + threadIdx.x)] = slots[threadIdx.x];
  out[2 * (blockIdx.x * 32 + threadIdx.x) + 1] = dynamic_slots[threadIdx.x];
}

TEST(EmulatedGpu, SharedMemoryStartsAsNaNInEveryBlock) {
  std::vector<float> out(2 * 2 * 32);
  LaunchKernel(ReadShared, dim3(2), dim3(32), 32 * sizeof(float), nullptr, out.data(), true);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(i / 64)) << "element " << i;
  // What the last launch's blocks wrote is not what this launch's blocks find.
  LaunchKernel(ReadShared, dim3(2), dim3(32), 32 * sizeof(float), nullptr, out.data(), false);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(std::isnan(out[i])) << (i % 2 == 0 ? "static" : "dynamic") << " element " << i << ": " << out[i];
  }
}

// Block b adds one to what block b - 1 wrote: right only if the blocks ran in order, which no GPU promises.
__global__ void ChainBlocks(int* values) {
  if (threadIdx.x == 0) values[blockIdx.x + 1] = values[blockIdx.x] + 1;
}

TEST(EmulatedGpu, ABlockReadingAnotherBlocksOutputIsWrongOnOneOfTwoLaunches) {
  int right = 0;
  for (int launch = 0; launch < 2; ++launch) {
    std::vector<int> values(9, 0);
    LaunchKernel(ChainBlocks, dim3(8), dim3(32), 0, nullptr, values.data());
    right += values[8] == 8 ? 1 : 0;
  }
  EXPECT_EQ(right, 1);
}

// Four 8 x 8 matrices in shared memory, element (m, row, column) = 64 m + 8 row + column; each lane names row
// lane % 8 of matrix lane / 8 and keeps the four registers ldmatrix (and ldmatrix.trans) gives it.
__global__ void LoadFourMatrices(uint32_t* plain, uint32_t* transposed) {
  auto* shared = DynamicShared<__nv_bfloat16>();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) shared[i] = __float2bfloat16(static_cast<float>(i));
  __syncthreads();
  uint32_t r[4];
  LoadMatrices(r, shared + threadIdx.x * 8);
  for (int m = 0; m < 4; ++m) plain[threadIdx.x * 4 + m] = r[m];
  LoadTransposed(r, shared + threadIdx.x * 8);
  for (int m = 0; m < 4; ++m) transposed[threadIdx.x * 4 + m] = r[m];
}

// PTX's ldmatrix: lane 4 g + t holds row g, columns 2t and 2t + 1 of each matrix (the lower column in the low
// half); .trans holds rows 2t and 2t + 1 of column g.
TEST(EmulatedGpu, LdmatrixGivesEachLaneItsFragment) {
  std::vector<uint32_t> plain(128), transposed(128);
  LaunchKernel(LoadFourMatrices, dim3(1), dim3(32), 512, nullptr, plain.data(), transposed.data());
  auto value = [](uint32_t half) {
    __nv_bfloat16 x;
    x.__x = static_cast<uint16_t>(half);
    return static_cast<int>(__bfloat162float(x));
  };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int m = 0; m < 4; ++m) {
      const uint32_t p = plain[lane * 4 + m], q = transposed[lane * 4 + m];
      EXPECT_EQ(value(p & 0xffff), 64 * m + 8 * g + 2 * t) << "lane " << lane << " matrix " << m;
      EXPECT_EQ(value(p >> 16), 64 * m + 8 * g + 2 * t + 1) << "lane " << lane << " matrix " << m;
      EXPECT_EQ(value(q & 0xffff), 64 * m + 8 * (2 * t) + g) << "lane " << lane << " matrix " << m;
      EXPECT_EQ(value(q >> 16), 64 * m + 8 * (2 * t + 1) + g) << "lane " << lane << " matrix " << m;
    }
  }
}

__global__ void ExitBeforeShuffle(float* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void ShuffleAgainstBarrier(float* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
    __syncthreads();
  }
}

__global__ void ShuffleAgainstSyncWarp(float* out) {
  if (threadIdx.x % 32 >= 16) {
    __syncwarp();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  }
}

__global__ void LdmatrixOutsideShared(uint32_t* out, const __nv_bfloat16* global) {
  uint32_t r[4];
  LoadTransposed(r, global + threadIdx.x % 8 * 8);
  out[threadIdx.x] = r[0];
}

TEST(EmulatedGpuDeathTest, AWarpOperationNotEveryLaneReachesEndsTheProgram) {
  std::vector<float> out(32);
  EXPECT_DEATH(LaunchKernel(ExitBeforeShuffle, dim3(1), dim3(32), 0, nullptr, out.data()),
               "lane 3 of warp 0 has exited while lane 0 waits for it at a shuffle");
  EXPECT_DEATH(LaunchKernel(ShuffleAgainstBarrier, dim3(1), dim3(32), 0, nullptr, out.data()),
               "lane 0 of warp 0 waits at __syncthreads while lane 1 waits for it at a shuffle");
  // Named by the lowest two lanes apart, whichever way the block runs its lanes (two blocks: one of each).
  EXPECT_DEATH(LaunchKernel(ShuffleAgainstSyncWarp, dim3(2), dim3(32), 0, nullptr, out.data()),
               "lanes 0 and 16 of warp 0 wait at different warp-wide operations \\(a shuffle, __syncwarp\\)");
  std::vector<__nv_bfloat16> global(64);
  std::vector<uint32_t> words(32);
  EXPECT_DEATH(LaunchKernel(LdmatrixOutsideShared, dim3(1), dim3(32), 256, nullptr, words.data(), global.data()),
               "ldmatrix: a row address outside the block's dynamic shared memory");
}

TEST(EmulatedGpuDeathTest, AMisalignedAsyncCopyEndsTheProgram) {
  std::vector<float> global(64);
  EXPECT_DEATH(LaunchKernel(CopyMisaligned, dim3(1), dim3(32), 256, nullptr, global.data()),
               "cp.async: an address not aligned to the copy's size");
}

#ifdef SRUNWAY_TSAN
// Each lane writes its slot and reads its neighbour's: a race unless __syncwarp orders the warp's lanes (since
// Volta, lanes of a warp are not in lockstep).
__global__ void NextLane(float* out, bool sync) {
  float* slots = DynamicShared<float>();
  slots[threadIdx.x] = static_cast<float>(threadIdx.x);
  if (sync) __syncwarp();
  out[threadIdx.x] = slots[(threadIdx.x + 1) % 32];
}

__global__ void CountTogether(int* count) { atomicAdd(count, 1); }

TEST(EmulatedGpuRaceTest, BarriersWarpSyncsAndAtomicsOrderThreads) {
  std::vector<float> out(2 * 128);
  LaunchKernel(NextWarp, dim3(2), dim3(128), 128 * sizeof(float), nullptr, out.data(), true);
  LaunchKernel(NextLane, dim3(1), dim3(32), 32 * sizeof(float), nullptr, out.data(), true);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], static_cast<float>((t + 1) % 32));
  int count = 0;
  LaunchKernel(CountTogether, dim3(2), dim3(64), 0, nullptr, &count);
  EXPECT_EQ(count, 128);
}

TEST(EmulatedGpuRaceDeathTest, AMissingBarrierOrWarpSyncIsAReportedRace) {
  std::vector<float> out(2 * 128);
  EXPECT_EXIT(LaunchKernel(NextWarp, dim3(2), dim3(128), 128 * sizeof(float), nullptr, out.data(), false),
              testing::ExitedWithCode(66), "ThreadSanitizer: data race");
  EXPECT_EXIT(LaunchKernel(NextLane, dim3(1), dim3(32), 32 * sizeof(float), nullptr, out.data(), false),
              testing::ExitedWithCode(66), "ThreadSanitizer: data race");
  std::vector<float> in(64);
  std::iota(in.begin(), in.end(), 1000.0f);
  EXPECT_EXIT(LaunchKernel(CopyOverTheOtherWarpsRead, dim3(2), dim3(64), 64 * sizeof(float), nullptr, out.data(),
                           in.data(), false),
              testing::ExitedWithCode(66), "ThreadSanitizer: data race");
}
#endif

}  // namespace
