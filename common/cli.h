// What every program's command line shares: --version, usage errors on one line, and CLI11 validators with
// messages that read well (CLI::PositiveNumber's names the largest double in full): "--timeout: 0 is not above 0".
// For the programs' main files, which have CLI11 and meson's version_dep.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
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

// A finite number above `low` (or at least `low` when `inclusive`): "nan" and "inf" parse as doubles, and each
// slipped past a comparison somewhere ("--init-std inf" trained to a NaN loss).
inline CLI::Validator NumberAbove(double low, bool inclusive) {
  return CLI::Validator(
      [low, inclusive](std::string& text) -> std::string {
        double value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size()) return fmt::format("'{}' is not a number", text);
        if (!std::isfinite(value)) return fmt::format("'{}' is not a finite number", text);
        if (inclusive ? value >= low : value > low) return "";
        return fmt::format("{} is not {} {}", text, inclusive ? "at least" : "above", low);
      },
      inclusive ? fmt::format(">= {}", low) : fmt::format("> {}", low));
}

inline CLI::Validator Positive() { return NumberAbove(0, false); }
inline CLI::Validator NonNegative() { return NumberAbove(0, true); }

}  // namespace srunway::common
