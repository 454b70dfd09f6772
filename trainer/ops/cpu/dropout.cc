// Inverted dropout whose mask is a pure function of (key, element index): nothing is stored, the backward
// recomputes the mask, and an element of a given sample is dropped the same way on any rank, with any thread
// count and in any rerun (so data-parallel runs equal one rank's with dropout on).
#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer::cpu {
namespace {

uint64_t Mix(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t DropoutKey(uint64_t seed, int64_t step, int site) {
  return Mix(Mix(seed ^ 0x9e3779b97f4a7c15ULL) + static_cast<uint64_t>(step) * 0x100000001b3ULL +
             static_cast<uint64_t>(site));
}

bool DropoutKeeps(uint64_t key, uint64_t index, float p) {
  // 24 random bits against p: the same comparison a GPU kernel makes.
  const uint32_t bits = static_cast<uint32_t>(Mix(key ^ (index * 0x9e3779b97f4a7c15ULL)) >> 40);
  return static_cast<float>(bits) * (1.0f / 16777216.0f) >= p;
}

void DropoutForward(float* x, int64_t n, const DropoutSite& site) {
  if (site.p <= 0) return;
  const float scale = 1.0f / (1.0f - site.p);
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    x[i] = DropoutKeeps(site.key, static_cast<uint64_t>(site.first_index + i), site.p) ? x[i] * scale : 0.0f;
  }
}

void DropoutBackward(float* dx, int64_t n, const DropoutSite& site) { DropoutForward(dx, n, site); }

}  // namespace srunway::trainer::cpu
