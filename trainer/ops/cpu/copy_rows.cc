// A strided block copy: the heads of q or k out of qkv's rows into rows of their own, and back (--qk-layernorm).
#include <algorithm>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void CopyRows(float* dst, int64_t dst_ld, const float* src, int64_t src_ld, int64_t rows, int64_t cols) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) std::copy_n(src + r * src_ld, cols, dst + r * dst_ld);
}

}  // namespace srunway::trainer::cpu
