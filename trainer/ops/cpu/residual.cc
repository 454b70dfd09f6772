// Residual addition.
#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void ResidualForward(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void ResidualBackward(float* da, float* db, const float* dout, int64_t n) {
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

}  // namespace srunway::trainer::cpu
