// The WMMA API as flash_attention.cu uses it (16 x 16 x 16, bf16 inputs, fp32 accumulators), on
// tests/emulated_gpu's emulator. The hardware spreads a fragment over the warp in a layout it does not promise;
// here every lane holds the whole tile, each operation is warp-wide (every lane must reach it), and a load reads
// and a store writes only the lane's share of the tile (element i of the row-major tile by lane i % 32; a load
// hands the shares round the warp), so that reading another lane's part without a __syncwarp shows, while a
// warp that loads, multiplies and stores back the same tile (as the CUDA guide's example does) touches each
// element from one lane only.
#pragma once

#include <cstring>

#include "cuda_bf16.h"
#include "cuda_runtime.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int kRows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int kCols = std::is_same_v<Use, matrix_a> ? K : N;
  static constexpr int num_elements = kRows * kCols;
  float x[kRows * kCols];  // row-major, whatever the layout in memory
};

namespace internal {
inline float Value(const __nv_bfloat16& v) { return __bfloat162float(v); }
inline float Value(const float& v) { return v; }
inline void Converge() {
  srunway::emulated_gpu::WarpSync(srunway::emulated_gpu::Collective::kWmma);
}

// What touches only fragments (registers on the hardware, the lane's own) is left out of the race check, whose
// bookkeeping of every emulated lane's whole-tile arithmetic would take minutes.
#define SRUNWAY_FRAGMENT_ONLY __attribute__((no_sanitize_thread, noinline))

// Every lane's share of a tile, as posted: element i of the tile by lane i % 32, in word i / 32.
template <int kElements>
SRUNWAY_FRAGMENT_ONLY void Gather(float (&x)[kElements]) {
  namespace emu = srunway::emulated_gpu;
  for (int from = 0; from < warpSize; ++from) {
    emu::Words theirs;
    emu::ReadPosted(from, theirs);
    for (int i = from, k = 0; i < kElements; i += warpSize, ++k) std::memcpy(&x[i], &theirs[k], sizeof(float));
  }
}

// Fills the rows x cols tile x (row-major) with at(r, c), each lane reading its share of the elements and the
// warp exchanging the shares (8 per lane: 16 x 16 tiles).
template <int kRows, int kCols, typename At>
void LoadShared(float (&x)[kRows * kCols], At at) {
  namespace emu = srunway::emulated_gpu;
  static_assert(kRows * kCols <= warpSize * emu::kPostWords);
  emu::Words mine = {};
  for (int i = emu::Lane(), k = 0; i < kRows * kCols; i += warpSize, ++k) {
    const float value = at(i / kCols, i % kCols);
    std::memcpy(&mine[k], &value, sizeof(value));
  }
  emu::Post(mine);
  Converge();
  Gather<kRows * kCols>(x);
}
}  // namespace internal

template <typename Use, int M, int N, int K, typename T, typename Layout>
SRUNWAY_FRAGMENT_ONLY void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float value) {
  internal::Converge();
  for (float& x : f.x) x = value;
}

// matrix_a / matrix_b: the layout is the fragment's.
template <typename Use, int M, int N, int K, typename T, typename Layout, typename Element>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const Element* p, unsigned ld) {
  using F = fragment<Use, M, N, K, T, Layout>;
  internal::LoadShared<F::kRows, F::kCols>(f.x, [&](int r, int c) {
    return internal::Value(std::is_same_v<Layout, col_major> ? p[c * size_t{ld} + r] : p[r * size_t{ld} + c]);
  });
}

// The accumulator: the layout is the call's.
template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ld, layout_t layout) {
  internal::LoadShared<M, N>(
      f.x, [&](int r, int c) { return layout == mem_col_major ? p[c * size_t{ld} + r] : p[r * size_t{ld} + c]; });
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ld, layout_t layout) {
  internal::Converge();
  const int lane = srunway::emulated_gpu::Lane();
  for (int i = lane; i < M * N; i += warpSize) {
    const int r = i / N, c = i % N;
    (layout == mem_col_major ? p[c * size_t{ld} + r] : p[r * size_t{ld} + c]) = f.x[i];
  }
}

template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
SRUNWAY_FRAGMENT_ONLY void mma_sync(fragment<accumulator, M, N, K, float>& d,
                                    const fragment<matrix_a, M, N, K, T, LayoutA>& a,
                                    const fragment<matrix_b, M, N, K, T, LayoutB>& b,
                                    const fragment<accumulator, M, N, K, float>& c) {
  internal::Converge();
  float out[M * N];
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float sum = c.x[i * N + j];
      for (int k = 0; k < K; ++k) sum += a.x[i * K + k] * b.x[k * N + j];
      out[i * N + j] = sum;
    }
  }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma
