// Sums of squares by fixed blocks of 4096 values, for the global gradient norm.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

// One thread block per block of values: each thread sums a stride of it in double, then the warp sums and the
// block's warps are added in order.
__global__ void SumOfSquaresKernel(double* partials, const float* values, int64_t n) {
  __shared__ double warps[kThreads / kWarp];
  const int64_t begin = int64_t{blockIdx.x} * kSumOfSquaresBlock;
  const int64_t end = begin + kSumOfSquaresBlock < n ? begin + kSumOfSquaresBlock : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) sum += static_cast<double>(values[i]) * values[i];
  for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % kWarp == 0) warps[threadIdx.x / kWarp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kThreads / kWarp; ++w) total += warps[w];
    partials[blockIdx.x] = total;
  }
}

}  // namespace

int SumOfSquaresPartials(double* partials, const float* values, int64_t n, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(SumOfSquaresKernel, static_cast<unsigned>(SumOfSquaresBlocks(n)), kThreads, 0, AsStream(stream),
               partials, values, n);
  return Launched();
}

}  // namespace srunway::trainer::cuda
