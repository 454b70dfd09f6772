// Token (+ learned position) embedding, as ops/cpu/embedding.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void EmbeddingForwardKernel(bf16* out, const int32_t* tokens, const int32_t* positions, const bf16* wte,
                                       const bf16* wpe, int T, int C, float scale, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t bt = i / C;
    const int c = static_cast<int>(i % C);
    float x = scale * Load(wte, int64_t{tokens[bt]} * C + c);
    if (wpe != nullptr) x += Load(wpe, (positions != nullptr ? positions[bt] : bt % T) * C + c);
    Store(out, i, x);
  }
}

// Rows of dwte (or, with documents, of dwpe) chosen by rows[bt], repeated rows meeting in any order, times scale.
__global__ void EmbeddingBackwardRows(float* dtable, const bf16* dout, const int32_t* rows, int C, float scale,
                                      int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    atomicAdd(&dtable[int64_t{rows[i / C]} * C + i % C], scale * Load(dout, i));
  }
}

// One thread per (t, c), summing over the batch in order.
__global__ void EmbeddingBackwardPositions(float* dwpe, const bf16* dout, int B, int T, int C) {
  const int64_t n = int64_t{T} * C;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0;
    for (int b = 0; b < B; ++b) sum += Load(dout, int64_t{b} * n + i);
    dwpe[i] += sum;
  }
}

}  // namespace

int EmbeddingForward(bf16* out, const int32_t* tokens, const int32_t* positions, const bf16* wte, const bf16* wpe,
                     int B, int T, int C, float scale, Stream stream) {
  const int64_t n = int64_t{B} * T * C;
  if (n <= 0) return 0;
  LaunchKernel(EmbeddingForwardKernel, Blocks(n), kThreads, 0, AsStream(stream), out, tokens, positions, wte, wpe, T,
               C, scale, n);
  return Launched();
}

int EmbeddingBackward(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, const int32_t* positions,
                      int B, int T, int C, float scale, Stream stream) {
  const int64_t n = int64_t{B} * T * C;
  if (n <= 0) return 0;
  LaunchKernel(EmbeddingBackwardRows, Blocks(n), kThreads, 0, AsStream(stream), dwte, dout, tokens, C, scale, n);
  if (int rc = Launched(); rc != 0 || dwpe == nullptr) return rc;
  if (positions != nullptr) {
    LaunchKernel(EmbeddingBackwardRows, Blocks(n), kThreads, 0, AsStream(stream), dwpe, dout, positions, C, 1.0f, n);
  } else {
    LaunchKernel(EmbeddingBackwardPositions, Blocks(int64_t{T} * C), kThreads, 0, AsStream(stream), dwpe, dout, B, T,
                 C);
  }
  return Launched();
}

}  // namespace srunway::trainer::cuda
