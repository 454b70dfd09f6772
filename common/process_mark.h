// Which process left a file behind, told apart from its number alone: the host and the PID namespace too, since a
// process number means something only within one namespace of one machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace srunway::common {

struct ProcessMark {
  std::string host;
  uint64_t pid_ns = 0;  // the inode of /proc/self/ns/pid
  int64_t pid = 0;
};

// This process; none where the host name or the namespace cannot be read.
std::optional<ProcessMark> ThisProcessMark();

// Whether `mark` names a process that is known to have ended: one on this host and in this PID namespace that no
// longer exists. Any other (a live one, one elsewhere, whose state cannot be seen from here) is not known to have.
bool ProcessGone(const ProcessMark& mark);

}  // namespace srunway::common
