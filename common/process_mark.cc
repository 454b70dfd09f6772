// Which process left a file behind: host, PID namespace and process number.
#include "common/process_mark.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "common/env.h"

namespace srunway::common {

std::optional<ProcessMark> ThisProcessMark() {
  const std::optional<std::string> host = HostName();
  struct stat ns {};
  if (!host || ::stat("/proc/self/ns/pid", &ns) != 0) return std::nullopt;
  return ProcessMark{*host, static_cast<uint64_t>(ns.st_ino), ::getpid()};
}

bool ProcessGone(const ProcessMark& mark) {
  const std::optional<ProcessMark> me = ThisProcessMark();
  if (!me || mark.host != me->host || mark.pid_ns != me->pid_ns || mark.pid <= 0 || mark.pid > INT32_MAX) {
    return false;
  }
  if (mark.pid == me->pid) return false;
  return ::kill(static_cast<pid_t>(mark.pid), 0) != 0 && errno == ESRCH;
}

}  // namespace srunway::common
