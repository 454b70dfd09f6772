// What srunway-launch does, as a library: the torchrun environment for exec mode, and the --check run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "launcher/bootstrap.h"
#include "launcher/comm.h"
#include "launcher/watchdog.h"

namespace srunway::launcher {

// Documented exit codes of srunway-launch.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitBootstrap = 3;   // a peer died, did not arrive in time, or the backend failed
inline constexpr int kExitComm = 4;        // the communicator could not be built or a collective failed
inline constexpr int kExitWrongResult = 5; // --check found a wrong value
inline constexpr int kExitHung = 6;        // the supervised program made no progress for --hang-timeout (killed)
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The variables torchrun gives each worker.
EnvList TorchrunEnv(const Identity& identity, const std::string& master_addr, int master_port);

// MASTER_PORT for a Slurm step: the first free port of a sequence derived from the job and step ids (10000 to
// 19999, apart from the bootstrap exchange's 20000 and up), checked free on this host.
common::StatusOr<int> PickMasterPort(int64_t job_id, int64_t step_id);

// Exec mode's announcement in the init exchange (CreateBootstrap's `announce`): rank 0 picks MASTER_ADDR (its own
// address) and MASTER_PORT unless torchrun-style variables already name them; every rank adds its CPU mask
// (AffinityMaskText).
std::string AnnounceMaster(const Identity& identity);
// Exec mode's environment, from the ranks' announcements: no exchange of its own. The torchrun variables, and
// OMP_NUM_THREADS as ThreadsForProgram says.
common::StatusOr<EnvList> ExecEnvironment(const Bootstrap& bootstrap);
// OMP_NUM_THREADS for the program where it is not set: Slurm's --cpus-per-task, else, where other ranks of the
// node may run on this rank's CPUs (not pinned), its share of them (torchrun sets 1 for more than one worker per
// node, to the same end); nothing for a rank whose CPUs are its own.
std::optional<std::string> ThreadsForProgram(const Bootstrap& bootstrap);

struct PhaseTiming {
  std::string phase;
  double max_ms = 0;
  double median_ms = 0;
  int slowest_rank = 0;
  std::string slowest_host;
};

struct CheckResult {
  std::vector<PhaseTiming> phases;
  bool allreduce_ok = false;
  bool allgather_ok = false;
  std::string comm;
};

// Bootstrap phases already timed by the caller ("init") plus fence, the communicator's set-up (NCCL: id
// broadcast, communicator init), the intra- and inter-node splits and the first collective; checks an all-reduce
// of `bytes` and an all-gather; gathers every rank's timings. Communicator set-up and each operation may take
// `timeout`. Tells `watchdog` (when given) each phase it enters, so a death is reported with the phase, and
// which communicator to abort. A communicator call that cannot be abandoned (MPI's) and outlives `timeout` is
// handed to `on_stuck` (on another thread, with the phase named), which must end the process.
common::StatusOr<CheckResult> RunCheck(Bootstrap& bootstrap, CommKind comm_kind, size_t bytes, double init_ms,
                                       std::chrono::milliseconds timeout, Watchdog* watchdog,
                                       std::function<void(const common::Status& stuck)> on_stuck);

// What a rank whose --check failed tells the others (`rank_name` is its own, "rank 0 on node1"): "rank 0 on node1
// failed: WHY", except for a failure another rank caused (kAborted: "rank 3 on node2 died during id broadcast"),
// which names that rank already and goes on as it is, so that every survivor says the same whether its watchdog
// or this word reaches it first.
std::string FailureForPeers(std::string_view rank_name, const common::Status& failure);

std::string FormatCheckTable(const CheckResult& result, const Identity& identity, std::string_view bootstrap);
common::Json CheckJson(const CheckResult& result, const Identity& identity, std::string_view bootstrap);

}  // namespace srunway::launcher
