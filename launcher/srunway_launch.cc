// srunway-launch: started by srun on every task; bootstraps the step, then either execs a command with the
// torchrun environment or checks the communicators (--check). See README "Launcher" for codes and examples.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/parse.h"
#include "launcher/bootstrap.h"
#include "launcher/launch.h"
#include "launcher/watchdog.h"

namespace {

using namespace srunway;
using namespace srunway::launcher;

// One line on stderr per process, even when the main thread and the watchdog notice the same death.
void Report(const std::string& line) {
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true)) fmt::print(stderr, "srunway-launch: {}\n", line);
}

// Messages from a failed bootstrap already say which rank saw them; later ones get the prefix here.
int Fail(const Bootstrap* bootstrap, const common::Status& status, int code) {
  Report((bootstrap != nullptr ? bootstrap->Prefix() : "") + status.message());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("srunway-launch");
  CLI::App app{"Bootstrap a Slurm step (PMIx, Slurm environment or torchrun environment), then exec COMMAND with "
               "the torchrun variables, or --check the communicators."};
  std::string bootstrap_name = "auto", comm_name = "auto";
  double timeout_s = 60;
  bool check = false, json = false;
  std::string bytes_text = "1048576";
  app.add_option("--bootstrap", bootstrap_name, "auto, pmix, slurm or env")->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds each phase may take before the step is ended")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--check", check, "build communicators, check an all-reduce and an all-gather, time every phase");
  app.add_option("--comm", comm_name, "communicator for --check: auto, nccl, mpi or self")->capture_default_str();
  app.add_option("--bytes", bytes_text, "all-reduce size for --check")->capture_default_str();
  app.add_flag("--json", json, "--check prints JSON");
  app.prefix_command();
  app.footer("Example: srun --mpi=pmix -N2 --ntasks-per-node=4 srunway-launch -- python3 train.py");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitOk : kExitUsage;
  }
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  auto kind = ParseBootstrapKind(bootstrap_name);
  auto comm_kind = ParseCommKind(comm_name);
  auto bytes = common::ParseInt(bytes_text, "--bytes", 4, int64_t{1} << 34);
  for (const common::Status* status : {&kind.status(), &comm_kind.status(), &bytes.status()}) {
    if (!status->ok()) return Fail(nullptr, *status, kExitUsage);
  }
  if (check == !command.empty()) {
    return Fail(nullptr, common::InvalidArgument("give either --check or a command after --"), kExitUsage);
  }

  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
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
      std::_Exit(kExitBootstrap);
    });
    if (!watchdog.ok()) {
      Fail(&boot, watchdog.status(), kExitBootstrap);
      boot.Abort(watchdog.status().message());
      return kExitBootstrap;
    }
    auto result = RunCheck(boot, *comm_kind, static_cast<size_t>(*bytes), init_ms, timeout, watchdog->get());
    if (!result.ok()) {
      int code = result.status().message().starts_with("communicator init") ? kExitComm : kExitBootstrap;
      Fail(&boot, result.status(), code);
      // The others may be waiting for this rank where no timeout of theirs runs (a rank stuck elsewhere): tell them.
      (*watchdog)->Abort(fmt::format("{} failed: {}", boot.NameRank(boot.identity().rank), result.status().message()));
      boot.Abort(result.status().message());
      return code;
    }
    if (boot.identity().rank == 0) {
      std::string bootstrap_used(BootstrapKindName(boot.kind()));
      if (json) {
        fmt::print("{}\n", CheckJson(*result, boot.identity(), bootstrap_used).dump(2));
      } else {
        fmt::print("{}", FormatCheckTable(*result, boot.identity(), bootstrap_used));
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
  for (const auto& [name, value] : *env) ::setenv(name.c_str(), value.c_str(), 1);
  // Leave PMIx before exec: the command may be an MPI program that connects to it again.
  (void)boot.Finalize();
  std::vector<char*> args;
  for (auto& arg : command) args.push_back(arg.data());
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  int error = errno;
  fmt::print(stderr, "srunway-launch: {}cannot run '{}': {}\n", boot.Prefix(), command[0], std::strerror(error));
  return error == ENOENT ? kExitNotFound : kExitNotExecutable;
}
