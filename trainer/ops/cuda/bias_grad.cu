// Bias gradient of a Linear layer: the column sums of dout, as the bias part of ops/cpu/matmul.cc's backward.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kColumns = 32;                  // one warp's width of columns per block
constexpr int kRowGroups = kThreads / kColumns;  // rows interleaved over the block's warps

// Each block owns 32 columns; warp w sums rows w, w + 8, ... of them, then the 8 partial sums of each column are
// added in warp order.
__global__ void BiasGradientKernel(float* dbias, const bf16* dout, int N, int OC) {
  __shared__ float partial[kRowGroups][kColumns];
  const int column = blockIdx.x * kColumns + threadIdx.x % kColumns;
  const int group = threadIdx.x / kColumns;
  float sum = 0;
  if (column < OC) {
    for (int row = group; row < N; row += kRowGroups) sum += Load(dout, int64_t{row} * OC + column);
  }
  partial[group][threadIdx.x % kColumns] = sum;
  __syncthreads();
  if (group == 0 && column < OC) {
    float total = 0;
    for (int g = 0; g < kRowGroups; ++g) total += partial[g][threadIdx.x];
    dbias[column] += total;
  }
}

}  // namespace

int BiasGradient(float* dbias, const bf16* dout, int N, int OC, Stream stream) {
  if (N <= 0 || OC <= 0) return 0;
  BiasGradientKernel<<<(OC + kColumns - 1) / kColumns, kThreads, 0, AsStream(stream)>>>(dbias, dout, N, OC);
  return Launched();
}

}  // namespace srunway::trainer::cuda
