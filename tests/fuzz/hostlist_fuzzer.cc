// libFuzzer target: Slurm hostlist expansion and compression never crash, and compression round-trips.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hosts = srunway::common::ExpandHostlist(text);
  if (!hosts.ok() || hosts->size() > 4096) return 0;
  std::string compressed = srunway::common::CompressHostlist(*hosts);
  auto again = srunway::common::ExpandHostlist(compressed);
  // Names with separators or brackets do not survive a round trip in Slurm either; the rest must.
  bool plain = text.find_first_of("\t\n") == std::string_view::npos;
  for (const auto& host : *hosts) plain = plain && host.find_first_of("[], ") == std::string::npos;
  if (plain && (!again.ok() || *again != *hosts)) std::abort();
  return 0;
}
