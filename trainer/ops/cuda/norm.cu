// Sums of squares by fixed blocks of 4096 values, then of the blocks' sums, for the global gradient norm; and the
// same walk counting zeros (Megatron's --log-num-zeros-in-grad).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

// One thread block per block of values: each thread sums a stride of it in double (the squares, or with
// kCountZeros one for each zero: exact, as integers below 2^53 are), then the warp sums and the block's warps are
// added in order.
template <bool kCountZeros>
__global__ void BlockSumsKernel(double* partials, const float* values, int64_t n) {
  __shared__ double warps[kThreads / kWarp];
  const int64_t begin = int64_t{blockIdx.x} * kSumOfSquaresBlock;
  const int64_t end = begin + kSumOfSquaresBlock < n ? begin + kSumOfSquaresBlock : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    sum += kCountZeros ? (values[i] == 0.0f ? 1.0 : 0.0) : static_cast<double>(values[i]) * values[i];
  }
  sum = BlockSum(sum, warps);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

constexpr int kTotalThreads = 1024;

// The blocks' sums added by one block: thread t adds partials t, t + 1024, ... in turn, then the threads' sums are
// added by the warps' fixed tree and the warps in order. On the device, so that the step reads back one number, not
// one per 4096 values (2.5 MB at 1.3B parameters, whose copy and addition on the host left the GPU idle for 0.6 ms
// before AdamW on an H200).
__global__ void SumOfPartialsKernel(double* total, const double* partials, int64_t count) {
  __shared__ double warps[kTotalThreads / kWarp];
  double sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = BlockSum(sum, warps);
  if (threadIdx.x == 0) *total = sum;
}

template <bool kCountZeros>
int BlockSums(double* total, double* partials, const float* values, int64_t n, Stream stream) {
  if (n <= 0) return static_cast<int>(cudaMemsetAsync(total, 0, sizeof(double), AsStream(stream)));
  const int64_t blocks = SumOfSquaresBlocks(n);
  LaunchKernel(BlockSumsKernel<kCountZeros>, static_cast<unsigned>(blocks), kThreads, 0, AsStream(stream), partials,
               values, n);
  if (int rc = Launched(); rc != 0) return rc;
  LaunchKernel(SumOfPartialsKernel, 1, kTotalThreads, 0, AsStream(stream), total, partials, blocks);
  return Launched();
}

}  // namespace

int SumOfSquares(double* total, double* partials, const float* values, int64_t n, Stream stream) {
  return BlockSums<false>(total, partials, values, n, stream);
}

int CountZeros(double* total, double* partials, const float* values, int64_t n, Stream stream) {
  return BlockSums<true>(total, partials, values, n, stream);
}

}  // namespace srunway::trainer::cuda
