// libFuzzer target: any bytes as a safetensors file are refused with a message or give tensors that tile the
// data after the header exactly, each holding its shape's bytes.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "trainer/ckpt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = srunway::trainer::ReadSafetensorsHeader(std::span<const uint8_t>(data, size), size, "fuzz.safetensors");
  if (!header.ok()) {
    if (header.status().message().empty()) std::abort();
    return 0;
  }
  if (header->data_start > size) std::abort();
  uint64_t at = 0;
  for (const auto& tensor : header->tensors) {
    if (tensor.begin != at || tensor.end < tensor.begin) std::abort();
    for (int64_t extent : tensor.shape) {
      if (extent < 0) std::abort();
    }
    at = tensor.end;
  }
  if (at != size - header->data_start) std::abort();
  return 0;
}
