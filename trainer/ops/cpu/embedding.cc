// Token (+ learned position) embedding lookup.
#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C,
                      float scale, const Documents& docs) {
#pragma omp parallel for
  for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
    float* o = out + bt * C;
    const float* e = wte + int64_t{tokens[bt]} * C;
    if (wpe == nullptr) {
      for (int c = 0; c < C; ++c) o[c] = scale * e[c];
      continue;
    }
    const float* p = wpe + (docs.positions != nullptr ? docs.positions[bt] : bt % T) * C;
    for (int c = 0; c < C; ++c) o[c] = scale * e[c] + p[c];
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C,
                       float scale, const Documents& docs) {
  // Rows of dwte are shared by repeated tokens: split the channels between threads instead of the rows.
#pragma omp parallel
  {
#pragma omp for
    for (int c = 0; c < C; ++c) {
      for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) dwte[int64_t{tokens[bt]} * C + c] += scale * dout[bt * C + c];
    }
    if (dwpe != nullptr && docs.positions != nullptr) {  // rows of dwpe shared as those of dwte are
#pragma omp for
      for (int c = 0; c < C; ++c) {
        for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) dwpe[int64_t{docs.positions[bt]} * C + c] += dout[bt * C + c];
      }
    } else if (dwpe != nullptr) {
#pragma omp for
      for (int t = 0; t < T; ++t) {
        for (int b = 0; b < B; ++b) {
          const float* d = dout + (int64_t{b} * T + t) * C;
          for (int c = 0; c < C; ++c) dwpe[int64_t{t} * C + c] += d[c];
        }
      }
    }
  }
}

}  // namespace srunway::trainer::cpu
