// Runs a short helper command (scontrol and the like) and returns what it printed.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace srunway::common {

struct CommandResult {
  int exit_code = -1;  // -1 when it was killed by a signal
  std::string output;  // stdout, and stderr too when asked
};

// Searches PATH for argv[0]; an error only when it cannot be started.
StatusOr<CommandResult> RunCommand(std::vector<std::string> argv, bool with_stderr = false);

}  // namespace srunway::common
