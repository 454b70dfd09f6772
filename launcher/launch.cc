// What srunway-launch does, as a library: the torchrun environment for exec mode, and the --check run.
#include "launcher/launch.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/env.h"
#include "common/parse.h"
#include "launcher/comm_factory.h"
#include "launcher/cpu_share.h"

namespace srunway::launcher {
namespace {

using common::Status;
using common::StatusOr;

bool PortFree(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return free;
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

EnvList TorchrunEnv(const Identity& id, const std::string& master_addr, int master_port) {
  return {{"RANK", std::to_string(id.rank)},
          {"LOCAL_RANK", std::to_string(id.local_rank)},
          {"WORLD_SIZE", std::to_string(id.size)},
          {"LOCAL_WORLD_SIZE", std::to_string(id.local_size)},
          {"GROUP_RANK", std::to_string(id.node_id)},
          {"NODE_RANK", std::to_string(id.node_id)},
          {"GROUP_WORLD_SIZE", std::to_string(id.node_count)},
          // torchrun's one role, "default" (its --role), holds every worker.
          {"ROLE_NAME", "default"},
          {"ROLE_RANK", std::to_string(id.rank)},
          {"ROLE_WORLD_SIZE", std::to_string(id.size)},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", std::to_string(master_port)}};
}

StatusOr<int> PickMasterPort(int64_t job_id, int64_t step_id) {
  const int base = 10000 + static_cast<int>((job_id * 37 + step_id * 101) % 9000);
  for (int port = base; port < base + 64; ++port) {
    if (PortFree(port)) return port;
  }
  return common::Unavailable("no free MASTER_PORT in {}-{} on this host", base, base + 63);
}

std::string FailureForPeers(std::string_view rank_name, const common::Status& failure) {
  if (failure.code() == common::StatusCode::kAborted) return failure.message();
  return fmt::format("{} failed: {}", rank_name, failure.message());
}

std::string AnnounceMaster(const Identity& id) {
  if (id.rank != 0) return common::Json{{"cpus", AffinityMaskText()}}.dump();
  std::string addr = common::GetEnvOr("MASTER_ADDR", LocalAddress());
  int port = 0;
  if (auto given = common::GetEnvInt("MASTER_PORT", 1, 65535); given.ok()) {
    port = static_cast<int>(*given);
  } else {
    auto job = common::GetEnvInt("SLURM_JOB_ID", 0, INT64_MAX);
    auto step = common::GetEnvInt("SLURM_STEP_ID", 0, INT64_MAX);
    auto picked = PickMasterPort(job.ok() ? *job : getpid(), step.ok() ? *step : 0);
    // Said in the exchange rather than returned: every rank then fails with the reason instead of waiting.
    if (!picked.ok()) return common::Json{{"error", picked.status().message()}}.dump();
    port = *picked;
  }
  return common::Json{{"master_addr", addr}, {"master_port", port}, {"cpus", AffinityMaskText()}}.dump();
}

StatusOr<EnvList> ExecEnvironment(const Bootstrap& bootstrap) {
  if (bootstrap.peers().empty()) return common::Internal("exec environment asked for before the init exchange");
  const std::string where = fmt::format("{}'s master announcement", bootstrap.NameRank(0));
  SRUNWAY_ASSIGN_OR_RETURN(common::Json master, common::ParseJson(bootstrap.peers()[0].announced, where));
  if (master.is_object() && master.contains("error")) {
    SRUNWAY_ASSIGN_OR_RETURN(std::string error, common::JsonField<std::string>(master, "error", where));
    return common::Unavailable("{}: {}", bootstrap.NameRank(0), error);
  }
  SRUNWAY_ASSIGN_OR_RETURN(std::string addr, common::JsonField<std::string>(master, "master_addr", where));
  SRUNWAY_ASSIGN_OR_RETURN(int port, common::JsonField<int>(master, "master_port", where));
  if (port < 1 || port > 65535) return common::Internal("{}: port {} is out of range", where, port);
  EnvList env = TorchrunEnv(bootstrap.identity(), addr, port);
  if (std::optional<std::string> threads = ThreadsForProgram(bootstrap)) {
    env.emplace_back("OMP_NUM_THREADS", *threads);
  }
  return env;
}

std::optional<std::string> ThreadsForProgram(const Bootstrap& bootstrap) {
  // As srunway-train reads them (its ThreadCount): an empty OMP_NUM_THREADS is none, and SLURM_CPUS_PER_TASK counts
  // where it is a count.
  if (!common::GetEnvOr("OMP_NUM_THREADS", "").empty()) return std::nullopt;
  auto per_task = common::GetEnvInt("SLURM_CPUS_PER_TASK", 1, 4096);
  if (per_task.ok()) return std::to_string(*per_task);
  std::vector<std::string> hosts, masks;
  for (const Peer& peer : bootstrap.peers()) {
    hosts.push_back(peer.host);
    auto announced = common::ParseJson(peer.announced, "announcement");
    auto mask = announced.ok() ? common::JsonField<std::string>(*announced, "cpus", "announcement")
                               : common::StatusOr<std::string>(announced.status());
    masks.push_back(mask.ok() ? *mask : "");
  }
  auto share = ShareOf(bootstrap.identity().rank, hosts, masks);
  if (!share.ok() || share->ranks == 1) return std::nullopt;
  return std::to_string(share->threads());
}

StatusOr<CheckResult> RunCheck(Bootstrap& bootstrap, CommKind comm_kind, size_t bytes, double init_ms,
                               std::chrono::milliseconds timeout, Watchdog* watchdog,
                               std::function<void(const common::Status& stuck)> on_stuck) {
  const Identity& id = bootstrap.identity();
  auto enter = [&](std::string_view phase) {
    if (watchdog != nullptr) watchdog->SetPhase(std::string(phase));
    MaybeInjectFault(id.rank, phase);
  };
  std::vector<std::pair<std::string, double>> mine = {{"init", init_ms}};
  enter("fence");
  auto start = std::chrono::steady_clock::now();
  SRUNWAY_RETURN_IF_ERROR(bootstrap.Barrier("fence"));
  mine.push_back({"fence", MillisSince(start)});

  // The communicator's own set-up phases (NCCL: id broadcast, then communicator init), each timed.
  std::string open_phase;
  auto close_phase = [&] {
    if (!open_phase.empty()) mine.push_back({open_phase, MillisSince(start)});
    open_phase.clear();
  };
  CommOptions options;
  options.timeout = timeout;
  // Read on the deadline's thread while this one is stuck: the phase goes through the watchdog's lock.
  options.on_stuck = [watchdog, on_stuck = std::move(on_stuck)](const common::Status& stuck) {
    on_stuck(watchdog != nullptr ? stuck.WithContext(watchdog->Phase()) : stuck);
  };
  options.on_phase = [&](std::string_view phase) {
    close_phase();
    open_phase = phase;
    enter(phase);
    start = std::chrono::steady_clock::now();
  };
  auto comm = CreateComm(comm_kind, bootstrap, options);
  if (!comm.ok()) {
    // A peer that died or stalled during the id exchange is a bootstrap failure, reported as the other phases'.
    const common::StatusCode code = comm.status().code();
    const bool peer = code == common::StatusCode::kUnavailable || code == common::StatusCode::kDeadlineExceeded ||
                      code == common::StatusCode::kAborted;
    if (open_phase == "id broadcast" && peer) return comm.status();
    return comm.status().WithContext("communicator init");
  }
  close_phase();
  // Declared after the communicator, so it unregisters before the communicator goes on every return.
  std::optional<Watchdog::CommGuard> guard;
  if (watchdog != nullptr) guard.emplace(watchdog->Guard(**comm));

  // The node-local and cross-node communicators a data-parallel trainer builds.
  enter("split");
  start = std::chrono::steady_clock::now();
  auto intra = (*comm)->Split(id.node_id, id.local_rank);
  if (!intra.ok()) return intra.status().WithContext("communicator init: intra-node split");
  auto inter = (*comm)->Split(id.local_rank, id.node_id);
  if (!inter.ok()) return inter.status().WithContext("communicator init: inter-node split");
  mine.push_back({"split", MillisSince(start)});

  CheckResult result;
  result.comm = std::string(CommKindName((*comm)->kind()));
  // All-reduce: rank r contributes r+1 everywhere, so every element must become size*(size+1)/2. The values go
  // through the communicator's own memory (on the GPU for NCCL).
  Comm& world = **comm;
  size_t count = std::max<size_t>(1, bytes / sizeof(float));
  std::vector<float> data(count, static_cast<float>(id.rank + 1));
  SRUNWAY_ASSIGN_OR_RETURN(Buffer buffer, world.Allocate(count * sizeof(float)));
  SRUNWAY_RETURN_IF_ERROR(world.Upload(buffer.data(), data.data(), count * sizeof(float)));
  enter("first collective");
  start = std::chrono::steady_clock::now();
  SRUNWAY_RETURN_IF_ERROR(world.AllReduce(buffer.data(), count, DataType::kFloat32, ReduceOp::kSum));
  mine.push_back({"first collective", MillisSince(start)});
  SRUNWAY_RETURN_IF_ERROR(world.Download(data.data(), buffer.data(), count * sizeof(float)));
  const float expected = static_cast<float>(id.size) * static_cast<float>(id.size + 1) / 2.0f;
  const bool allreduce_mine = std::all_of(data.begin(), data.end(), [&](float v) { return v == expected; });

  std::vector<int32_t> ranks(static_cast<size_t>(id.size), -1);
  int32_t me = id.rank;
  SRUNWAY_ASSIGN_OR_RETURN(Buffer gathered, world.Allocate(ranks.size() * sizeof(int32_t)));
  SRUNWAY_RETURN_IF_ERROR(world.Upload(gathered.data() + id.rank * sizeof(int32_t), &me, sizeof me));
  SRUNWAY_RETURN_IF_ERROR(world.AllGather(gathered.data() + id.rank * sizeof(int32_t), gathered.data(), 1,
                                          DataType::kInt32));
  SRUNWAY_RETURN_IF_ERROR(world.Download(ranks.data(), gathered.data(), ranks.size() * sizeof(int32_t)));
  bool allgather_mine = true;
  for (int r = 0; r < id.size; ++r) allgather_mine = allgather_mine && ranks[static_cast<size_t>(r)] == r;
  SRUNWAY_RETURN_IF_ERROR(world.Barrier());
  guard.reset();
  buffer = Buffer();
  gathered = Buffer();
  intra->reset();
  inter->reset();
  comm->reset();

  enter("report");
  // Every rank must agree, so a wrong value anywhere fails the check everywhere.
  common::Json report = {{"allreduce_ok", allreduce_mine}, {"allgather_ok", allgather_mine},
                         {"ms", common::Json::array()}};
  for (auto& [phase, ms] : mine) report["ms"].push_back(ms);
  SRUNWAY_ASSIGN_OR_RETURN(auto all, bootstrap.AllGather(report.dump(), "report"));
  result.allreduce_ok = result.allgather_ok = true;
  std::vector<std::vector<double>> per_phase(mine.size());
  for (size_t r = 0; r < all.size(); ++r) {
    // A peer's report is parsed, never trusted: a malformed one is an error naming the rank, not an exception.
    const std::string where = fmt::format("{}'s report", bootstrap.NameRank(static_cast<int>(r)));
    SRUNWAY_ASSIGN_OR_RETURN(common::Json theirs, common::ParseJson(all[r], where));
    SRUNWAY_ASSIGN_OR_RETURN(bool allreduce_ok, common::JsonField<bool>(theirs, "allreduce_ok", where));
    SRUNWAY_ASSIGN_OR_RETURN(bool allgather_ok, common::JsonField<bool>(theirs, "allgather_ok", where));
    SRUNWAY_ASSIGN_OR_RETURN(std::vector<double> ms, common::JsonField<std::vector<double>>(theirs, "ms", where));
    if (ms.size() != mine.size()) return common::Internal("{} has {} phase times, not {}", where, ms.size(), mine.size());
    result.allreduce_ok &= allreduce_ok;
    result.allgather_ok &= allgather_ok;
    for (size_t i = 0; i < ms.size(); ++i) per_phase[i].push_back(ms[i]);
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    auto& values = per_phase[i];
    PhaseTiming timing{mine[i].first, 0, 0, 0, ""};
    for (size_t r = 0; r < values.size(); ++r) {
      if (values[r] > timing.max_ms) {
        timing.max_ms = values[r];
        timing.slowest_rank = static_cast<int>(r);
      }
    }
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    timing.median_ms = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    timing.slowest_host = static_cast<size_t>(timing.slowest_rank) < bootstrap.peers().size()
                              ? bootstrap.peers()[static_cast<size_t>(timing.slowest_rank)].host : "";
    result.phases.push_back(timing);
  }
  return result;
}

std::string FormatCheckTable(const CheckResult& result, const Identity& id, std::string_view bootstrap) {
  std::string out = fmt::format("srunway-launch --check: {} ranks on {} nodes, bootstrap {}, communicator {}\n",
                                id.size, id.node_count, bootstrap, result.comm);
  out += fmt::format("{:<18} {:>10} {:>10}  {}\n", "phase", "median ms", "max ms", "slowest");
  for (const PhaseTiming& t : result.phases) {
    out += fmt::format("{:<18} {:>10.2f} {:>10.2f}  rank {} on {}\n", t.phase, t.median_ms, t.max_ms, t.slowest_rank,
                       t.slowest_host);
  }
  out += fmt::format("all-reduce: {}\nall-gather: {}\n", result.allreduce_ok ? "ok" : "WRONG",
                     result.allgather_ok ? "ok" : "WRONG");
  return out;
}

common::Json CheckJson(const CheckResult& result, const Identity& id, std::string_view bootstrap) {
  common::Json phases = common::Json::array();
  for (const PhaseTiming& t : result.phases) {
    phases.push_back({{"phase", t.phase}, {"median_ms", t.median_ms}, {"max_ms", t.max_ms},
                      {"slowest_rank", t.slowest_rank}, {"slowest_host", t.slowest_host}});
  }
  return {{"ranks", id.size}, {"nodes", id.node_count}, {"bootstrap", bootstrap}, {"comm", result.comm},
          {"phases", phases}, {"allreduce", result.allreduce_ok ? "ok" : "wrong"},
          {"allgather", result.allgather_ok ? "ok" : "wrong"}};
}

}  // namespace srunway::launcher
