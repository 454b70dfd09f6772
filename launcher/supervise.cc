// Supervised exec mode: the program as a child of srunway-launch, its output, its end and its progress.
#include "launcher/supervise.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <thread>

#include "common/fs.h"
#include "common/json.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/signals.h"

extern char** environ;

namespace srunway::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// The signals srunway-launch takes over (and forwards); the child gets their default actions back.
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};
constexpr size_t kMaxProgressBytes = 256;

std::chrono::milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The environment for the child: ours, with `extra` replacing or adding variables.
std::vector<std::string> ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& [key, value] : extra) replaced = replaced || key == name;
    if (!replaced) env.emplace_back(text);
  }
  for (const auto& [key, value] : extra) env.push_back(key + "=" + value);
  return env;
}

common::StatusOr<int> OpenLog(const std::filesystem::path& path, bool append) {
  SRUNWAY_ASSIGN_OR_RETURN(common::Fd fd, common::OpenToWrite(path, O_CREAT | (append ? O_APPEND : O_TRUNC)));
  return fd.Release();
}

// What a hung program's line quotes of its progress: the last line of it, as one line (a progress bar's \r
// escaped, not moving the terminal's cursor back over the message).
std::string LastLine(std::string_view end) {
  const size_t newline = end.rfind('\n');
  return common::Printable(common::Trim(newline == std::string_view::npos ? end : end.substr(newline + 1)),
                           kMaxProgressBytes);
}

// A live process that the program left, as /proc shows it.
struct Member {
  pid_t pid;
  std::string name;
};

// What the program left running: the live processes of its process group `group` (none when it is -1), and
// those that left the group (setsid, a daemon's double fork) but descend from this process, which adopts them as
// their parents end (PR_SET_CHILD_SUBREAPER, set in Child::Start). Zombies, which have ended and wait for a
// parent's wait(), are left out.
std::vector<Member> Leftovers(pid_t group) {
  struct Process {
    pid_t ppid;
    pid_t pgrp;
    bool zombie;
    std::string name;
  };
  std::map<pid_t, Process> processes;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = common::ReadFile(it->path() / "stat");  // "pid (comm) state ppid pgrp ...": comm may hold ") "
    if (!stat.ok()) continue;  // gone since the listing
    const size_t open = stat->find('('), close = stat->rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::vector<std::string_view> fields = common::Split(std::string_view(*stat).substr(close + 1), ' ');
    // fields[0] is empty (the space after ')'), then state, ppid, pgrp.
    if (fields.size() < 4) continue;
    const auto pid = common::ParseInt(name, "pid"), ppid = common::ParseInt(fields[2], "ppid"),
               pgrp = common::ParseInt(fields[3], "pgrp");
    if (!pid.ok() || !ppid.ok() || !pgrp.ok()) continue;
    processes[static_cast<pid_t>(*pid)] = {static_cast<pid_t>(*ppid), static_cast<pid_t>(*pgrp), fields[1] == "Z",
                                           stat->substr(open + 1, close - open - 1)};
  }
  const pid_t self = ::getpid();
  // A listing taken while processes come and go may hold a parent loop (a pid reused); the walk stops at one.
  auto descends = [&](pid_t pid) {
    for (size_t hops = 0; hops <= processes.size(); ++hops) {
      auto it = processes.find(pid);
      if (it == processes.end()) return false;
      if (it->second.ppid == self) return true;
      pid = it->second.ppid;
    }
    return false;
  };
  std::vector<Member> left;
  for (const auto& [pid, process] : processes) {
    if (process.zombie || pid == self || !((group > 0 && process.pgrp == group) || descends(pid))) continue;
    left.push_back({pid, process.name});
  }
  return left;
}

// Waits for the processes this one adopted (see Leftovers) that have ended, so that none stays a zombie; not for
// `program`, whose end Reap takes.
void ReapAdopted(pid_t program) {
  while (true) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0 || info.si_pid == program) {
      return;
    }
    (void)::waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

std::string DescribeMembers(const std::vector<Member>& members) {
  std::string list;
  for (size_t i = 0; i < members.size() && i < 4; ++i) {
    list += fmt::format("{}{} {}", i > 0 ? ", " : "", common::Printable(members[i].name), members[i].pid);
  }
  if (members.size() > 4) list += ", ...";
  return fmt::format("{} process{} ({})", members.size(), members.size() == 1 ? "" : "es", list);
}

