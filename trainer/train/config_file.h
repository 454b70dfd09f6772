// srunway-train's --config FILE.yaml: a mapping of its flag names (with - or _) to values, turned into
// command-line words. Flags given on the command line itself are skipped (they win); a list becomes repeated values
// ("data-path: [0.7, a, 0.3, b]"); a switch takes true or false. Anything else (a key that is no flag of the program,
// a key given twice, a list for a one-value flag, nesting, YAML errors) is one InvalidArgument naming the file, line
// and column (CLI11 would name the words made of it, without the file).
#pragma once

#include <CLI/CLI.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::trainer {

// `text` is the file's contents; `path` names it in errors (the fuzzer's entry point).
common::StatusOr<std::vector<std::string>> ConfigWords(std::string_view text, const std::string& path,
                                                       const std::set<std::string>& given, const CLI::App& app);
// Reads `path` first ("--config: read DIR: Is a directory").
common::StatusOr<std::vector<std::string>> ConfigFileWords(const std::string& path, const std::set<std::string>& given,
                                                           const CLI::App& app);

}  // namespace srunway::trainer
