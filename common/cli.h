// What every program's command line shares: --version, usage errors on one line, and CLI11 validators with
// messages that read well (CLI::PositiveNumber's names the largest double in full): "--timeout: 0 is not above 0".
// For the programs' main files, which have CLI11 and meson's version_dep.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/version.h"

namespace srunway::common {

// The program's name in --help's usage line, --version (VersionText), and CLI11's usage errors as one line naming
// the program, "run-nccl-tests: --iters: Value 0 not in range 1 to 16777216 (see --help)", in place of CLI11's two
// (the error, then "Run with --help for more information."). An argument the program does not know is named even
// where something required is missing too: CLI11 checks requirements first, so `srunway-blueprint --valdate x`
// said only "A subcommand is required".
inline void SetUpProgram(CLI::App& app, const std::string& program) {
  app.name(program);
  app.set_version_flag("--version", VersionText(program));
  app.failure_message([program](const CLI::App* failed, const CLI::Error& error) {
    if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr && !failed->get_prefix_command()) {
      if (const std::vector<std::string> extras = failed->remaining(true); !extras.empty()) {
        return fmt::format("{}: {} (see --help)\n", program, CLI::ExtrasError(extras).what());
      }
    }
    return fmt::format("{}: {} (see --help)\n", program, error.what());
  });
}

// `text` as a whole double (from_chars: no leading space, no trailing junk), or nothing.
inline std::optional<double> WholeDouble(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A finite number above `low` (or at least `low` when `inclusive`): "nan" and "inf" parse as doubles, and each
// slipped past a comparison somewhere ("--init-std inf" trained to a NaN loss).
inline CLI::Validator NumberAbove(double low, bool inclusive) {
  return CLI::Validator(
      [low, inclusive](std::string& text) -> std::string {
        const std::optional<double> value = WholeDouble(text);
        if (!value) return fmt::format("'{}' is not a number", text);
        if (!std::isfinite(*value)) return fmt::format("'{}' is not a finite number", text);
        if (inclusive ? *value >= low : *value > low) return "";
        return fmt::format("{} is not {} {}", text, inclusive ? "at least" : "above", low);
      },
      inclusive ? fmt::format(">= {}", low) : fmt::format("> {}", low));
}

// A number a 32-bit float holds: "--lr 1e300" became inf and was refused as "--lr inf", and "--lr 1e-50" became 0.
inline CLI::Validator FitsFloat() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // Text that is no finite number is for CLI11's conversion and the option's own checks to refuse.
        const std::optional<double> value = WholeDouble(text);
        if (!value || !std::isfinite(*value)) return "";
        const auto largest = static_cast<double>(std::numeric_limits<float>::max());
        if (std::abs(*value) > largest) return fmt::format("{} is beyond a 32-bit float's range (3.4e38)", text);
        if (*value != 0 && static_cast<float>(*value) == 0) return fmt::format("{} is 0 as a 32-bit float", text);
        return "";
      },
      "");
}

inline CLI::Validator Positive() { return NumberAbove(0, false); }
inline CLI::Validator NonNegative() { return NumberAbove(0, true); }

// CLI11 2.1 reads an integer option with strtoll or strtoull and keeps what they return: past 64 bits the value
// saturated ("--train-steps 99999999999999999999" was read as 9223372036854775807) and an unsigned option took
// "-1" as 18446744073709551615 ("--seed -1" trained with that seed). Every integer option of `app` and of its
// subcommands refuses such text first; call this once the options are added.
inline void RefuseIntegersOutOfRange(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    const bool is_unsigned = type.starts_with("UINT");
    if (!is_unsigned && !type.starts_with("INT")) continue;
    option->check(CLI::Validator(
        [is_unsigned](std::string& text) -> std::string {
          const size_t first = text.find_first_not_of(" \t");
          if (is_unsigned && first != std::string::npos && text[first] == '-') {
            return fmt::format("{} is negative", text);
          }
          errno = 0;
          char* end = nullptr;
          if (is_unsigned) {
            (void)std::strtoull(text.c_str(), &end, 0);
          } else {
            (void)std::strtoll(text.c_str(), &end, 0);
          }
          if (errno != ERANGE) return "";
          return is_unsigned ? fmt::format("{} is more than {}", text, std::numeric_limits<uint64_t>::max())
                             : fmt::format("{} is outside [{}, {}]", text, std::numeric_limits<int64_t>::min(),
                                           std::numeric_limits<int64_t>::max());
        },
        ""));
  }
  for (CLI::App* subcommand : app.get_subcommands({})) RefuseIntegersOutOfRange(*subcommand);
}

}  // namespace srunway::common
