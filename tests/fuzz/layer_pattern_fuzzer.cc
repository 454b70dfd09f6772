// libFuzzer target: any text as srunway-train's per-layer flags of Megatron's (an integer or a list expression), for
// a model of 0 to 64 layers: --no-rope-freq (the first byte's top bit clear) or --window-attn-skip-freq (set). Each
// is refused with a message naming its flag, or gives 0 or 1 for each layer, not all alike (the list that all would
// be is no list); never a deep recursion, an overflow or a list beyond the layers. The text as --window-size too:
// refused naming it, or a window from -1 (none) to 2^24.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "trainer/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int n_layer = (data[0] & 0x7f) % 65;
  const bool window = (data[0] & 0x80) != 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto layers = window ? srunway::trainer::WindowLayers(text, n_layer) : srunway::trainer::NoRopeLayers(text, n_layer);
  if (!layers.ok()) {
    if (!layers.status().message().starts_with(window ? "--window-attn-skip-freq " : "--no-rope-freq ")) std::abort();
  } else if (!layers->empty()) {
    if (layers->size() != static_cast<size_t>(n_layer)) std::abort();
    int ones = 0;
    for (const uint8_t layer : *layers) {
      if (layer > 1) std::abort();
      ones += layer;
    }
    if (window ? ones == n_layer : ones == 0) std::abort();
  }
  auto size_of = srunway::trainer::WindowSize(text);
  if (!size_of.ok()) {
    if (!size_of.status().message().starts_with("--window-size ")) std::abort();
  } else if (*size_of < -1 || *size_of > (1 << 24)) {
    std::abort();
  }
  return 0;
}
