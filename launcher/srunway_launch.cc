// srunway-launch: started by srun on every task; bootstraps the step, then either execs a command with the
// torchrun environment or checks the communicators (--check). See README "Launcher" for codes and examples.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/cli.h"
#include "common/env.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/process_mark.h"
#include "launcher/bootstrap.h"
#include "launcher/launch.h"
#include "launcher/supervise.h"
#include "launcher/watchdog.h"

namespace {

using namespace srunway;
using namespace srunway::launcher;

// What Slurm sends a step's tasks (scancel, the time limit, --signal), forwarded to the supervised program.
constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT};

// One line on stderr per process, even when the main thread and the watchdog notice the same death. The one that
// comes second waits until the line is written: it may be about to _Exit, which would take an unwritten line along.
// Neither waits more than two seconds, so that a write that never ends (stderr a full pipe nobody reads) cannot keep
// either from ending the process: the line is written on a thread of its own, left behind if it is stuck.
void Report(const std::string& line) {
  constexpr auto kLimit = std::chrono::seconds(2);
  static std::timed_mutex mutex;
  static bool reported = false;  // under mutex
  std::unique_lock lock(mutex, kLimit);
  if (!lock.owns_lock() || std::exchange(reported, true)) return;
  auto written = std::make_shared<std::promise<void>>();
  std::future<void> done = written->get_future();
  std::thread([text = fmt::format("srunway-launch: {}\n", line), written] {
    fmt::print(stderr, "{}", text);
    written->set_value();
  }).detach();
  done.wait_for(kLimit);
}

// Messages from a failed bootstrap already say which rank saw them; later ones get the prefix here.
int Fail(const Bootstrap* bootstrap, const common::Status& status, int code) {
  Report((bootstrap != nullptr ? bootstrap->Prefix() : "") + status.message());
  return code;
}

// --check's exit code for a failure: 4 where the communicator could not be built, whether this rank found it or
// learnt it from the peer that did (its abort reads "rank N on HOST failed: communicator init: ..."; which of the
// two comes first is a race, and both ranks should say the same), 3 for the rest of the bootstrap.
int CheckExitCode(std::string_view why) {
  constexpr std::string_view kComm = "communicator init";
  return why.starts_with(kComm) || why.find(fmt::format(" failed: {}", kComm)) != std::string_view::npos
             ? kExitComm
             : kExitBootstrap;
}

struct SupervisionOptions {
  std::string log_dir;
  bool tee = false;
  std::chrono::milliseconds hang_timeout{0};
};

// The signals the supervisor waits for: those it forwards, and SIGCHLD, so that the program's end wakes it at
// once instead of at the next tick.
sigset_t SupervisorSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : kForwardedSignals) sigaddset(&set, signal);
  sigaddset(&set, SIGCHLD);
  return set;
}

