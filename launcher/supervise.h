// Supervised exec mode: srunway-launch stays as a small parent of the program it starts, forwards the signals
// Slurm sends, watches for the program's end and (when the program opts in through SRUNWAY_HEARTBEAT) for its
// progress stopping, and says how it ended. The program decides (srunway_launch.cc) what to tell the other ranks
// and which exit code to use; this library installs no handler and prints nothing.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace srunway::launcher {

struct ChildOptions {
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  // With a directory: the program's stdout and stderr go to DIR/rank_R.out and DIR/rank_R.err, and with `tee`
  // to this process's stdout and stderr as well (as torchrun's --log-dir and --tee).
  std::string log_dir;
  bool tee = false;
  int rank = 0;
  // The file named to the program in SRUNWAY_HEARTBEAT (empty: none). The program writes its progress into it
  // (a step number, say); once it has, progress that stops changing for `hang_timeout` is a hang.
  std::string heartbeat_path;
  std::chrono::milliseconds hang_timeout{0};
  // The log files are appended to rather than started afresh: a requeued job's earlier attempt keeps its output
  // (why it failed), as Slurm's own output file does.
  bool append_logs = false;
};

// How the supervised program ended, or why it is being ended.
struct ChildEnd {
  enum class How { kExited, kSignalled, kHung };
  How how = How::kExited;
  int code = 0;    // exit code, or the signal number
  std::chrono::milliseconds ran{0};
  std::chrono::milliseconds stalled{0};  // how long its progress had not moved, when it hung
  std::string last_progress;             // the heartbeat's content then
  std::string detail;  // the message of its TORCHELASTIC_ERROR_FILE, when it left one

  bool ok() const { return how == How::kExited && code == 0; }
  // What srunway-launch exits with: the program's code, or 128 + the signal (128 + SIGKILL for a hung program,
  // which is killed).
  int ExitCode() const;
  // "exited with code 1 after 4s", "was killed by SIGSEGV after 2h13m", "hung: no progress for 30s (last
  // progress: 'step 12')", followed by ": " and the detail when there is one.
  std::string Describe() const;
};

// Why `program` could not be started, from exec's errno: "cannot run 'x': No such file or directory"; a directory
// or a file without execute permission says so instead of exec's bare "Permission denied".
std::string CannotRun(const std::string& program, int error);

// "2h13m", "4m07s", "12s".
std::string FormatDuration(std::chrono::milliseconds duration);

// The message a PyTorch program's @record decorator (torch.distributed.elastic) left in TORCHELASTIC_ERROR_FILE:
// message.message, or message when it is a string; empty when the file is absent or says nothing usable.
std::string ReadTorchErrorFile(const std::string& path);

class Child {
 public:
  // Starts the program (found on PATH, as posix_spawnp does) in a process group of its own, unless stdin is a
  // terminal (an interactive srun --pty keeps it in the foreground group). Signals this process blocked are
  // unblocked in the child. The program is killed if this process dies (PR_SET_PDEATHSIG, sent when the calling
  // thread ends: call it on the thread that supervises). This process becomes a child subreaper: the program's
  // orphaned descendants become its children.
  static common::StatusOr<Child> Start(const ChildOptions& options);
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // Sends `signal` to the program's process group (or the program alone when it shares ours).
  void Signal(int signal) const;
  // Whether the program's output comes through this process (with a log directory), for Pump to copy.
  bool copies_output() const { return out_.pipe >= 0 || err_.pipe >= 0; }
  // Copies what the program printed to the log files (and, with tee, to this process's output); waits at most
  // `wait`. Returns when something happened or the wait ran out.
  void Pump(std::chrono::milliseconds wait);
  // The program's end if it has ended (reaped), else nullopt. Checks the heartbeat too: a program whose progress
  // stopped gives How::kHung (it is still running: the caller ends it).
  std::optional<ChildEnd> Poll();
  // SIGTERM to the group, then SIGKILL after `grace`; reaps it. Returns its end.
  ChildEnd Terminate(std::chrono::milliseconds grace);
  // Once the program has ended: what it started and left running (in its group, or out of it but descended from
  // it: a daemon of its own session, which this process adopted) is given `settle` to finish, then
  // SIGTERM and after `grace` SIGKILL (Slurm kills a step's leftovers when its tasks end), its output copied to
  // the end. Returns "" when nothing was left, else what: "2 processes (sleep 4242, bash 4240) running: ended them
  // with SIGTERM". Call it once a failure has been reported, not before: it takes time.
  std::string EndLeftovers(std::chrono::milliseconds settle, std::chrono::milliseconds grace);

 private:
  Child() = default;
  // One of the program's streams, read from its pipe: written to its log file and, with tee or once the log file
  // cannot be written, to this process's own stream (a full disk must neither stop the program nor lose what it
  // prints after it: that goes to Slurm's output, after one line saying so).
  struct Stream {
    Stream() = default;
    Stream(const char* name, int own) : name(name), own(own) {}
    const char* name = "";
    int own = -1;        // this process's stdout or stderr
    int pipe = -1;       // the program's end of it is its stdout or stderr
    int file = -1;       // the log file
    int echo = -1;       // `own` with tee or after the log file failed, else -1
    std::string path;    // of the log file
    uint64_t logged = 0;  // bytes written to it
  };
  std::optional<ChildEnd> Reap(bool block);
  void CopyOut(Stream& stream);

  ChildOptions options_;
  pid_t pid_ = -1;
  bool own_group_ = false;
  pid_t group_ = -1;  // the program's process group, while it may have members (own_group_ only)
  std::chrono::steady_clock::time_point started_;
  Stream out_{"stdout", STDOUT_FILENO};
  Stream err_{"stderr", STDERR_FILENO};
  // The heartbeat file as last seen: its size and its end (the last bytes, which show an appended step too).
  struct Progress {
    int64_t size = 0;
    std::string end;
    bool operator==(const Progress&) const = default;
  };
  static std::optional<Progress> ReadProgress(const std::string& path);

  Progress progress_;
  std::chrono::steady_clock::time_point progress_at_;
  bool progressed_ = false;
};

}  // namespace srunway::launcher
