// libFuzzer target: any text as srunway-train's --no-rope-freq (Megatron's integer or list expression), for a model
// of 0 to 64 layers (the first byte), is refused with a message naming the flag, or gives 0 or 1 for each layer, with
// a 1 somewhere (none skipped is no list); never a deep recursion, an overflow or a list beyond the layers.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "trainer/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int n_layer = data[0] % 65;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto layers = srunway::trainer::NoRopeLayers(text, n_layer);
  if (!layers.ok()) {
    if (!layers.status().message().starts_with("--no-rope-freq ")) std::abort();
    return 0;
  }
  if (layers->empty()) return 0;
  if (layers->size() != static_cast<size_t>(n_layer)) std::abort();
  bool skipped = false;
  for (const uint8_t layer : *layers) {
    if (layer > 1) std::abort();
    skipped = skipped || layer == 1;
  }
  if (!skipped) std::abort();
  return 0;
}
