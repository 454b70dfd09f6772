// Bias gradient of a Linear layer: the column sums of dout, as the bias part of ops/cpu/matmul.cc's backward, in
// two passes so that enough blocks share the rows (a Linear layer's dout is [tokens, OC]: 16384 rows at GPT-2
// 124M's batch, and OC / 32 blocks alone would leave most of the GPU idle): first each chunk of rows' sums per
// column into scratch, then each column's chunk sums added in chunk order. The same order on every call with the
// same shape and scratch, so the result repeats bit for bit. Where OC is a multiple of 8 each lane reads 8 columns
// of a row in one 16-byte load (it read one 2-byte value per load before: a sixteenth of a 128-byte line per
// instruction, for about 2.7 GB read per GPT-2 124M step); the sums, and so the result, are the same either way.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kRowGroups = kThreads / kWarp;  // rows interleaved over the block's warps
constexpr int kChunkRows = 256;               // rows per block, unless the scratch asks for more

// Block (x, y) sums rows [y chunk, (y + 1) chunk) of its kWarp * kSpan columns, kSpan side by side per lane (a
// Pack8 of 8 read with one 16-byte load where OC allows, else 1): warp w takes rows w, w + 8, ... of the chunk,
// then the 8 partial sums of each column are added in warp order into partials[y][column]. Each column's sums
// are made in the same order whatever kSpan is.
template <int kSpan>
__global__ void ChunkSumsKernel(float* partials, const bf16* dout, int N, int OC, int chunk) {
  constexpr int kBlockColumns = kWarp * kSpan;
  __shared__ float partial[kRowGroups][kBlockColumns];
  const int lane = threadIdx.x % kWarp, group = threadIdx.x / kWarp;
  const int block_column = blockIdx.x * kBlockColumns;
  const int column = block_column + lane * kSpan;  // the lane's first; OC is a multiple of kSpan
  const int first = blockIdx.y * chunk, last = min(N, first + chunk);
  float sums[kSpan] = {};
  if (column < OC) {
#pragma unroll 4
    for (int row = first + group; row < last; row += kRowGroups) {
      if constexpr (kSpan == kPack) {
        Pack8 pack;
        pack.raw = *reinterpret_cast<const uint4*>(dout + int64_t{row} * OC + column);
        float x[kPack];
        Unpack(pack, x);
        for (int j = 0; j < kPack; ++j) sums[j] += x[j];
      } else {
        sums[0] += Load(dout, int64_t{row} * OC + column);
      }
    }
  }
  for (int j = 0; j < kSpan; ++j) partial[group][lane * kSpan + j] = sums[j];
  __syncthreads();
  for (int c = threadIdx.x; c < kBlockColumns && block_column + c < OC; c += blockDim.x) {
    float total = 0;
    for (int g = 0; g < kRowGroups; ++g) total += partial[g][c];
    partials[int64_t{blockIdx.y} * OC + block_column + c] = total;
  }
}

__device__ __forceinline__ float Value(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Value(const bf16* p, int64_t i) { return Load(p, i); }

// dbias[column] += the column's sums over `chunks` rows of partials (fp32 chunk sums, or one row of sums cuBLASLt
// wrote in fp32 or bf16), added in row order.
template <typename T>
__global__ void AddChunksKernel(float* dbias, const T* partials, int chunks, int OC) {
  const int column = blockIdx.x * blockDim.x + threadIdx.x;
  if (column >= OC) return;
  float total = 0;
  for (int c = 0; c < chunks; ++c) total += Value(partials, int64_t{c} * OC + column);
  dbias[column] += total;
}

template <typename T>
int LaunchAddChunks(float* dbias, const T* partials, int chunks, int OC, Stream stream) {
  LaunchKernel(AddChunksKernel<T>, static_cast<unsigned>((OC + kThreads - 1) / kThreads), kThreads, 0,
               AsStream(stream), dbias, partials, chunks, OC);
  return Launched();
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
  const bool packed = Vectorizable(dout, OC);
  const int block_columns = kWarp * (packed ? kPack : 1);
  const dim3 grid(static_cast<unsigned>((OC + block_columns - 1) / block_columns), static_cast<unsigned>(chunks));
  LaunchKernel(packed ? ChunkSumsKernel<kPack> : ChunkSumsKernel<1>, grid, kThreads, 0, AsStream(stream), scratch, dout,
               N, OC, chunk);
  if (int rc = Launched(); rc != 0) return rc;
  return LaunchAddChunks(dbias, static_cast<const float*>(scratch), chunks, OC, stream);
}

int AddBiasGradient(float* dbias, const float* sums, int OC, Stream stream) {
  return OC <= 0 ? 0 : LaunchAddChunks(dbias, sums, 1, OC, stream);
}

int AddBf16BiasGradient(float* dbias, const bf16* sums, int OC, Stream stream) {
  return OC <= 0 ? 0 : LaunchAddChunks(dbias, sums, 1, OC, stream);
}

}  // namespace srunway::trainer::cuda
