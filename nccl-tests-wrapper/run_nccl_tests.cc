// run-nccl-tests: validates nodes with one command. Writes the sbatch script for an nccl-tests-compatible run
// (srunway-collbench, or NVIDIA's binaries with --binary), submits it, follows it, parses the result and judges
// the bus bandwidth at the largest size against a threshold. --parse judges a saved log the same way.
// Exit codes: 0 pass; 1 below the threshold or wrong results; 2 could not run (bad flags, a failed or
// cancelled job, output cut short), always with the job's log path when there is one.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/fs.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/subprocess.h"
#include "nccl-tests-wrapper/job.h"

namespace {

using namespace srunway;
using nccltests::Outcome;

constexpr int kExitCouldNotRun = 2;

int CouldNotRun(const std::string& message) {
  common::LogError("{}", message);
  return kExitCouldNotRun;
}

std::string SelfDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// Judges the runs of a log; prints the report (or JSON) and returns the exit code.
int Judge(const std::string& text, const std::string& where, const nccltests::CollectiveInfo* wanted,
          std::optional<double> expect, const std::string& profile, bool json) {
  auto runs = nccltests::ParseAny(text, where);
  if (!runs.ok()) return CouldNotRun(runs.status().message());
  const nccltests::Run* run = &runs->back();
  if (wanted != nullptr) {
    for (const auto& r : *runs) {
      if (r.collective == wanted->name) run = &r;
    }
  }
  std::set<std::string> hosts;
  for (const auto& d : run->devices) hosts.insert(d.host);
  const nccltests::CollectiveInfo* info = wanted;
  if (info == nullptr && !run->collective.empty()) info = *nccltests::FindCollective(run->collective);
  nccltests::Threshold threshold{expect, expect ? "--expect-busbw" : "correctness only (the log does not say which test it is)"};
  if (info != nullptr) threshold = nccltests::ChooseThreshold(expect, profile, info->id, static_cast<int>(std::max<size_t>(hosts.size(), 1)));
  const nccltests::Verdict verdict = nccltests::Judge(*run, threshold.gbps);
  if (json) {
    common::Json out = {{"log", where}, {"run", nccltests::ToJson(*run)}, {"verdict", nccltests::ToJson(verdict)},
                        {"threshold_source", threshold.source}};
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print("{}", nccltests::FormatReport(*run, verdict, threshold));
  }
  if (verdict.outcome != Outcome::kPass) fmt::print(stderr, "run-nccl-tests: {} (log: {})\n", verdict.reason, where);
  return static_cast<int>(verdict.outcome);
}

std::optional<std::string> JobState(const std::string& job) {
  auto result = common::RunCommand({"scontrol", "show", "job", job, "-o"});
  if (!result.ok() || result->exit_code != 0) return std::nullopt;
  const size_t at = result->output.find("JobState=");
  if (at == std::string::npos) return std::nullopt;
  const size_t end = result->output.find(' ', at);
  return result->output.substr(at + 9, end - at - 9);
}

// The nodes of a partition (the default one when `partition` is empty), or nullopt when sinfo cannot tell.
std::optional<int> PartitionNodes(const std::string& partition) {
  std::vector<std::string> argv = {"sinfo", "-h", "-o", "%P %D"};
  auto result = common::RunCommand(argv);
  if (!result.ok() || result->exit_code != 0) return std::nullopt;
  int total = 0;
  bool found = false;
  for (std::string_view line : common::Split(result->output, '\n')) {
    auto words = common::Split(common::Trim(line), ' ');
    if (words.size() != 2) continue;
    std::string name(words[0]);
    const bool is_default = name.ends_with('*');
    if (is_default) name.pop_back();
    if (partition.empty() ? is_default : name == partition) {
      auto count = common::ParseInt(words[1], "sinfo", 0);
      if (count.ok()) total += static_cast<int>(*count);
      found = true;
    }
  }
  return found ? std::optional<int>(total) : std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("run-nccl-tests");
  nccltests::JobSpec spec;
  std::string test = "all_gather", min_bytes = "8M", max_bytes = "8G", parse_log, job_dir;
  std::optional<double> expect;
  bool dry_run = false, json = false;
  double wait_limit_s = 3600;
  CLI::App app{"Validate nodes: run an nccl-tests-compatible benchmark through sbatch and judge its bus bandwidth."};
  app.add_option("--nodes", spec.nodes, "nodes to test")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--nodelist", spec.nodelist, "these nodes (Slurm hostlist)");
  app.add_option("--partition", spec.partition, "partition (default: Slurm's default)");
  app.add_option("--gpus-per-node", spec.gpus_per_node, "one task per GPU; 0 for CPU ranks")->capture_default_str();
  app.add_option("--tasks-per-node", spec.tasks_per_node, "tasks per node with --gpus-per-node 0")->capture_default_str();
  app.add_option("--test", test, "all_gather, all_reduce, reduce_scatter, broadcast, reduce, alltoall, sendrecv")->capture_default_str();
  app.add_option("--min-bytes", min_bytes, "smallest size (K, M, G)")->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest size: the verdict uses its bus bandwidth")->capture_default_str();
  app.add_option("--step-factor", spec.step_factor, "size multiplier")->capture_default_str();
  app.add_option("--iters", spec.iters, "timed iterations per size")->capture_default_str();
  app.add_option("--warmup", spec.warmup, "warmup iterations per size")->capture_default_str();
  app.add_option("--profile", spec.profile, "network profile (SPANK --network-profile) and published figures: a3mega, ...");
  app.add_option("--expect-busbw", expect, "pass mark in GB/s at the largest size (default: 90% of the published figure)");
  app.add_option("--binary", spec.binary_dir, "directory of NVIDIA's nccl-tests binaries (default: srunway-collbench)");
  app.add_option("--time", spec.time_limit_min, "job time limit, minutes")->capture_default_str();
  app.add_option("--job-dir", job_dir, "where the script and the log go (default: ./run-nccl-tests)");
  app.add_option("--wait-limit", wait_limit_s, "seconds to wait for the job before cancelling it")->capture_default_str();
  app.add_flag("--dry-run", dry_run, "print the sbatch script and exit");
  app.add_option("--parse", parse_log, "judge a saved nccl-tests log (text or JSON) instead of running");
  app.add_flag("--json", json, "print the result as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitCouldNotRun;
  }
  auto collective = nccltests::FindCollective(test);
  if (!collective.ok()) return CouldNotRun(collective.status().message());
  spec.collective = *collective;

  if (!parse_log.empty()) {
    auto text = common::ReadFile(parse_log);
    if (!text.ok()) return CouldNotRun(text.status().message());
    const bool explicit_test = app.count("--test") > 0;
    return Judge(*text, parse_log, explicit_test ? spec.collective : nullptr, expect, spec.profile, json);
  }

  auto min = nccltests::ParseSize(min_bytes, "--min-bytes");
  auto max = nccltests::ParseSize(max_bytes, "--max-bytes");
  if (!min.ok()) return CouldNotRun(min.status().message());
  if (!max.ok()) return CouldNotRun(max.status().message());
  if (*min > *max) return CouldNotRun(fmt::format("--min-bytes {} is larger than --max-bytes {}", min_bytes, max_bytes));
  spec.min_bytes = *min;
  spec.max_bytes = *max;
  if (spec.gpus_per_node < 0 || spec.tasks_per_node < 1) return CouldNotRun("--gpus-per-node must be >= 0 and --tasks-per-node >= 1");
  spec.collbench = SelfDir() + "/srunway-collbench";
  if (job_dir.empty()) job_dir = std::filesystem::absolute("run-nccl-tests").string();
  spec.output = job_dir + "/" + spec.job_name + "-%j.out";
  const std::string script = nccltests::SbatchScript(spec);
  if (dry_run) {
    fmt::print("{}", script);
    return 0;
  }
  if (!spec.binary_dir.empty() && ::access((spec.binary_dir + "/" + std::string(spec.collective->binary)).c_str(), X_OK) != 0) {
    return CouldNotRun(fmt::format("--binary {}: no executable {} there", spec.binary_dir, spec.collective->binary));
  }
  if (auto nodes = PartitionNodes(spec.partition); nodes && spec.nodes > *nodes) {
    return CouldNotRun(fmt::format("--nodes {}: partition {} has {} nodes", spec.nodes,
                                   spec.partition.empty() ? "(default)" : spec.partition, *nodes));
  }
  std::error_code ec;
  std::filesystem::create_directories(job_dir, ec);
  if (ec) return CouldNotRun(fmt::format("create {}: {}", job_dir, ec.message()));
  const std::string script_path = job_dir + "/" + spec.job_name + ".sbatch";
  if (auto status = common::WriteFileAtomic(script_path, script); !status.ok()) return CouldNotRun(status.message());

  auto submitted = common::RunCommand({"sbatch", "--parsable", script_path}, true);
  if (!submitted.ok()) return CouldNotRun(submitted.status().message());
  if (submitted->exit_code != 0) {
    return CouldNotRun(fmt::format("sbatch {}: {}", script_path, common::Trim(submitted->output)));
  }
  std::string job(common::Trim(submitted->output));
  job = job.substr(0, job.find(';'));
  const std::string log = job_dir + "/" + spec.job_name + "-" + job + ".out";
  fmt::print("run-nccl-tests: submitted job {} ({} on {} nodes, {} to {}); log {}\n", job, spec.collective->name,
             spec.nodes, nccltests::FormatSize(spec.min_bytes), nccltests::FormatSize(spec.max_bytes), log);
  std::fflush(stdout);

  // Follow the job: its state changes and how many sizes are done.
  std::string last_state;
  size_t last_rows = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait_limit_s * 1000));
  std::string state;
  while (true) {
    state = JobState(job).value_or("");
    if (!state.empty() && state != last_state) {
      fmt::print("run-nccl-tests: job {} is {}\n", job, state);
      last_state = state;
    }
    if (auto text = common::ReadFile(log); text.ok()) {
      auto runs = nccltests::ParseLog(*text);
      const size_t rows = runs.empty() ? 0 : runs.back().rows.size();
      if (rows > last_rows) {
        const auto& row = runs.back().rows.back();
        fmt::print("run-nccl-tests: {} sizes done; {} busbw {:.2f} GB/s\n", rows, nccltests::FormatSize(row.size_bytes),
                   row.out_of_place.busbw_gbps.value_or(0));
        last_rows = rows;
      }
    }
    std::fflush(stdout);
    if (!state.empty() && state != "PENDING" && state != "CONFIGURING" && state != "RUNNING" && state != "COMPLETING") break;
    if (std::chrono::steady_clock::now() > deadline) {
      (void)common::RunCommand({"scancel", job});
      return CouldNotRun(fmt::format("job {} did not finish within {} s; cancelled it (log: {})", job, wait_limit_s, log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  auto text = common::ReadFile(log);
  if (!text.ok()) return CouldNotRun(fmt::format("job {} ended {} and left no log: {}", job, state, text.status().message()));
  const int code = Judge(*text, log, spec.collective, expect, spec.profile, json);
  if (state != "COMPLETED" && code == 0) {
    return CouldNotRun(fmt::format("job {} ended {} (log: {})", job, state, log));
  }
  return code;
}
