// libFuzzer target: the bootstrap TCP exchange's frame decoder takes any bytes a stray peer may send.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "launcher/tcp_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace srunway::launcher;
  std::string_view buffer(reinterpret_cast<const char*>(data), size);
  while (!buffer.empty()) {
    auto decoded = DecodeFrame(buffer);
    if (!decoded.ok() || !decoded->has_value()) return 0;
    size_t used = (*decoded)->second;
    if (used == 0 || used > buffer.size()) std::abort();
    // What decodes must encode back to the same bytes.
    if (EncodeFrame((*decoded)->first) != buffer.substr(0, used)) std::abort();
    buffer.remove_prefix(used);
  }
  return 0;
}