// Starts argv[0] as posix_spawnp does (found on PATH, with `envp`), its stdout and stderr moved to `out` and
// `err` (-1: ours), in a process group of its own when `own_group`, the signals this process forwards or ignores
// at their default actions and none blocked. Unlike posix_spawnp it also sets PR_SET_PDEATHSIG: a SIGKILL of this
// process (kill -9, the OOM killer) kills the program too, which ran on as init's child, out of reach of Slurm's
// proctrack/linuxproc, holding its GPU. Returns the pid, or -1 with exec's (or fork's) errno in `error`.
pid_t Spawn(char* const argv[], char* const envp[], int out, int err, bool own_group, int* error) {
  int report[2];  // the child's errno when it cannot exec; closed by a successful exec
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *error = errno;
    return -1;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until the exec: this process has other threads (the watchdog's).
    auto fail = [&] {
      const int code = errno;
      (void)!::write(report[1], &code, sizeof code);
      ::_exit(127);
    };
    // A parent that died before the prctl would never send it.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) fail();
    if (own_group && ::setpgid(0, 0) != 0) fail();
    if ((out >= 0 && ::dup2(out, STDOUT_FILENO) < 0) || (err >= 0 && ::dup2(err, STDERR_FILENO) < 0)) fail();
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int signal : kForwarded) ::sigaction(signal, &default_action, nullptr);
    ::sigaction(SIGPIPE, &default_action, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv, envp);
    fail();
  }
  *error = pid < 0 ? errno : 0;
  ::close(report[1]);
  if (pid > 0) {
    ssize_t n;
    do {
      n = ::read(report[0], error, sizeof *error);
    } while (n < 0 && errno == EINTR);
    if (n == sizeof *error) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    } else {
      *error = 0;
    }
  }
  ::close(report[0]);
  return *error == 0 ? pid : -1;
}

}  // namespace

int ChildEnd::ExitCode() const {
  switch (how) {
    case How::kExited: return code;
    case How::kSignalled: return 128 + code;
    case How::kHung: return 128 + SIGKILL;
  }
  return 1;
}

std::string CannotRun(const std::string& program, int error) {
  struct stat st {};
  // Only a path names one file; a bare name was searched for on PATH.
  if (error == EACCES && program.find('/') != std::string::npos && ::stat(program.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return fmt::format("cannot run '{}': it is a directory", program);
    if (S_ISREG(st.st_mode) && (st.st_mode & 0111) == 0) {
      return fmt::format("cannot run '{}': it is not executable (chmod +x)", program);
    }
  }
  return fmt::format("cannot run '{}': {}", program, std::strerror(error));
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  const int64_t s = duration.count() / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
}

std::string ChildEnd::Describe() const {
  std::string text;
  switch (how) {
    case How::kExited:
      text = fmt::format("exited with code {} after {}", code, FormatDuration(ran));
      break;
    case How::kSignalled:
      text = fmt::format("was killed by {} after {}", common::SignalName(code), FormatDuration(ran));
      break;
    case How::kHung:
      text = fmt::format("hung: no progress for {} (last progress '{}') after {}", FormatDuration(stalled),
                         last_progress, FormatDuration(ran));
      break;
  }
  return detail.empty() ? text : text + ": " + detail;
}

std::string ReadTorchErrorFile(const std::string& path) {
  auto text = common::ReadFile(path);
  if (!text.ok()) return "";
  auto json = common::ParseJson(*text, path);
  if (!json.ok() || !json->is_object()) return "";
  auto message = json->find("message");
  if (message == json->end()) return "";
  std::string found;
  if (message->is_string()) {
    found = message->get<std::string>();
  } else if (message->is_object()) {
    auto inner = message->find("message");
    if (inner != message->end() && inner->is_string()) found = inner->get<std::string>();
  }
  // One line for the failure line: the first that says something, its tabs and such escaped, cut at 512 bytes.
  for (std::string_view line : common::Split(found, '\n')) {
    if (!common::Trim(line).empty()) return common::Printable(common::Trim(line), 512);
  }
  return "";
}

common::StatusOr<Child> Child::Start(const ChildOptions& options) {
  if (options.command.empty()) return common::InvalidArgument("no command to run");
  Child child;
  child.options_ = options;
  int out_target = -1, err_target = -1;  // what the child's stdout/stderr become; -1: ours
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (!options.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.log_dir, ec);
    if (ec) return common::FailedPrecondition("--log-dir {}: {}", options.log_dir, ec.message());
    const std::filesystem::path dir = options.log_dir;
    // Through pipes rather than straight into the files, so that a log that cannot be written (a full disk) is
    // noticed here: the program saw its writes fail, and its output was lost without a word.
    for (auto [stream, suffix] : {std::pair{&child.out_, "out"}, std::pair{&child.err_, "err"}}) {
      stream->path = (dir / fmt::format("rank_{}.{}", options.rank, suffix)).string();
      SRUNWAY_ASSIGN_OR_RETURN(stream->file, OpenLog(stream->path, options.append_logs));
      if (options.tee) stream->echo = stream->own;
    }
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      const common::Status status = common::ErrnoStatus(errno, "pipe for --log-dir");
      for (int* fd : {&out_pipe[0], &out_pipe[1], &err_pipe[0], &err_pipe[1]}) CloseFd(*fd);
      return status;
    }
    out_target = out_pipe[1];
    err_target = err_pipe[1];
  }
  if (!options.heartbeat_path.empty()) {
    SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(options.heartbeat_path, ""));
  }

  // A group of its own, so a signal reaches whatever the program started too; not for an interactive step,
  // whose terminal must keep the program in its foreground group.
  child.own_group_ = ::isatty(STDIN_FILENO) == 0;
  // What the program starts and leaves (a daemon that setsid()s or double-forks out of its group) becomes this
  // process's child when its parent ends, instead of init's, so that EndLeftovers finds and ends it: outside
  // Slurm, and under Slurm's proctrack/linuxproc, which follows parents, nothing else would.
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::vector<std::pair<std::string, std::string>> extra = options.env;
  if (!options.heartbeat_path.empty()) extra.emplace_back("SRUNWAY_HEARTBEAT", options.heartbeat_path);
  std::vector<std::string> env = ChildEnvironment(extra);
  std::vector<char*> envp, argv;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> command = options.command;
  for (std::string& arg : command) argv.push_back(arg.data());
  argv.push_back(nullptr);
  int error = 0;
  child.pid_ = Spawn(argv.data(), envp.data(), out_target, err_target, child.own_group_, &error);
  CloseFd(out_pipe[1]);
  CloseFd(err_pipe[1]);
  if (error != 0) {
    CloseFd(out_pipe[0]);
    CloseFd(err_pipe[0]);
    child.pid_ = -1;
    const std::string why = CannotRun(options.command[0], error);
    return error == ENOENT ? common::NotFound("{}", why) : common::FailedPrecondition("{}", why);
  }
  if (child.own_group_) child.group_ = child.pid_;
  child.out_.pipe = out_pipe[0];
  child.err_.pipe = err_pipe[0];
  child.started_ = Clock::now();
  child.progress_at_ = child.started_;
  return child;
}

