// libFuzzer target: any bytes as a Megatron .idx are either refused or yield an index whose every entry can be
// read and whose document indices run from 0 to the sequence count without going backwards.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "trainer/data/indexed_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy at an 8-byte aligned address, as mmap gives the real reader.
  std::vector<uint64_t> aligned((size + 7) / 8 + 1);
  if (size > 0) __builtin_memcpy(aligned.data(), data, size);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(aligned.data()), size);
  auto view = srunway::trainer::ParseIndex(bytes, "fuzz.idx");
  if (!view.ok()) return 0;
  int64_t total = 0;
  for (uint64_t s = 0; s < view->sequences; ++s) {
    if (view->length(s) < 0 || view->pointer(s) < 0) std::abort();
    total += view->length(s);
  }
  if (view->document(0) != 0 || view->document(view->documents - 1) != static_cast<int64_t>(view->sequences)) {
    std::abort();
  }
  for (uint64_t d = 1; d < view->documents; ++d) {
    if (view->document(d) < view->document(d - 1)) std::abort();
  }
  return total < 0 ? 1 : 0;
}
