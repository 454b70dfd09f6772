// Progress for a supervisor: srunway-launch names a file in SRUNWAY_HEARTBEAT, and a program that opts in
// rewrites it with a short text (its step) as it makes progress. A supervisor that sees the text stop changing
// for --hang-timeout names the program as hung and ends the step.
#pragma once

#include <optional>
#include <string_view>

namespace srunway::common {

class Heartbeat {
 public:
  // The file SRUNWAY_HEARTBEAT names, opened for writing; none when it is unset or cannot be opened.
  static std::optional<Heartbeat> FromEnvironment();
  Heartbeat(Heartbeat&& other) noexcept;
  Heartbeat& operator=(Heartbeat&&) = delete;
  ~Heartbeat();

  // Best effort: a write that fails costs the supervisor a beat, never the program its run.
  void Beat(std::string_view progress);

 private:
  explicit Heartbeat(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace srunway::common