Child::Child(Child&& other) noexcept
    : options_(std::move(other.options_)), pid_(std::exchange(other.pid_, -1)), own_group_(other.own_group_),
      group_(std::exchange(other.group_, -1)), started_(other.started_), out_(std::exchange(other.out_, Stream{})),
      err_(std::exchange(other.err_, Stream{})), progress_(std::move(other.progress_)),
      progress_at_(other.progress_at_), progressed_(other.progressed_) {}

Child::~Child() {
  if (pid_ > 0) (void)Terminate(std::chrono::seconds(2));
  if (group_ > 0) (void)EndLeftovers(std::chrono::milliseconds(0), std::chrono::seconds(2));
  for (int* fd : {&out_.pipe, &err_.pipe, &out_.file, &err_.file}) CloseFd(*fd);
}

void Child::Signal(int signal) const {
  if (pid_ <= 0) return;
  ::kill(own_group_ ? -pid_ : pid_, signal);
}

void Child::CopyOut(Stream& stream) {
  char buffer[1 << 16];
  const ssize_t n = ::read(stream.pipe, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    CloseFd(stream.pipe);
    return;
  }
  std::string_view bytes(buffer, static_cast<size_t>(n));
  std::string_view unlogged = bytes;
  while (stream.file >= 0 && !unlogged.empty()) {
    const ssize_t written = ::write(stream.file, unlogged.data(), unlogged.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      common::LogWarn("cannot write {} after {} bytes: {}; the rest of the program's {} follows on this "
                      "task's {}",
                      stream.path, stream.logged, written < 0 ? std::strerror(errno) : "nothing written",
                      stream.name, stream.name);
      CloseFd(stream.file);
      if (stream.echo < 0) {
        stream.echo = stream.own;
        bytes = unlogged;
      }
      break;
    }
    stream.logged += static_cast<uint64_t>(written);
    unlogged.remove_prefix(static_cast<size_t>(written));
  }
  // Best effort: once this process's own stream is gone (EPIPE), the log file alone has the output.
  if (stream.echo >= 0 && !common::WriteAll(stream.echo, bytes, stream.name).ok()) stream.echo = -1;
}

void Child::Pump(std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  for (Stream* stream : {&out_, &err_}) {
    if (stream->pipe < 0) continue;
    fds.push_back({stream->pipe, POLLIN, 0});
    streams.push_back(stream);
  }
  if (fds.empty()) {
    if (wait.count() > 0) std::this_thread::sleep_for(wait);
    return;
  }
  if (::poll(fds.data(), fds.size(), static_cast<int>(wait.count())) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) CopyOut(*streams[i]);
  }
}

