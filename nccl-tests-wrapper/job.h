// run-nccl-tests' batch job: the sbatch script for a benchmark over some nodes, and reading its result.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "nccl-tests-wrapper/collectives.h"
#include "nccl-tests-wrapper/verdict.h"

namespace srunway::nccltests {

struct JobSpec {
  const CollectiveInfo* collective = nullptr;
  int nodes = 2;
  std::string nodelist;   // --nodelist (Slurm hostlist), empty: any
  std::string partition;  // empty: the default partition
  int gpus_per_node = 8;  // one task per GPU; 0: CPU ranks (--tasks-per-node)
  int tasks_per_node = 8;
  int64_t min_bytes = 8 << 20;
  int64_t max_bytes = int64_t{8} << 30;
  int64_t step_factor = 2;
  int iters = 20;
  int warmup = 5;
  std::string network_profile;  // SPANK --network-profile; empty: leave it to the plugin's default
  std::string comm;             // srunway-collbench's --comm: nccl (GPUs: never a silent fallback) or mpi
  double run_timeout_s = 0;     // a run that has not ended this long after it started hangs; 0: RunTimeout()
  std::string binary_dir;   // NVIDIA's nccl-tests binaries; empty: srunway-collbench
  std::string collbench;    // path of srunway-collbench
  std::string output;       // the job's log (%j allowed)
  int time_limit_min = 30;
  std::string job_name = "run-nccl-tests";
  std::string topology_order = "none";  // auto, metadata, slurm or none (see topology/placement.h)
  bool compare_order = false;           // with a topology order: first a run in Slurm's own order, for comparison
  std::string self;                     // path of run-nccl-tests, which orders the hosts inside the job
  int dcgm_level = 0;                   // 1-4: dcgmi diag -r N on every node before the benchmark; 0: none
};

// One node's `dcgmi diag` outcome, from the "dcgm: NODE pass|FAIL: ...|skipped: ..." lines the job prints.
struct DcgmResult {
  std::string node;
  enum class Outcome { kPass, kFail, kSkipped } outcome = Outcome::kPass;
  std::string detail;
};
std::vector<DcgmResult> ParseDcgmLines(std::string_view log);

// Checks --nodelist against --nodes as sbatch would take them: a malformed hostlist, or fewer --nodes than it
// names (sbatch: "invalid number of nodes"), is an InvalidArgument naming both; more is Slurm's "these and others".
// Without --nodes (`nodes_given` false) the count is the list's, so `--nodelist a3m-[001-016]` tests 16 nodes.
common::Status ApplyNodelist(JobSpec& spec, bool nodes_given);

// Whether `value` of `option` can go into the job script: any text but a line break (which would end an #SBATCH
// line, or a command, there).
common::Status CheckScriptText(std::string_view value, std::string_view option);

// The script `sbatch` gets: #SBATCH lines, with a topology order the placement of every node and a SLURM_HOSTFILE
// in that order, then one srun --mpi=pmix of the benchmark (--distribution=arbitrary when ordered).
std::string SbatchScript(const JobSpec& spec);
// With --compare-order the script names each run before it starts: this, then "slurm order" or "<source> order".
inline constexpr std::string_view kRunOrderMarker = "run-nccl-tests: this run: ";

// How long a run of `spec` may take once it started before it counts as hung: --run-timeout, else two minutes
// for the start (srun, bootstrap, communicators) and every timed and warmup operation of both halves at a floor
// far below any healthy node (5 GB/s bus bandwidth on GPUs, 0.5 on CPU ranks), never past the job's --time.
std::chrono::milliseconds RunTimeout(const JobSpec& spec);

// The threshold for a verdict: the explicit one, else 90% of the published figure for the reference, collective
// and node count; `source` says which. `published` marks a GPU reference figure, which a host-memory run is never
// judged by.
struct Threshold {
  std::optional<double> gbps;
  std::string source;
  bool published = false;
};
Threshold ChooseThreshold(std::optional<double> expected, const std::string& reference, Collective collective,
                          int nodes);
// The threshold for a node re-tested alone: 90% of the reference machine's single-node figure; none when there
// is no such figure (the node is then compared with nodes measured alone in the same way).
Threshold AloneThreshold(const std::string& reference, Collective collective);
// `threshold` for a run on communicator `comm` ("nccl", "mpi", ...; empty: unknown): a published GPU figure does
// not judge a host-memory run, which is then judged on correctness and completeness alone.
Threshold ForCommunicator(const Threshold& threshold, const std::string& comm);

// The report printed after a run: the busbw per size (out-of-place and in-place), both averages, the verdict.
// The files of `run-nccl-tests --report DIR`: report.json (run, verdict, threshold and its source, log),
// report.md (the same for people: a table per size and the verdict), busbw.dat and busbw.gp (gnuplot's data and
// script for busbw.png: bus bandwidth per size, both halves, the threshold as a line).
std::map<std::string, std::string> ReportFiles(const Run& run, const Verdict& verdict, const Threshold& threshold,
                                               const std::string& log);

std::string FormatReport(const Run& run, const Verdict& verdict, const Threshold& threshold);

}  // namespace srunway::nccltests