// slurmstepd signals a step's processes one by one (children before parents), so the program may end of Slurm's
// signal (scancel, the time limit) before this process gets its own copy. For an end that can be an answer to such
// a signal (an exit code, or death by one of the signals Slurm sends), waits up to `settle` for that copy: the
// signal when Slurm is ending the step, so the end is no failure to report, else 0. A SIGKILL or a crash is
// reported at once: waiting would let the step's own collapse (MPI peers aborting it) arrive first and hide the
// rank that failed.
int SlurmSignalFollows(const ChildEnd& end, const sigset_t& signals, std::chrono::milliseconds settle) {
  if (!common::GetEnv("SLURM_JOB_ID") || end.how == ChildEnd::How::kHung) return 0;
  if (end.how == ChildEnd::How::kSignalled && !sigismember(&signals, end.code)) return 0;
  const auto give_up = std::chrono::steady_clock::now() + settle;
  while (true) {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::nanoseconds>(give_up - std::chrono::steady_clock::now()).count();
    if (left <= 0) return 0;
    const timespec wait{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    siginfo_t info{};
    const int signal = ::sigtimedwait(&signals, &info, &wait);
    if (signal > 0 && signal != SIGCHLD && signal != SIGCONT && info.si_pid == ::getppid()) return signal;
  }
}

// A private directory for the program's heartbeat and error files, removed when supervision ends. A supervisor that
// is killed cannot remove its own: when a rank calls PMIx_Abort, Slurm ends the whole step with SIGKILL, and every
// other rank's directory stayed in each node's /tmp. So the name carries this process's mark
// (srunway-launch.HOST.PIDNS.PID.XXXXXX), and each supervisor first removes those of supervisors on its host and in
// its PID namespace whose process is gone. Without a directory (TMPDIR unusable, /tmp full) the program runs without
// a heartbeat (no --hang-timeout) or error file, and a line says so.
struct ScratchDir {
  static constexpr std::string_view kStem = "srunway-launch.";
  std::filesystem::path path;
  explicit ScratchDir(bool needed_for_hangs) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::temp_directory_path(ec);
    if (ec) {  // TMPDIR names no directory: where Python's tempfile and PyTorch go instead
      common::LogWarn("TMPDIR {}: {}: the program's heartbeat and error files go in /tmp instead",
                      common::GetEnvOr("TMPDIR", ""), ec.message());
      parent = "/tmp";
    }
    const std::optional<common::ProcessMark> me = common::ThisProcessMark();
    if (me) RemoveDeadOnes(parent);
    std::string pattern = (parent / fmt::format("{}{}XXXXXX", kStem, me ? common::MarkInName(*me) : "")).string();
    if (::mkdtemp(pattern.data()) != nullptr) {
      path = pattern;
      return;
    }
    const int error = errno;
    common::LogWarn("cannot create a directory in {}: {}: the program runs without a heartbeat file{} or "
                    "TORCHELASTIC_ERROR_FILE", parent.string(), std::strerror(error),
                    needed_for_hangs ? " (no --hang-timeout)" : "");
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }

  // Those of supervisors on this host and in this PID namespace whose process is gone (a process that exists, a
  // live supervisor or a new process that took a dead one's number, keeps its own). Only this user's directories,
  // never a link: /tmp is everyone's.
  static void RemoveDeadOnes(const std::filesystem::path& parent) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(kStem)) continue;
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
      const std::optional<common::ProcessMark> owner =
          common::MarkFromName(std::string_view(name).substr(kStem.size()));
      if (!owner || !common::ProcessGone(*owner)) continue;
      std::error_code removed;
      std::filesystem::remove_all(it->path(), removed);
      if (!removed) common::LogDebug("removed {}: left by srunway-launch process {}, which was killed", name,
                                     owner->pid);
    }
  }
};

