// Progress for a supervisor through the file SRUNWAY_HEARTBEAT names.
#include "common/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "common/env.h"

namespace srunway::common {

std::optional<Heartbeat> Heartbeat::FromEnvironment() {
  const std::optional<std::string> path = GetEnv("SRUNWAY_HEARTBEAT");
  if (!path || path->empty()) return std::nullopt;
  const int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return std::nullopt;
  return Heartbeat(fd);
}

Heartbeat::Heartbeat(Heartbeat&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Heartbeat::~Heartbeat() {
  if (fd_ >= 0) ::close(fd_);
}

void Heartbeat::Beat(std::string_view progress) {
  // Written over the old text, then cut to length: a reader sees the new text, or a mix that differs from the
  // old one, which is progress all the same.
  if (::pwrite(fd_, progress.data(), progress.size(), 0) == static_cast<ssize_t>(progress.size())) {
    (void)::ftruncate(fd_, static_cast<off_t>(progress.size()));
  }
}

}  // namespace srunway::common
