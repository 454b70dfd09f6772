// What the CUDA operations ask of the hardware directly: the kernel launch, dynamic shared memory, and the
// mma.sync, ldmatrix and cp.async instructions. Everything else in trainer/ops/cuda is plain CUDA C++, so that
// tests/emulated_gpu/ can run the same kernels on the CPU by putting its own version of this one header first on
// the include path; nothing that touches the hardware belongs anywhere else.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace srunway::trainer::cuda {

// kernel<<<grid, block, shared_bytes, stream>>>(args...); Launched() (common.cuh) reads whether it was queued.
template <typename... Params, typename... Args>
void LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                  Args&&... args) {
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
}

// The block's dynamic shared memory (the launch's shared_bytes), 128-byte aligned.
template <typename T>
__device__ __forceinline__ T* DynamicShared() {
  extern __shared__ __align__(128) unsigned char dynamic_shared[];
  return reinterpret_cast<T*>(dynamic_shared);
}

// c += a b on the tensor cores: mma.sync.m16n8k16, bf16 inputs, fp32 accumulators. The fragments' layouts are the
// PTX ISA's, written out at the top of flash_attention_mma.cu.
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 x 8 bf16 matrices from shared memory (ldmatrix.x4): lane l gives the address of row l % 8 of matrix l / 8,
// and lane 4 g + t receives r[i] = matrix i's row g, columns 2t and 2t + 1: an A fragment of a row-major tile, or a
// B fragment of a tile stored as its transpose.
__device__ __forceinline__ void LoadMatrices(uint32_t (&r)[4], const __nv_bfloat16* row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Four 8 x 8 bf16 matrices from shared memory, each transposed (ldmatrix.x4.trans): lane l gives the address of
// row l % 8 of matrix l / 8, and r[i] receives matrix i as a B (or A) fragment register.
__device__ __forceinline__ void LoadTransposed(uint32_t (&r)[4], const __nv_bfloat16* row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// cp.async (sm_80 on): kBytes (4, 8 or 16) from global to shared memory, without passing through registers;
// zeros where !valid (the source, which must still be a global address, is not read then). The copy lands some
// time before the issuing thread's WaitCopies for its group returns; other threads see it after a barrier.
template <int kBytes>
__device__ __forceinline__ void CopyAsync(void* shared_dst, const void* global_src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst));
  if constexpr (kBytes == 16) {  // .cg: through L2 only, the tiles are read once per block
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src), "r"(valid ? 16 : 0)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(global_src), "n"(kBytes),
                 "r"(valid ? kBytes : 0)
                 : "memory");
  }
}

// Closes the calling thread's group of cp.async copies (cp.async.commit_group).
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Returns once all but the newest kPending of the calling thread's committed groups have landed.
template <int kPending>
__device__ __forceinline__ void WaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace srunway::trainer::cuda
