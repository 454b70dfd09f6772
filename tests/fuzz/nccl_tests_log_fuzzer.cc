// libFuzzer target: any text as an nccl-tests log (or its JSON) parses without crashing or undefined behaviour,
// every row the parser accepts prints back (FormatRow) to a line that parses to the same size and count, and that
// line prints again to itself (so the printed time, bandwidths and #wrong read back to what was printed).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nccl-tests-wrapper/results.h"
#include "nccl-tests-wrapper/verdict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto any = srunway::nccltests::ParseAny(text, "fuzz.log");
  if (!any.ok()) return 0;
  for (const auto& run : *any) {
    (void)srunway::nccltests::Judge(run, 100.0);
    for (const auto& row : run.rows) {
      if (row.size_bytes < 0 || row.count < 0 || row.type.empty() || row.redop.empty()) continue;
      auto again = srunway::nccltests::ParseLog(srunway::nccltests::FormatRow(row));
      if (again.size() != 1 || again[0].rows.size() != 1) continue;  // e.g. a type name with spaces
      const auto& back = again[0].rows[0];
      if (back.size_bytes != row.size_bytes || back.count != row.count) std::abort();
      if (srunway::nccltests::FormatRow(back) != srunway::nccltests::FormatRow(row)) std::abort();
    }
  }
  return 0;
}
