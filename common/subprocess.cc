// Runs a short helper command (scontrol and the like) and returns what it printed.
#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>

extern char** environ;

namespace srunway::common {

StatusOr<CommandResult> RunCommand(std::vector<std::string> argv, bool with_stderr,
                                   std::chrono::milliseconds timeout) {
  if (argv.empty()) return InvalidArgument("no command to run");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (with_stderr) {
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  std::vector<char*> args;
  for (auto& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  // Its own process group, so a deadline kills whatever it started too.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // And SIGPIPE as a command expects it, whatever this program did with it (srunway-train ignores it).
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  int error = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(fds[1]);
  CommandResult result;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (error == 0) {
    char buffer[4096];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd pfd{fds[0], POLLIN, 0};
      const int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000));
      const int ready = ::poll(&pfd, 1, wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0 && left.count() > 1000) continue;
      if (ready <= 0) {
        timed_out = ready == 0;
        break;
      }
      const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      result.output.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(fds[0]);
  if (error != 0) return ErrnoStatus(error, "run " + argv[0]);
  // A command may close its output and go on running: the deadline holds for its exit too.
  int status = 0;
  while (true) {
    if (timed_out) ::kill(-pid, SIGKILL);
    const pid_t done = ::waitpid(pid, &status, timed_out ? 0 : WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (done == 0) {
      timed_out = std::chrono::steady_clock::now() > deadline;
      if (!timed_out) ::usleep(10000);
    }
  }
  if (timed_out) {
    return DeadlineExceeded("{} did not finish within {:g} s and was killed", argv[0],
                            static_cast<double>(timeout.count()) / 1000.0);
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return result;
}

std::string ShellQuote(std::string_view word) {
  auto plain_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  };
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), plain_char);
  if (plain) return std::string(word);
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string_view("'\\''") : std::string_view(&c, 1);
  return out + "'";
}

std::string ShellCommand(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) line += (line.empty() ? "" : " ") + ShellQuote(word);
  return line;
}

}  // namespace srunway::common
