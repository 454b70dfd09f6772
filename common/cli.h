// CLI11 validators with messages that read well (CLI::PositiveNumber's names the largest double in full):
// "--timeout: 0 is not above 0". For the programs' main files, which have CLI11.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <string>

namespace srunway::common {

// A number above `low` (or at least `low` when `inclusive`).
inline CLI::Validator NumberAbove(double low, bool inclusive) {
  return CLI::Validator(
      [low, inclusive](std::string& text) -> std::string {
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size()) return fmt::format("'{}' is not a number", text);
        if (inclusive ? value >= low : value > low) return "";
        return fmt::format("{} is not {} {}", text, inclusive ? "at least" : "above", low);
      },
      inclusive ? fmt::format(">= {}", low) : fmt::format("> {}", low));
}

inline CLI::Validator Positive() { return NumberAbove(0, false); }
inline CLI::Validator NonNegative() { return NumberAbove(0, true); }

}  // namespace srunway::common
