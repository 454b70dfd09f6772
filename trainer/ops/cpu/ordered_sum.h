// Sums over rows in an order that does not depend on the thread count: rows go in fixed blocks, each block's
// partial sum is made by whichever thread takes it, and the partials are added in block order. A run is then
// bit-identical for any OMP_NUM_THREADS (a per-thread partial added under `omp critical` is not).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace srunway::trainer::cpu {

inline constexpr int kRowsPerBlock = 64;

// add_row(row, partial) adds row's contribution to partial[0, width); returns the sums over every row.
template <typename T, typename AddRow>
std::vector<T> OrderedRowSums(int64_t rows, int64_t width, AddRow&& add_row) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  std::vector<T> partial(static_cast<size_t>(blocks * width), T{0});
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    T* p = partial.data() + block * width;
    const int64_t end = std::min(rows, (block + 1) * kRowsPerBlock);
    for (int64_t row = block * kRowsPerBlock; row < end; ++row) add_row(row, p);
  }
  std::vector<T> total(static_cast<size_t>(width), T{0});
  for (int64_t block = 0; block < blocks; ++block) {
    const T* p = partial.data() + block * width;
    for (int64_t i = 0; i < width; ++i) total[static_cast<size_t>(i)] += p[i];
  }
  return total;
}

}  // namespace srunway::trainer::cpu
