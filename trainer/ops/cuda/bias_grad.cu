// Bias gradient of a Linear layer: the column sums of dout, as the bias part of ops/cpu/matmul.cc's backward, in
// two passes so that enough blocks share the rows (a Linear layer's dout is [tokens, OC]: 16384 rows at GPT-2
// 124M's batch, and OC / 32 blocks alone would leave most of the GPU idle): first each chunk of rows' sums per
// column into scratch, then each column's chunk sums added in chunk order. The same order on every call with the
// same shape and scratch, so the result repeats bit for bit.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kColumns = 32;                     // one warp's width of columns per block
constexpr int kRowGroups = kThreads / kColumns;  // rows interleaved over the block's warps
constexpr int kChunkRows = 256;                  // rows per block, unless the scratch asks for more

// Block (x, y) sums rows [y chunk, (y + 1) chunk) of its 32 columns: warp w takes rows w, w + 8, ... of the
// chunk, then the 8 partial sums of each column are added in warp order into partials[y][column].
__global__ void ChunkSumsKernel(float* partials, const bf16* dout, int N, int OC, int chunk) {
  __shared__ float partial[kRowGroups][kColumns];
  const int column = blockIdx.x * kColumns + threadIdx.x % kColumns;
  const int group = threadIdx.x / kColumns;
  const int first = blockIdx.y * chunk, last = min(N, first + chunk);
  float sum = 0;
  if (column < OC) {
    for (int row = first + group; row < last; row += kRowGroups) sum += Load(dout, int64_t{row} * OC + column);
  }
  partial[group][threadIdx.x % kColumns] = sum;
  __syncthreads();
  if (group == 0 && column < OC) {
    float total = 0;
    for (int g = 0; g < kRowGroups; ++g) total += partial[g][threadIdx.x];
    partials[int64_t{blockIdx.y} * OC + column] = total;
  }
}

__global__ void AddChunksKernel(float* dbias, const float* partials, int chunks, int OC) {
  const int column = blockIdx.x * blockDim.x + threadIdx.x;
  if (column >= OC) return;
  float total = 0;
  for (int c = 0; c < chunks; ++c) total += partials[int64_t{c} * OC + column];
  dbias[column] += total;
}

}  // namespace

int BiasGradient(float* dbias, const bf16* dout, int N, int OC, float* scratch, int64_t scratch_floats,
                 Stream stream) {
  if (N <= 0 || OC <= 0) return 0;
  if (scratch_floats < OC) return static_cast<int>(cudaErrorInvalidValue);
  // kChunkRows rows per chunk, or more (a multiple of the row groups) when the scratch holds fewer chunks.
  const int64_t most_chunks = scratch_floats / OC;
  int chunk = kChunkRows;
  if ((N + chunk - 1) / chunk > most_chunks) {
    chunk = static_cast<int>((N + most_chunks - 1) / most_chunks);
    chunk = (chunk + kRowGroups - 1) / kRowGroups * kRowGroups;
  }
  const int chunks = (N + chunk - 1) / chunk;
  const dim3 grid(static_cast<unsigned>((OC + kColumns - 1) / kColumns), static_cast<unsigned>(chunks));
  LaunchKernel(ChunkSumsKernel, grid, kThreads, 0, AsStream(stream), scratch, dout, N, OC, chunk);
  if (int rc = Launched(); rc != 0) return rc;
  LaunchKernel(AddChunksKernel, static_cast<unsigned>((OC + kThreads - 1) / kThreads), kThreads, 0, AsStream(stream),
               dbias, scratch, chunks, OC);
  return Launched();
}

}  // namespace srunway::trainer::cuda
