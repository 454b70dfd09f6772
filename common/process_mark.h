// Which process left a file behind, told apart from its number alone: the host and the PID namespace too, since a
// process number means something only within one namespace of one machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// A file left by a process that may die without cleaning up (SIGKILL runs no handler) carries its mark in its name,
// after a stem and before mkstemp's six random characters: "HOST.PIDNS.PID.", so that a later process on the same
// host can tell one whose writer is gone from one still in use, on any file system.
std::string MarkInName(const ProcessMark& mark);
// The mark in the rest of such a name after its stem ("HOST.PIDNS.PID.XXXXXX"; a host name may hold dots, the rest
// does not); none for another shape.
std::optional<ProcessMark> MarkFromName(std::string_view rest);

}  // namespace srunway::common
