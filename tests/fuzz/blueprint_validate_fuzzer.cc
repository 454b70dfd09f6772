// libFuzzer target: any text as a blueprint loads, validates and expands without crashing, and a blueprint that
// validates expands to a text that expands to itself.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "blueprints/blueprint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto bp = srunway::blueprint::LoadText("fuzz.yaml", text);
  if (!bp.ok()) return 0;
  std::vector<srunway::blueprint::ValidatorResult> validators;
  auto diagnostics = srunway::blueprint::Validate(*bp, &validators);
  for (const auto& d : diagnostics) {
    if (!d.warning) return 0;
  }
  const std::string once = srunway::blueprint::Expand(*bp);
  auto again = srunway::blueprint::LoadText("expanded.yaml", once);
  if (!again.ok()) std::abort();  // the expansion of a valid blueprint must be YAML
  if (srunway::blueprint::Expand(*again) != once) std::abort();
  return 0;
}
