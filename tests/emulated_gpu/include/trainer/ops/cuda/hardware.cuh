// trainer/ops/cuda/hardware.cuh on tests/emulated_gpu's emulator: the launch runs the kernel on every emulated
// thread before it returns, dynamic shared memory is the block's NaN-filled buffer, mma.sync and ldmatrix are
// computed lane by lane from the fragment layouts of the PTX ISA (written out at the top of
// flash_attention_mma.cu), so the kernels' fragment bookkeeping is checked, not assumed, and cp.async's copies
// land at their issue or at their wait (emulator.h), so that a kernel relying on either shows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace srunway::trainer::cuda {

template <typename... Params, typename... Args>
void LaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t,
                  Args&&... args) {
  std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  emulated_gpu::Launch(reinterpret_cast<const void*>(kernel), __PRETTY_FUNCTION__, grid, block, shared_bytes,
                       [&] { std::apply(kernel, params); });
}

template <typename T>
T* DynamicShared() {
  return reinterpret_cast<T*>(emulated_gpu::DynamicShared());
}

namespace emulated {

inline float Bf16(uint32_t word, int half) {
  return __bfloat162float(__nv_bfloat16{static_cast<uint16_t>(word >> (16 * half))});
}

}  // namespace emulated

// m16n8k16, row.col: lane 4 g + t holds a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
// a[3] = A[g+8][2t+8, 2t+9]; b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]; c = C[g][2t, 2t+1], C[g+8][2t, 2t+1].
inline void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  namespace emu = emulated_gpu;
  emu::Words post = {a[0], a[1], a[2], a[3], b0, b1};
  emu::Post(post);
  emu::WarpSync(emu::Collective::kMma);
  const int g = emu::Lane() / 4, t = emu::Lane() % 4;
  // This lane's rows of A (g and g + 8) were posted by lanes 4 g + q, its columns of B (2t and 2t + 1) by lanes
  // 4 (2t) + q and 4 (2t + 1) + q, q holding k's pairs 2q, 2q + 1 and 2q + 8, 2q + 9: 12 lanes' words of the 32.
  emu::Words rows[4], columns[2][4];
  for (int q = 0; q < 4; ++q) {
    emu::ReadPosted(4 * g + q, rows[q]);
    for (int half = 0; half < 2; ++half) emu::ReadPosted(4 * (2 * t + half) + q, columns[half][q]);
  }
  for (int e = 0; e < 4; ++e) {
    const int lower = e / 2, half = e % 2;  // row g + 8 lower, column 2t + half
    float sum = c[e];
    for (int k = 0; k < 16; ++k) {
      const int q = k % 8 / 2, upper_k = k >= 8 ? 1 : 0;
      sum += emulated::Bf16(rows[q][lower + 2 * upper_k], k % 2) *
             emulated::Bf16(columns[half][q][4 + upper_k], k % 2);
    }
    c[e] = sum;
  }
}

// ldmatrix.m8n8.x4 (kTranspose: .trans): lane l gives the address of row l % 8 of matrix l / 8 (16 bytes, aligned,
// in shared memory); lane 4 g + t receives r[m] = matrix m's row g, columns 2t and 2t + 1 (transposed: its rows 2t
// and 2t + 1, column g).
template <bool kTranspose>
void LoadMatrixFragments(uint32_t (&r)[4], const __nv_bfloat16* row) {
  namespace emu = emulated_gpu;
  const auto* bytes = reinterpret_cast<const unsigned char*>(row);
  if (bytes < emu::DynamicShared() || bytes + 16 > emu::DynamicShared() + emu::DynamicSharedBytes()) {
    emu::Fail("ldmatrix: a row address outside the block's dynamic shared memory");
  }
  if (reinterpret_cast<uintptr_t>(bytes) % 16 != 0) emu::Fail("ldmatrix: a row address not 16-byte aligned");
  emu::Words post = {};
  std::memcpy(post, &row, sizeof(row));
  emu::Post(post);
  emu::WarpSync(emu::Collective::kLdmatrix);
  auto RowOf = [](int lane) {
    emu::Words posted;
    emu::ReadPosted(lane, posted);
    const __nv_bfloat16* p;
    std::memcpy(&p, posted, sizeof(p));
    return p;
  };
  const int g = emu::Lane() / 4, t = emu::Lane() % 4;
  for (int m = 0; m < 4; ++m) {
    uint32_t low, high;
    if constexpr (kTranspose) {
      low = RowOf(8 * m + 2 * t)[g].__x;
      high = RowOf(8 * m + 2 * t + 1)[g].__x;
    } else {
      low = RowOf(8 * m + g)[2 * t].__x;
      high = RowOf(8 * m + g)[2 * t + 1].__x;
    }
    r[m] = low | high << 16;
  }
}

inline void LoadMatrices(uint32_t (&r)[4], const __nv_bfloat16* row) { LoadMatrixFragments<false>(r, row); }
inline void LoadTransposed(uint32_t (&r)[4], const __nv_bfloat16* row) { LoadMatrixFragments<true>(r, row); }

// cp.async of kBytes from global to shared memory (zeros where !valid; the source is not read then).
template <int kBytes>
void CopyAsync(void* shared_dst, const void* global_src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  namespace emu = emulated_gpu;
  auto* dst = static_cast<unsigned char*>(shared_dst);
  if (dst < emu::DynamicShared() || dst + kBytes > emu::DynamicShared() + emu::DynamicSharedBytes()) {
    emu::Fail("cp.async: a destination outside the block's dynamic shared memory");
  }
  if (reinterpret_cast<uintptr_t>(dst) % kBytes != 0 || reinterpret_cast<uintptr_t>(global_src) % kBytes != 0) {
    emu::Fail("cp.async: an address not aligned to the copy's size");
  }
  emu::AsyncCopy copy{dst, {}, kBytes};
  if (valid) std::memcpy(copy.bytes, global_src, kBytes);
  if (emu::CopiesLandAtIssue()) {
    std::memcpy(dst, copy.bytes, kBytes);
  } else {
    emu::QueueCopy(copy);
  }
}

inline void CommitCopies() { emulated_gpu::CommitCopies(); }

template <int kPending>
void WaitCopies() {
  for (const emulated_gpu::AsyncCopy& copy : emulated_gpu::TakeLandedCopies(kPending)) {
    std::memcpy(copy.dst, copy.bytes, static_cast<size_t>(copy.size));
  }
}

}  // namespace srunway::trainer::cuda
