// Megatron-LM's flags that srunway-train has no option for but refuses by name, and the files that its data flags
// --data-args-path and --per-split-data-args-path name.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace srunway::trainer {

// For the first of `words` (command-line words no option took, in the order given; "--flag=value" counts as
// --flag) that is a Megatron flag for what srunway-train has none of (mixture of experts, pipeline layouts, other
// model families, ...; whole families by their prefix), "FLAG: WHY", saying what srunway-train has instead; empty
// where none is, and the words are unknown arguments.
std::string RefusedMegatronFlag(const std::vector<std::string>& words);

// Megatron's --data-args-path file: --data-path's words (a prefix, or a blend "W1 P1 W2 P2 ..."), whitespace apart.
// An unreadable file, or one that holds no word, is an error naming it.
common::StatusOr<std::vector<std::string>> ReadDataArgsFile(const std::string& path);

// Megatron's --per-split-data-args-path file: a JSON object {"train": ..., "valid": ..., "test": ...}, each a list of
// words or one string of them, null or absent for none; train's is required. An error names the file and the key.
struct PerSplitDataArgs {
  std::vector<std::string> train, valid;
  bool test = false;  // whether it names test data (srunway-train runs no test evaluation)
};
common::StatusOr<PerSplitDataArgs> ReadPerSplitDataArgsFile(const std::string& path);

}  // namespace srunway::trainer
