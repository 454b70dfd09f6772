// Which process left a file behind: host, PID namespace and process number.
#include "common/process_mark.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "common/env.h"
#include "common/parse.h"

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

std::string MarkInName(const ProcessMark& mark) { return fmt::format("{}.{}.{}.", mark.host, mark.pid_ns, mark.pid); }

std::optional<ProcessMark> MarkFromName(std::string_view rest) {
  const size_t random = rest.rfind('.');
  if (random == std::string_view::npos || rest.size() - random - 1 != 6) return std::nullopt;
  const size_t pid_at = rest.rfind('.', random - 1);
  if (pid_at == std::string_view::npos || pid_at == 0) return std::nullopt;
  const size_t ns_at = rest.rfind('.', pid_at - 1);
  if (ns_at == std::string_view::npos || ns_at == 0) return std::nullopt;
  auto pid = ParseInt(rest.substr(pid_at + 1, random - pid_at - 1), "pid", 1, INT32_MAX);
  auto ns = ParseInt(rest.substr(ns_at + 1, pid_at - ns_at - 1), "pid namespace", 1, INT64_MAX);
  if (!pid.ok() || !ns.ok()) return std::nullopt;
  return ProcessMark{std::string(rest.substr(0, ns_at)), static_cast<uint64_t>(*ns), *pid};
}

}  // namespace srunway::common
