// srunway-collbench: an nccl-tests-compatible collective benchmark that bootstraps through the launcher (PMIx,
// Slurm environment or torchrun environment) and runs over the launcher's Comm (NCCL on GPUs, MPI on CPU ranks).
// Usage: srun --mpi=pmix srunway-collbench all_gather -b 8 -e 128M -f 2 [-c 1] [-J results.json]
// Exit codes: 0 done and correct; 1 wrong results, or the average below 90% of NCCL_TESTS_MIN_BW (nccl-tests'
// rule); 2 bad command line; 3 bootstrap or communicator failure.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>
#include <vector>

#include "common/cli.h"
#include "common/env.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/parse.h"
#include "launcher/bootstrap.h"
#include "launcher/comm.h"
#include "launcher/comm_factory.h"
#include "nccl-tests-wrapper/bench.h"
#include "nccl-tests-wrapper/verdict.h"

namespace {

using namespace srunway;

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitComm = 3;

int Usage(const common::Status& status) {
  common::LogError("{}", status.message());
  return kExitUsage;
}

// nccl-tests' JSON time stamps: local time, "%Y-%m-%d %H:%M:%S".
std::string LocalTime() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char text[32] = {};
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

// The environment for the JSON output: the variables that shape a run (NCCL_, CUDA_, SLURM_, SRUNWAY_,
// OMPI_, PMIX_). nccl-tests writes every variable, tokens and all; a file admins attach to tickets should not.
std::vector<std::string> RelevantEnvironment() {
  std::vector<std::string> kept;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    for (std::string_view prefix : {"NCCL_", "CUDA_", "SLURM_", "SRUNWAY_", "OMPI_", "PMIX_"}) {
      if (text.starts_with(prefix)) kept.emplace_back(text);
    }
  }
  return kept;
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("srunway-collbench");
  common::ExitIfStdoutLost(1);
  nccltests::BenchOptions o;
  std::string test, min_bytes = "32M", max_bytes = "32M", step_bytes = "1M", json_file;
  std::string bootstrap_name = "auto", comm_name = "auto";
  int gpus = 1, check = 1, blocking = 0, threads = 1;
  double timeout_s = 60;
  CLI::App app{"Collective benchmark with nccl-tests' flags, table and bus-bandwidth formulas, over the launcher."};
  common::SetUpProgram(app, "srunway-collbench");
  app.add_option("test", test, "all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv")->required();
  app.add_option("-b,--minbytes", min_bytes, "smallest size (K, M, G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  app.add_option("-i,--stepbytes", step_bytes, "increment between sizes")->capture_default_str();
  app.add_option("-f,--stepfactor", o.step_factor, "multiply sizes by this instead (1: add -i)")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("-n,--iters", o.iters, "timed iterations")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  app.add_option("-w,--warmup_iters", o.warmup, "warmup iterations")->capture_default_str()->check(CLI::Range(0, 1 << 24));
  app.add_option("-c,--check", check, "check results (0/1)")->capture_default_str()->check(CLI::Range(0, 1));
  app.add_option("-o,--op", o.op, "sum, max, min")->capture_default_str();
  app.add_option("-d,--datatype", o.type, "float, half, bfloat16, int32, int64, uint8")->capture_default_str();
  app.add_option("-r,--root", o.root, "root rank (broadcast, reduce)")->capture_default_str();
  app.add_option("-a,--average", o.average, "time: 0 rank 0, 1 mean, 2 min, 3 max")->capture_default_str()->check(CLI::Range(0, 3));
  app.add_option("-z,--blocking", blocking, "1: wait for each operation before the next (GPU; CPU ranks always do)")
      ->capture_default_str()->check(CLI::Range(0, 1));
  app.add_option("-g,--ngpus", gpus, "GPUs per process (1)")->capture_default_str();
  app.add_option("-t,--nthreads", threads, "threads per process (1)")->capture_default_str();
  app.add_option("-J,--output_file", json_file, "also write the results as JSON to this file");
  app.add_option("--bootstrap", bootstrap_name, "auto, pmix, slurm, env")->capture_default_str();
  app.add_option("--comm", comm_name, "auto (NCCL on GPUs, else MPI), nccl, mpi, self")->capture_default_str();
  app.add_option("--timeout", timeout_s, "seconds the bootstrap, communicator set-up and each collective may take")
      ->capture_default_str()->check(common::Positive());
  common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  o.check = check == 1;
  o.blocking = blocking == 1;
  auto collective = nccltests::FindCollective(test);
  if (!collective.ok()) return Usage(collective.status());
  o.collective = *collective;
  for (auto [text, target, what] : {std::tuple{&min_bytes, &o.min_bytes, "-b"}, std::tuple{&max_bytes, &o.max_bytes, "-e"},
                                    std::tuple{&step_bytes, &o.step_bytes, "-i"}}) {
    auto size = nccltests::ParseSize(*text, what);
    if (!size.ok()) return Usage(size.status());
    *target = *size;
  }
  if (o.min_bytes > o.max_bytes) {
    return Usage(common::InvalidArgument("-b {} is larger than -e {}", min_bytes, max_bytes));
  }
  if (o.step_factor == 1 && o.step_bytes == 0 && o.max_bytes > o.min_bytes) {
    return Usage(common::InvalidArgument("-i 0 with -f 1 never gets from -b {} to -e {}: give -i or -f", min_bytes,
                                         max_bytes));
  }
  // The results file is written after the whole sweep: a path that cannot take it is refused first.
  if (!json_file.empty()) {
    if (auto writable = common::CheckWritableFile(json_file, "-J"); !writable.ok()) return Usage(writable);
  }
  if (gpus != 1 || threads != 1) {
    return Usage(common::InvalidArgument("-g {} -t {}: one device per process only (start one task per GPU)", gpus, threads));
  }
  if (auto type = nccltests::ParseType(o.type); !type.ok()) return Usage(type.status());
  if (auto op = nccltests::ParseOp(o.op); !op.ok()) return Usage(op.status());
  auto bootstrap_kind = launcher::ParseBootstrapKind(bootstrap_name);
  if (!bootstrap_kind.ok()) return Usage(bootstrap_kind.status());
  auto comm_kind = launcher::ParseCommKind(comm_name);
  if (!comm_kind.ok()) return Usage(comm_kind.status());
  o.faults = nccltests::FaultsFromEnvironment();
  // nccl-tests' pass mark for the average bus bandwidth, checked before anything runs.
  std::optional<double> min_bw;
  if (auto text = common::GetEnv("NCCL_TESTS_MIN_BW"); text && !text->empty()) {
    auto parsed = common::ParseDouble(*text, "NCCL_TESTS_MIN_BW", 0);
    if (!parsed.ok()) return Usage(parsed.status());
    min_bw = *parsed;
  }

  const std::string start_time = LocalTime();
  auto timeout = common::TimeoutMillis(timeout_s);
  auto bootstrap = launcher::CreateBootstrap(*bootstrap_kind, timeout, [](const common::Status& failure) {
    common::LogError("{}", failure.message());
  });
  if (!bootstrap.ok()) return kExitComm;
  launcher::Bootstrap& boot = **bootstrap;
  common::SetLogRank(boot.identity().rank);
  launcher::CommOptions comm_options;
  comm_options.timeout = timeout;
  comm_options.on_stuck = [&boot](const common::Status& stuck) {
    common::LogError("{}{}", boot.Prefix(), stuck.message());
    boot.Abort(stuck.message());
  };
  // SRUNWAY_FAULT_NO_COMM_NODE (tests): this node cannot set up its communicator, as one without NCCL.
  const bool no_comm = common::GetEnvOr("SRUNWAY_FAULT_NO_COMM_NODE", "") == boot.identity().host;
  auto comm = no_comm ? common::StatusOr<std::unique_ptr<launcher::Comm>>(common::FailedPrecondition(
                            "cannot load NCCL: SRUNWAY_FAULT_NO_COMM_NODE names this node"))
                      : launcher::CreateComm(*comm_kind, boot, comm_options);
  if (!comm.ok()) {
    common::LogError("{}communicator init: {}", boot.Prefix(), comm.status().message());
    boot.Abort(comm.status().message());
    return kExitComm;
  }
  const bool printer = boot.identity().rank == 0;
  auto run = nccltests::RunBenchmark(o, boot, **comm, [&](const nccltests::Run& so_far, const nccltests::Row* row) {
    if (!printer) return;
    common::Print("{}", row ? nccltests::FormatRow(*row) : nccltests::FormatHeader(so_far));
    std::fflush(stdout);
  });
  if (!run.ok()) {
    common::LogError("{}{}", boot.Prefix(), run.status().message());
    boot.Abort(run.status().message());
    return run.status().code() == common::StatusCode::kInvalidArgument ? kExitUsage : kExitComm;
  }
  // As nccl-tests: the average passes at 90% of NCCL_TESTS_MIN_BW or more.
  if (min_bw) run->avg_ok = run->MeanBusbw() >= *min_bw * 0.9;
  // The verdict run-nccl-tests gives without a threshold: wrong values or a failed NCCL_TESTS_MIN_BW fail.
  int code = nccltests::Judge(*run, std::nullopt).outcome == nccltests::Outcome::kPass ? kExitOk : kExitFailed;
  if (printer) {
    common::Print("{}", nccltests::FormatFooter(*run));
    if (!json_file.empty()) {
      common::Json json = nccltests::ToJson(*run);
      // The rest of what nccl-tests writes around the results.
      json["start_time"] = start_time;
      json["end_time"] = LocalTime();
      json["args"] = std::vector<std::string>(argv, argv + argc);
      json["env"] = RelevantEnvironment();
      const int nccl_version = (*comm)->device().nccl_version;
      json["nccl_version"] = nccl_version > 0 ? common::Json(nccl_version) : common::Json(nullptr);
      json["config"]["blocking_collectives"] = o.blocking ? "true" : "false";
      json["config"]["parallel_init"] = "false";
      if (auto status = common::WriteFileAtomic(json_file, json.dump(2) + "\n"); !status.ok()) {
        common::LogError("{}", status.message());
        code = kExitFailed;
      }
    }
  }
  comm->reset();  // the communicator ends before the bootstrap does
  (void)boot.Finalize();
  return code;
}
