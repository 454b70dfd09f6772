// A strided block copy, as ops/cpu/copy_rows.cc.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void CopyRowsKernel(bf16* dst, int64_t dst_ld, const bf16* src, int64_t src_ld, int64_t rows,
                               int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * dst_ld + c] = src[r * src_ld + c];
  }
}

}  // namespace

int CopyRows(bf16* dst, int64_t dst_ld, const bf16* src, int64_t src_ld, int64_t rows, int64_t cols,
             Stream stream) {
  if (rows <= 0 || cols <= 0) return 0;
  LaunchKernel(CopyRowsKernel, Blocks(rows * cols), kThreads, 0, AsStream(stream), dst, dst_ld, src, src_ld, rows,
               cols);
  return Launched();
}

}  // namespace srunway::trainer::cuda
