// libFuzzer target: any bytes as a checkpoint are refused with a message or give a header whose numbers are in
// range, whose model config is valid and whose tensor data starts inside the file, 64-byte aligned.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "trainer/ckpt/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = srunway::trainer::ReadCheckpointHeader(std::span<const uint8_t>(data, size), "fuzz.ckpt");
  if (!header.ok()) {
    if (header.status().message().empty()) std::abort();
    return 0;
  }
  const auto& state = header->state;
  if (state.step < 0 || state.consumed_samples < 0 || header->data_offset % 64 != 0) std::abort();
  if (header->data_offset > size + 63) std::abort();
  if (!srunway::trainer::Validate(state.model).ok()) std::abort();
  (void)srunway::trainer::ParameterCount(state.model);  // no overflow for any config that validates
  return 0;
}