// Supervised exec mode: the program runs as this process's child; signals are forwarded, the watchdog keeps
// every rank connected for the whole run, and the first rank whose program fails (an exit code, a signal, a
// hang) ends the step everywhere with one line naming it.
int Supervise(Bootstrap& boot, std::vector<std::string> command, EnvList env, const SupervisionOptions& supervision,
              std::chrono::milliseconds timeout) {
  const Identity& me = boot.identity();
  // Our own stdout may go away (`| head`, a broken srun connection): --tee's copy then fails with EPIPE rather than
  // SIGPIPE ending the supervisor, and the program and its log file go on. (Not in exec mode, where the program
  // would inherit it; the child gets the default back.)
  ::signal(SIGPIPE, SIG_IGN);
  std::mutex peer_mutex;
  std::string peer_failure;  // under peer_mutex, set on the watchdog's thread
  std::atomic<bool> peer_failed{false};
  auto watchdog = Watchdog::Start(boot, timeout, [&](const std::string& why) {
    std::lock_guard lock(peer_mutex);
    peer_failure = why;
    peer_failed = true;
  });
  if (!watchdog.ok()) {
    Fail(&boot, watchdog.status(), kExitBootstrap);
    boot.Abort(watchdog.status().message());
    return kExitBootstrap;
  }
  (*watchdog)->SetPhase("the program");
  // torchrun's variables beside the rendezvous ones: the run, the restart (Slurm's requeue count) and where a
  // PyTorch program's @record leaves its error.
  ScratchDir scratch(supervision.hang_timeout.count() > 0);
  const std::string error_file = scratch.path.empty() ? "" : (scratch.path / "error.json").string();
  env.emplace_back("TORCHELASTIC_RUN_ID", common::GetEnvOr("SLURM_JOB_ID", "none"));
  const std::string restarts = common::GetEnvOr("SLURM_RESTART_COUNT", "0");
  env.emplace_back("TORCHELASTIC_RESTART_COUNT", restarts);
  if (!error_file.empty()) env.emplace_back("TORCHELASTIC_ERROR_FILE", error_file);
  ChildOptions options{std::move(command), std::move(env), supervision.log_dir, supervision.tee, me.rank,
                       scratch.path.empty() ? "" : (scratch.path / "heartbeat").string(), supervision.hang_timeout};
  // A requeued job (Slurm counts its restarts) adds to its earlier attempt's logs instead of replacing them.
  options.append_logs = restarts != "0" && !restarts.empty();
  // Leave PMIx before the program starts: it may be an MPI program that connects as this rank.
  (void)boot.Finalize();
  auto child = Child::Start(options);
  if (!child.ok()) {
    const std::string why = fmt::format("{}: {}", boot.NameRank(me.rank), child.status().message());
    Report(why);
    (*watchdog)->Abort(why);
    return child.status().code() == common::StatusCode::kNotFound ? kExitNotFound : kExitNotExecutable;
  }
  const sigset_t signals = SupervisorSignals();
  constexpr auto kTick = std::chrono::milliseconds(100);
  const timespec tick{0, 100'000'000}, now{0, 0};
  // Slurm signalled the step (scancel, the time limit, --signal's warning, preemption): every rank's program has
  // the signal too, and its code is the answer (USR1 commonly means "save and stop", as in srunway-train). The last
  // such signal (CONT aside), 0 before any.
  int signalled = 0;
  constexpr auto kGrace = std::chrono::seconds(10);
  constexpr auto kSignalSettle = std::chrono::milliseconds(300);
  // The signals by which Slurm ends a step (scancel, a user's Ctrl-C or hangup) rather than warns it.
  auto ending = [&] { return signalled == SIGTERM || signalled == SIGINT || signalled == SIGHUP; };
  // Once the program has ended (and a failure has been reported), what it left running in its group is ended too,
  // as Slurm ends a step's leftovers, after a moment to finish on its own; a warning says what it was. Not while
  // Slurm ends the step: slurmstepd signals the processes one by one, children first, and a shell's loop starts its
  // next command between its child's signal and its own (seen in CI: "left 1 process (sleep 28011)" on a scancel).
  auto end_leftovers = [&] {
    const std::string left = child->EndLeftovers(std::chrono::seconds(1), std::chrono::seconds(3));
    if (!left.empty() && !ending()) common::LogWarn("the program ended and left {}", left);
  };
  while (true) {
    // Waits a tick for a signal, or for output when the program's comes through here: a program that prints
    // much was held to a pipe's worth (16 KiB) a tick, 160 KB/s, blocked in its writes.
    siginfo_t info{};
    const bool copies = child->copies_output();
    if (const int signal = ::sigtimedwait(&signals, &info, copies ? &now : &tick); signal > 0 && signal != SIGCHLD) {
      // Slurm's slurmstepd (our parent) signals every process of the step itself (proctrack linuxproc and cgroup
      // find them all), so the program already has it: forwarding would deliver it twice. Signals from anyone
      // else (a user's kill of this process) are forwarded.
      if (info.si_pid != ::getppid() || !common::GetEnv("SLURM_JOB_ID")) child->Signal(signal);
      if (signal != SIGCONT) signalled = signal;
    }
    child->Pump(copies ? kTick : std::chrono::milliseconds(0));
    if (peer_failed) {
      std::string why;
      {
        std::lock_guard lock(peer_mutex);
        why = peer_failure;
      }
      Report(boot.Prefix() + why);
      const ChildEnd end = child->Terminate(kGrace);
      end_leftovers();
      return signalled ? end.ExitCode() : kExitBootstrap;
    }
    std::optional<ChildEnd> end = child->Poll();
    if (!end) continue;
    if (end->how == ChildEnd::How::kHung) child->Terminate(kGrace);  // still running: its end is the hang
    if (!end->ok()) {
      if (!signalled) signalled = SlurmSignalFollows(*end, signals, kSignalSettle);
      end->detail = error_file.empty() ? "" : ReadTorchErrorFile(error_file);
      const std::string why = fmt::format("{} {}", boot.NameRank(me.rank), end->Describe());
      // When Slurm is ending the step, every rank's program ends on its own signal and every rank returns its
      // program's code: nobody is told to stop early, and an exit code (srunway-train's 4 after saving) is no
      // failure to report. Nor is a death by the very signal that ends it (scancel's TERM, a user's INT or HUP):
      // Slurm says that it cancelled the step, and a line from each of a thousand ranks would only bury it. A death
      // by USR1, USR2 or QUIT is named: the program had no handler for what was meant as a warning.
      const bool ended_by_it = end->how == ChildEnd::How::kSignalled && end->code == signalled && ending();
      if (!signalled || (end->how != ChildEnd::How::kExited && !ended_by_it)) Report(why);
      if (!signalled) (*watchdog)->Abort(why);
      end_leftovers();
      return end->how == ChildEnd::How::kHung ? kExitHung : end->ExitCode();
    }
    end_leftovers();
    // This rank's program finished well. Rank 0 keeps the watchdog's root until every peer has finished too (or
    // one failed); the others say goodbye.
    while (me.rank == 0 && !(*watchdog)->WaitFinished(std::chrono::milliseconds(10))) {
      if (const int signal = ::sigtimedwait(&signals, nullptr, &now); signal > 0 && signal != SIGCHLD) break;
    }
    if (peer_failed) {
      std::lock_guard lock(peer_mutex);
      Report(boot.Prefix() + peer_failure);
    }
    return kExitOk;
  }
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("srunway-launch");
  common::ExitIfStdoutLost(1);  // --check's report; a supervised program writes its own stdout
  CLI::App app{"Bootstrap a Slurm step (PMIx, Slurm environment or torchrun environment), then exec COMMAND with "
               "the torchrun variables, or --check the communicators."};
  common::SetUpProgram(app, "srunway-launch");
  std::string bootstrap_name = "auto", comm_name = "auto";
  double timeout_s = 60;
  bool check = false, json = false;
  std::string bytes_text = "1048576";
  app.add_option("--bootstrap", bootstrap_name, "auto, pmix, slurm or env")->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds each phase may take before the step is ended")
      ->capture_default_str()->check(common::Positive());
  CLI::Option* check_flag =
      app.add_flag("--check", check, "build communicators, check an all-reduce and an all-gather, time every phase");
  app.add_option("--comm", comm_name, "communicator for --check: auto, nccl, mpi or self")
      ->capture_default_str()->needs(check_flag);
  app.add_option("--bytes", bytes_text, "all-reduce size for --check")->capture_default_str()->needs(check_flag);
  app.add_flag("--json", json, "--check prints JSON")->needs(check_flag);
  bool no_supervise = false;
  SupervisionOptions supervision;
  double hang_timeout_s = 600;
  CLI::Option* no_supervise_flag = app.add_flag(
      "--no-supervise", no_supervise,
      "exec the command instead of staying as its parent (no failure propagation, no hang detection)");
  // The supervisor's options, refused where there is none rather than taken and ignored (no log written).
  app.add_option("--hang-timeout", hang_timeout_s,
                 "seconds a program that reports progress through SRUNWAY_HEARTBEAT may make none before it is "
                 "named as hung and the step ends")
      ->capture_default_str()->check(common::Positive())->excludes(no_supervise_flag)->excludes(check_flag);
  CLI::Option* log_dir =
      app.add_option("--log-dir", supervision.log_dir, "write each rank's stdout and stderr to DIR/rank_R.out and .err")
          ->excludes(no_supervise_flag)->excludes(check_flag);
  app.add_flag("--tee", supervision.tee, "with --log-dir, also print the output as usual")->needs(log_dir);
  app.prefix_command();
  app.footer("Example: srun --mpi=pmix -N2 --ntasks-per-node=4 srunway-launch -- python3 train.py");
  common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitOk : kExitUsage;
  }
  // prefix_command() ends the options at the first argument it does not know: a mistyped option would be run as
  // the program (every rank failing to start '--hang-timout'), so an argument there that looks like an option is
  // refused, and '--' before the command lets a program's own name start with '-'.
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command.front() == "--") {
    command.erase(command.begin());
  } else if (!command.empty() && command.front().starts_with('-')) {
    return Fail(nullptr,
                common::InvalidArgument("unknown option '{}' (see --help; the command goes after --)", command.front()),
                kExitUsage);
  }
  auto kind = ParseBootstrapKind(bootstrap_name);
  auto comm_kind = ParseCommKind(comm_name);
  auto bytes = common::ParseInt(bytes_text, "--bytes", 4, int64_t{1} << 34);
  for (const common::Status* status : {&kind.status(), &comm_kind.status(), &bytes.status()}) {
    if (!status->ok()) return Fail(nullptr, *status, kExitUsage);
  }
  if (check == !command.empty()) {
    return Fail(nullptr, common::InvalidArgument("give either --check or a command after --"), kExitUsage);
  }

  // Made before the bootstrap, so that a directory no rank can write ends the step at once, on every rank.
  if (!supervision.log_dir.empty()) {
    if (auto made = common::PrepareWritableDir(supervision.log_dir, "--log-dir"); !made.ok()) {
      return Fail(nullptr, made, kExitUsage);
    }
  }
  const bool supervise = !check && !no_supervise;
  supervision.hang_timeout = common::TimeoutMillis(hang_timeout_s);
  auto timeout = common::TimeoutMillis(timeout_s);
  // Supervising, this process takes the signals Slurm sends and forwards them; blocked before any thread starts
  // (the bootstrap's and the watchdog's inherit the mask), so only the main loop sees them.
  if (supervise) {
    const sigset_t signals = SupervisorSignals();
    ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }
  // PMIx serves one client per rank and the program may need it (MPI_Init, srunway-train's MPI ranks): under
  // Slurm a supervisor takes Slurm's environment + TCP and leaves PMIx to the program.
  if (supervise && *kind == BootstrapKind::kAuto && common::GetEnv("SLURM_PROCID") && common::GetEnv("SLURM_STEP_ID")) {
    *kind = BootstrapKind::kSlurm;
  }
  auto start = std::chrono::steady_clock::now();
  auto bootstrap = CreateBootstrap(
      *kind, timeout, [](const common::Status& failure) { Fail(nullptr, failure, kExitBootstrap); },
      check ? Announcer() : AnnounceMaster);
  if (!bootstrap.ok()) return kExitBootstrap;
  Bootstrap& boot = **bootstrap;
  double init_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  if (check) {
    // A rank that dies inside a collective would leave the others waiting there forever: the watchdog notices,
    // every rank says so in one line, and the step ends.
    auto watchdog = Watchdog::Start(boot, timeout, [&boot](const std::string& why) {
      Report(boot.Prefix() + why);
      boot.Abort(why);
      std::_Exit(CheckExitCode(why));
    });
    if (!watchdog.ok()) {
      Fail(&boot, watchdog.status(), kExitBootstrap);
      boot.Abort(watchdog.status().message());
      return kExitBootstrap;
    }
    auto fail = [&](const common::Status& failure) {
      const int code = CheckExitCode(failure.message());
      Fail(&boot, failure, code);
      // The others may be waiting for this rank where no timeout of theirs runs (a rank stuck elsewhere): tell them.
      (*watchdog)->Abort(FailureForPeers(boot.NameRank(boot.identity().rank), failure));
      boot.Abort(failure.message());
      return code;
    };
    // An MPI call past the deadline cannot return: the process ends from the deadline's thread, as a failure would.
    auto on_stuck = [&fail](const common::Status& stuck) { std::_Exit(fail(stuck)); };
    auto result = RunCheck(boot, *comm_kind, static_cast<size_t>(*bytes), init_ms, timeout, watchdog->get(), on_stuck);
    if (!result.ok()) return fail(result.status());
    if (boot.identity().rank == 0) {
      std::string bootstrap_used(BootstrapKindName(boot.kind()));
      if (json) {
        common::Print("{}\n", CheckJson(*result, boot.identity(), bootstrap_used).dump(2));
      } else {
        common::Print("{}", FormatCheckTable(*result, boot.identity(), bootstrap_used));
      }
    }
    watchdog->reset();
    (void)boot.Finalize();
    return result->allreduce_ok && result->allgather_ok ? kExitOk : kExitWrongResult;
  }

  auto env = ExecEnvironment(boot);
  if (!env.ok()) {
    Fail(&boot, env.status(), kExitBootstrap);
    boot.Abort(env.status().message());
    return kExitBootstrap;
  }
  if (boot.identity().rank == 0 && !common::GetEnvInt("SLURM_CPUS_PER_TASK", 1, 4096).ok()) {  // a share, not -c
    for (const auto& [name, value] : *env) {
      if (name != "OMP_NUM_THREADS") continue;
      common::LogInfo("OMP_NUM_THREADS={} for the program: the ranks of a node share its CPUs (no --cpus-per-task or "
                      "CPU binding); set OMP_NUM_THREADS to choose", value);
    }
  }
  if (!supervise) {
    // Leave PMIx before exec: the command may be an MPI program that connects to it again. And before setenv, which
    // no other thread's getenv may race: PMIx's progress thread is gone once it is left.
    (void)boot.Finalize();
    for (const auto& [name, value] : *env) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (auto& arg : command) args.push_back(arg.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    int error = errno;
    fmt::print(stderr, "srunway-launch: {}{}\n", boot.Prefix(), CannotRun(command[0], error));
    return error == ENOENT ? kExitNotFound : kExitNotExecutable;
  }
  return Supervise(boot, std::move(command), std::move(*env), supervision, timeout);
}
