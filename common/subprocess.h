// Runs a short helper command (scontrol and the like) and returns what it printed.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::common {

struct CommandResult {
  int exit_code = -1;  // -1 when it was killed by a signal
  int signal = 0;      // the signal that killed it, else 0
  std::string output;  // stdout, and stderr too when asked
};

// Searches PATH for argv[0]; an error when it cannot be started, or when it has not finished within `timeout`:
// then it and every process it started (its process group) are killed, and the error says so. A helper that
// hangs (scontrol against a dead controller) must not hang every rank of a job with it.
StatusOr<CommandResult> RunCommand(std::vector<std::string> argv, bool with_stderr = false,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));

// `word` as one word of a POSIX shell command line: as it is when it holds only characters no shell reads
// (letters, digits, and @%+=:,./_-), else in single quotes (a ' inside as '\'').
std::string ShellQuote(std::string_view word);
// `argv` as a command line a user can paste into a shell: each word quoted so, joined by spaces.
std::string ShellCommand(const std::vector<std::string>& argv);

}  // namespace srunway::common
