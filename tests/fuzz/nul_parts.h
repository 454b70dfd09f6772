// The input of the fuzz targets that read two files and a text: the three parts between NULs.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace srunway::fuzz {

// Before the first NUL, between it and the second, after the second; nothing where there are fewer than two.
inline std::optional<std::array<std::string_view, 3>> NulParts(std::string_view input) {
  const size_t first = input.find('\0');
  if (first == std::string_view::npos) return std::nullopt;
  const size_t second = input.find('\0', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  return std::array{input.substr(0, first), input.substr(first + 1, second - first - 1), input.substr(second + 1)};
}

}  // namespace srunway::fuzz