std::optional<ChildEnd> Child::Reap(bool block) {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t done;
  do {
    done = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (done < 0 && errno == EINTR);
  if (done != pid_) return std::nullopt;
  pid_ = -1;
  // Whatever is still in the pipes (unless a grandchild holds them open: then as much as is there now).
  for (int i = 0; i < 64 && copies_output(); ++i) Pump(std::chrono::milliseconds(0));
  ChildEnd end;
  end.ran = Since(started_);
  if (WIFSIGNALED(status)) {
    end.how = ChildEnd::How::kSignalled;
    end.code = WTERMSIG(status);
  } else {
    end.code = WEXITSTATUS(status);
  }
  return end;
}

// Read whole, an appended heartbeat file grew without bound, and its first bytes, all that was compared, stopped
// changing: a program that appended its steps was killed as hung.
std::optional<Child::Progress> Child::ReadProgress(const std::string& path) {
  const common::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  const off_t from = std::max<off_t>(0, st.st_size - static_cast<off_t>(kMaxProgressBytes));
  char buffer[kMaxProgressBytes];
  ssize_t n;
  do {
    n = ::pread(fd.get(), buffer, sizeof buffer, from);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;
  return Progress{st.st_size, std::string(common::Trim(std::string_view(buffer, static_cast<size_t>(n))))};
}

std::optional<ChildEnd> Child::Poll() {
  ReapAdopted(pid_);
  if (auto end = Reap(false)) return end;
  if (options_.heartbeat_path.empty() || options_.hang_timeout.count() <= 0) return std::nullopt;
  if (std::optional<Progress> progress = ReadProgress(options_.heartbeat_path);
      progress && !progress->end.empty() && *progress != progress_) {
    progress_ = *std::move(progress);
    progress_at_ = Clock::now();
    progressed_ = true;
  }
  // Only a program that has shown progress once can be judged by it.
  if (!progressed_ || Since(progress_at_) < options_.hang_timeout) return std::nullopt;
  ChildEnd end;
  end.how = ChildEnd::How::kHung;
  end.stalled = Since(progress_at_);
  end.ran = Since(started_);
  end.last_progress = LastLine(progress_.end);
  return end;
}

ChildEnd Child::Terminate(std::chrono::milliseconds grace) {
  const auto ran = Since(started_);
  Signal(SIGTERM);
  const auto give_up = Clock::now() + grace;
  while (Clock::now() < give_up) {
    if (auto end = Reap(false)) return *end;
    Pump(std::chrono::milliseconds(20));
  }
  Signal(SIGKILL);
  if (auto end = Reap(true)) return *end;
  ChildEnd end;
  end.how = ChildEnd::How::kSignalled;
  end.code = SIGKILL;
  end.ran = ran;
  return end;
}

// Before, a background process that wrote to --log-dir's pipes died of SIGPIPE once this process exited (its
// output lost), and without --log-dir it ran on after the step when not under Slurm.
std::string Child::EndLeftovers(std::chrono::milliseconds settle, std::chrono::milliseconds grace) {
  constexpr auto kTick = std::chrono::milliseconds(20);
  const pid_t group = std::exchange(group_, -1);
  auto members = [&] {
    ReapAdopted(pid_);
    return Leftovers(group);
  };
  // Each process by its pid (one that left the group is out of the group's reach), and the group, which a process
  // started between the listing and the signal joins.
  auto signal_all = [&](int signal) {
    for (const Member& member : members()) ::kill(member.pid, signal);
    if (group > 0) ::kill(-group, signal);
  };
  // Copies output until `done` or `until`; Pump waits a tick whether or not there is a pipe left.
  auto wait = [&](Clock::time_point until, auto done) {
    while (!done() && Clock::now() < until) Pump(kTick);
  };
  auto gone = [&] { return !copies_output() && members().empty(); };
  wait(Clock::now() + settle, gone);
  std::vector<Member> left = members();
  std::string said;
  if (!left.empty()) {
    signal_all(SIGTERM);
    wait(Clock::now() + grace, gone);
    const bool killed = !members().empty();
    if (killed) signal_all(SIGKILL);
    said = fmt::format("{} running: ended {} with {}", DescribeMembers(left), left.size() == 1 ? "it" : "them",
                       killed ? fmt::format("SIGKILL, {} after SIGTERM", FormatDuration(grace)) : "SIGTERM");
  }
  // What they wrote before they ended; a pipe still held past this (by a process that is not the program's
  // descendant, one it handed the pipe to) is closed: its later writes fail.
  wait(Clock::now() + std::chrono::seconds(1), [&] { return !copies_output(); });
  for (int* fd : {&out_.pipe, &err_.pipe}) CloseFd(*fd);
  // The processes ended here are this one's children by then: reaped, not left as zombies to init (a container's
  // first process may never reap them).
  wait(Clock::now() + std::chrono::seconds(1), [&] {
    ReapAdopted(pid_);
    siginfo_t info{};
    return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0;  // ECHILD: no child left
  });
  return said;
}

}  // namespace srunway::launcher
