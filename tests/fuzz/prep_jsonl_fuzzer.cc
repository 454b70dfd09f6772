// libFuzzer target: any line as srunway-prep's JSONL input gives the document (the chosen keys' strings, joined)
// or an error that names the line; the first input byte picks which keys are asked for.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/prep.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::vector<std::vector<std::string>> kKeys = {{"text"}, {"title", "text"}, {""}, {"text", "text"}};
  const auto& keys = kKeys[data[0] % kKeys.size()];
  std::string_view line(reinterpret_cast<const char*>(data + 1), size - 1);
  auto document = srunway::trainer::JsonlDocument(line, keys, "fuzz.jsonl:7");
  if (!document.ok() && document.status().message().find("fuzz.jsonl:7") == std::string::npos) std::abort();
  return 0;
}
