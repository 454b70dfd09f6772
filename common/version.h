// What every program's --version prints: its name, srunway's version and what the build has (meson.build's
// built_with, given to the main files through version_dep).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

#ifndef SRUNWAY_BUILT_WITH
#error "a program's main file needs meson's version_dep"
#endif

namespace srunway::common {

inline std::string VersionText(std::string_view program) {
  return fmt::format("{} {}\nbuilt with: {}", program, SRUNWAY_VERSION, SRUNWAY_BUILT_WITH);
}

}  // namespace srunway::common
