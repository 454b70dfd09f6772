// run-nccl-tests: validates nodes with one command. Writes the sbatch script for an nccl-tests-compatible run
// (srunway-collbench, or NVIDIA's binaries with --binary), submits it, follows it, parses the result and judges
// the bus bandwidth at the largest size against a threshold. --parse judges a saved log the same way. A failed run
// (low, wrong, hung, crashed, no communicator) with --isolate is followed by node pairs and re-tests that name
// the bad nodes; --drain drains them and --requeue-job puts a training job back in the queue without them.
// Exit codes: 0 pass; 1 below the threshold or wrong results, or bad nodes named; 2 could not run (bad flags, a
// failed, hung or cancelled job, output cut short), always with the job's log path when there is one.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string_view>
#include <utility>

#include "common/cli.h"
#include "common/env.h"
#include "common/fs.h"
#include "common/hostlist.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/signals.h"
#include "common/subprocess.h"
#include "nccl-tests-wrapper/campaign.h"
#include "nccl-tests-wrapper/job.h"
#include "topology/placement.h"
#include "topology/profiles.h"

namespace {

using namespace srunway;
using nccltests::Outcome;

constexpr int kExitCouldNotRun = 2;

int CouldNotRun(const std::string& message) {
  common::LogError("{}", message);
  return kExitCouldNotRun;
}

// A wait that ended early: stopped by `signal` (128 + it), or, with none, past --wait-limit (could not run).
int Ended(const common::Status& status, int signal) {
  if (signal == 0) return CouldNotRun(status.message());
  common::LogError("{}", status.message());
  return 128 + signal;
}

std::string SelfDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// Judges the runs of a log; prints the report (or JSON) and returns the exit code.
// --report DIR: the report files, and busbw.png when gnuplot is installed. A failure to write is one line; the
// verdict stands.
void WriteReport(const std::string& dir, const nccltests::Run& run, const nccltests::Verdict& verdict,
                 const nccltests::Threshold& threshold, const std::string& log) {
  if (auto written = common::WriteFilesAtomic(dir, nccltests::ReportFiles(run, verdict, threshold, log)); !written.ok()) {
    common::LogError("--report: {}", written.message());
    return;
  }
  auto plot = common::RunCommand({"sh", "-c", "cd \"$1\" && gnuplot busbw.gp", "plot", dir}, true);
  const bool drawn = plot.ok() && plot->exit_code == 0;
  fmt::print(stderr, "run-nccl-tests: report in {}: report.md, report.json{}\n", dir,
             drawn ? ", busbw.png" : " (no gnuplot: busbw.gp and busbw.dat draw busbw.png)");
}

int Judge(const std::string& text, const std::string& where, const nccltests::CollectiveInfo* wanted,
          std::optional<double> expect, const std::string& reference, bool json, const std::string& report_dir) {
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
  std::string unnamed = "correctness only (the log does not say which test it is)";
  if (!reference.empty()) {
    unnamed = fmt::format("correctness only (the log does not say which test it is: give --test to judge it by "
                          "--reference {})", reference);
  }
  nccltests::Threshold threshold{expect, expect ? "--expect-busbw" : unnamed};
  if (info != nullptr) {
    threshold = nccltests::ChooseThreshold(expect, reference, info->id, static_cast<int>(std::max<size_t>(hosts.size(), 1)));
  }
  threshold = nccltests::ForCommunicator(threshold, run->comm);
  const nccltests::Verdict verdict = nccltests::Judge(*run, threshold.gbps);
  if (json) {
    common::Json out = {{"log", where}, {"run", nccltests::ToJson(*run)}, {"verdict", nccltests::ToJson(verdict)},
                        {"threshold_source", threshold.source}};
    common::Print("{}\n", out.dump(2));
  } else {
    common::Print("{}", nccltests::FormatReport(*run, verdict, threshold));
  }
  if (!report_dir.empty()) {
    nccltests::Run named = *run;  // older logs do not name their test; the report does
    if (named.collective.empty() && info != nullptr) named.collective = std::string(info->name);
    WriteReport(report_dir, named, verdict, threshold, where);
  }
  if (verdict.outcome != Outcome::kPass) fmt::print(stderr, "run-nccl-tests: {} (log: {})\n", verdict.reason, where);
  return static_cast<int>(verdict.outcome);
}

// --list-references: every published figure, what it applies to and where it comes from.
void ListReferences() {
  for (const nccltests::PublishedFigure& f : nccltests::PublishedFigures()) {
    common::Print("{:<18} {:<15} {:>6.0f} GB/s  {}\n", f.reference, nccltests::Info(f.collective).name, f.busbw_gbps,
                  f.max_nodes == f.min_nodes ? fmt::format("{} node{}", f.min_nodes, f.min_nodes == 1 ? "" : "s")
                  : f.max_nodes >= (1 << 20) ? fmt::format("{} or more nodes", f.min_nodes)
                                             : fmt::format("{} to {} nodes", f.min_nodes, f.max_nodes));
    common::Print("{:<18} machine: {}\n", "", f.machine);
    if (!f.alone.empty()) common::Print("{:<18} one node alone is judged by: {}\n", "", f.alone);
    common::Print("{:<18} source: {}\n", "", f.source);
  }
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


// --compare-order: the bus bandwidth at the largest size of each run in the log, by the order it ran in.
void PrintOrderComparison(const std::string& log) {
  std::vector<std::string> orders;
  for (std::string_view line : common::Split(log, '\n')) {
    if (line.starts_with(nccltests::kRunOrderMarker)) {
      orders.emplace_back(line.substr(nccltests::kRunOrderMarker.size()));
    }
  }
  const std::vector<nccltests::Run> runs = nccltests::ParseLog(log);
  for (size_t i = 0; i < runs.size(); ++i) {
    const nccltests::Verdict v = nccltests::Judge(runs[i], std::nullopt);
    common::Print("run-nccl-tests: {}: {}\n", i < orders.size() ? orders[i] : fmt::format("run {}", i + 1),
                  nccltests::Figure(v));
  }
}

// --order-hosts: the job's nodes (SLURM_JOB_NODELIST) in placement order, as SLURM_HOSTFILE lines.
int OrderHosts(const std::string& file, const std::string& source, int tasks_per_node) {
  auto text = common::ReadFile(file);
  if (!text.ok()) return CouldNotRun(text.status().message());
  auto placement = source == "slurm" ? topology::ParseSlurmTopology(*text) : topology::ParsePhysicalHosts(*text, file);
  if (!placement.ok()) return CouldNotRun(placement.status().message());
  auto nodelist = common::GetEnv("SLURM_JOB_NODELIST");
  if (!nodelist) return CouldNotRun("--order-hosts runs inside the job: SLURM_JOB_NODELIST is not set");
  auto nodes = common::ExpandHostlist(*nodelist);
  if (!nodes.ok()) return CouldNotRun(nodes.status().message());
  const std::vector<std::string> order = topology::OrderByPlacement(*nodes, *placement);
  std::string names;
  for (const std::string& node : order) {
    names += " " + node;
    if (!placement->contains(node)) names += "(unplaced)";
  }
  fmt::print(stderr, "run-nccl-tests: topology order ({}):{}\n", source, names);
  common::Print("{}", topology::HostfileFor(order, tasks_per_node));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("run-nccl-tests");
  common::ExitIfStdoutLost(2);  // its report did not arrive: as output cut short
  nccltests::JobSpec spec;
  std::string test = "all_gather", min_bytes = "8M", max_bytes = "8G", parse_log, job_dir;
  std::optional<double> expect;
  bool dry_run = false, json = false, isolate = false, drain = false;
  double wait_limit_s = 3600;
  CLI::App app{"Validate nodes: run an nccl-tests-compatible benchmark through sbatch and judge its bus bandwidth."};
  common::SetUpProgram(app, "run-nccl-tests");
  app.add_option("--nodes", spec.nodes, "nodes to test")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_option("--nodelist", spec.nodelist, "these nodes (Slurm hostlist; --nodes defaults to their count)");
  app.add_option("--partition", spec.partition, "partition (default: Slurm's default)");
  // Bounded: the counts go into the job script and into each node's hostfile (--order-hosts writes a line per task).
  app.add_option("--gpus-per-node", spec.gpus_per_node, "one task per GPU; 0 for CPU ranks")
      ->capture_default_str()->check(CLI::Range(0, 1024));
  app.add_option("--tasks-per-node", spec.tasks_per_node, "tasks per node with --gpus-per-node 0")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--test", test, "all_gather, all_reduce, reduce_scatter, broadcast, reduce, alltoall, sendrecv")->capture_default_str();
  app.add_option("--min-bytes", min_bytes, "smallest size (K, M, G)")->capture_default_str();
  app.add_option("--max-bytes", max_bytes, "largest size: the verdict uses its bus bandwidth")->capture_default_str();
  // nccl-tests reads a factor of 1 as "add 1 MiB" (-i): 8M to 8G would be 8185 sizes, so a factor is at least 2.
  app.add_option("--step-factor", spec.step_factor, "size multiplier")->capture_default_str()->check(CLI::Range(2, 1024));
  app.add_option("--iters", spec.iters, "timed iterations per size")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  app.add_option("--warmup", spec.warmup, "warmup iterations per size")->capture_default_str()->check(CLI::Range(0, 1 << 24));
  std::string reference, old_profile, requeue_job;
  bool list_references = false;
  app.add_option("--network-profile", spec.network_profile, "the SPANK plugin's --network-profile for srun");
  app.add_option("--reference", reference, "the published figure to judge by (see --list-references): a3mega, ...");
  app.add_flag("--list-references", list_references, "print every published figure, what it applies to and its source");
  app.add_option("--profile", old_profile, "(replaced by --network-profile and --reference)")->group("");
  app.add_option("--expect-busbw", expect,
                 "pass mark in GB/s at the largest size (default: 90% of the published figure)")
      ->check(common::Positive());
  app.add_option("--run-timeout", spec.run_timeout_s,
                 "seconds a run may take after it started before it counts as hung (default: from the sizes and "
                 "iterations)")->check(common::Positive());
  app.add_option("--requeue-job", requeue_job,
                 "with --isolate: requeue this job with the bad nodes excluded (it resumes from its checkpoint)");
  app.add_option("--binary", spec.binary_dir, "directory of NVIDIA's nccl-tests binaries (default: srunway-collbench)");
  app.add_option("--time", spec.time_limit_min, "job time limit, minutes")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--job-dir", job_dir, "where the script and the log go (default: ./run-nccl-tests)");
  app.add_option("--wait-limit", wait_limit_s, "seconds to wait for the job before cancelling it")
      ->capture_default_str()->check(common::Positive());
  app.add_flag("--dry-run", dry_run, "print the sbatch script and exit");
  app.add_option("--parse", parse_log, "judge a saved nccl-tests log (text or JSON) instead of running");
  app.add_flag("--json", json, "print the result as JSON");
  std::string order_hosts, order_source = "metadata", report_dir;
  app.add_option("--report", report_dir, "also write report.md, report.json and busbw.png (gnuplot) to this directory");
  app.add_option("--topology-order", spec.topology_order,
                 "order the nodes by physical placement first: auto, metadata (Google Cloud's physical_host), slurm "
                 "(scontrol show topology) or none")->capture_default_str();
  app.add_flag("--compare-order", spec.compare_order,
               "with --topology-order: also run in Slurm's own order first and report both bandwidths");
  CLI::Option* order_hosts_option =
      app.add_option("--order-hosts", order_hosts,
                     "(inside the job) print a SLURM_HOSTFILE for the job's nodes from this placement file, and the "
                     "order on stderr");
  app.add_option("--order-source", order_source, "what --order-hosts reads: metadata or slurm")
      ->capture_default_str()->needs(order_hosts_option);
  app.add_option("--dcgm-level", spec.dcgm_level, "first run dcgmi diag -r N (1-4) on every node; a failure names a bad node")
      ->check(CLI::Range(1, 4));
  app.add_flag("--isolate", isolate, "when the run fails, test node pairs and name the nodes that fail consistently");
  app.add_flag("--drain", drain, "with --isolate: drain the bad nodes (scontrol update ... state=drain)");
  common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitCouldNotRun;
  }
  if (list_references) {
    ListReferences();
    return 0;
  }
  if (!old_profile.empty()) {
    return CouldNotRun(fmt::format("--profile {0}: the option is now two: --network-profile {0} (what srun gets) and "
                                   "--reference NAME (the published figure; --list-references)", old_profile));
  }
  if (!reference.empty() && !nccltests::IsReference(reference)) {
    return CouldNotRun(fmt::format("--reference {}: no such published figure (see --list-references)", reference));
  }
  // Options that mean something only beside another are refused alone rather than ignored (--dry-run included).
  if (app.count("--tasks-per-node") > 0 && spec.gpus_per_node > 0) {
    return CouldNotRun(fmt::format("--tasks-per-node {} goes with --gpus-per-node 0 (with GPUs, one task per GPU)",
                                   spec.tasks_per_node));
  }
  if (drain && !isolate && spec.dcgm_level == 0) {
    return CouldNotRun("--drain needs --isolate or --dcgm-level (it drains the nodes they name)");
  }
  if (!order_hosts.empty()) return OrderHosts(order_hosts, order_source, spec.gpus_per_node > 0 ? spec.gpus_per_node : spec.tasks_per_node);
  if (auto order = topology::ParseOrderSource(spec.topology_order); !order.ok()) return CouldNotRun(order.status().message());
  if (spec.compare_order && spec.topology_order == "none") {
    return CouldNotRun("--compare-order needs --topology-order auto, metadata or slurm");
  }
  auto collective = nccltests::FindCollective(test);
  if (!collective.ok()) return CouldNotRun(collective.status().message());
  spec.collective = *collective;

  if (!parse_log.empty()) {
    auto text = common::ReadFile(parse_log);
    if (!text.ok()) return CouldNotRun(text.status().message());
    const bool explicit_test = app.count("--test") > 0;
    return Judge(*text, parse_log, explicit_test ? spec.collective : nullptr, expect, reference, json, report_dir);
  }

  auto min = nccltests::ParseSize(min_bytes, "--min-bytes");
  auto max = nccltests::ParseSize(max_bytes, "--max-bytes");
  if (!min.ok()) return CouldNotRun(min.status().message());
  if (!max.ok()) return CouldNotRun(max.status().message());
  if (*min > *max) return CouldNotRun(fmt::format("--min-bytes {} is larger than --max-bytes {}", min_bytes, max_bytes));
  // nccl-tests multiplies its way up from -b: from 0 it would stay at 0 for ever.
  if (*min == 0) return CouldNotRun("--min-bytes 0: the sizes grow from it by --step-factor, so it is at least 1");
  spec.min_bytes = *min;
  spec.max_bytes = *max;
  if (auto listed = nccltests::ApplyNodelist(spec, app.count("--nodes") > 0); !listed.ok()) {
    return CouldNotRun(listed.message());
  }
  if (spec.gpus_per_node == 0 && !reference.empty()) {
    return CouldNotRun(fmt::format("--reference {} is a GPU figure; with --gpus-per-node 0 the ranks run on host "
                                   "memory: judge them with --expect-busbw",
                                   reference));
  }
  // GPUs always run on NCCL: a rank that cannot load it fails and is named, never falls back to host memory.
  if (spec.binary_dir.empty()) spec.comm = spec.gpus_per_node > 0 ? "nccl" : "mpi";
  if (!spec.network_profile.empty()) {
    if (auto profile = topology::ParseProfile(spec.network_profile); !profile.ok()) {
      return CouldNotRun(fmt::format("--network-profile: {}", profile.status().message()));
    }
  }
  if (!requeue_job.empty() && !isolate) return CouldNotRun("--requeue-job needs --isolate (it excludes the nodes it names)");
  spec.collbench = SelfDir() + "/srunway-collbench";
  spec.self = SelfDir() + "/run-nccl-tests";
  if (job_dir.empty()) {
    std::error_code ec;  // the working directory gone (removed under a shell still in it)
    job_dir = std::filesystem::absolute("run-nccl-tests", ec).string();
    if (ec) return CouldNotRun(fmt::format("the working directory, for --job-dir's default: {}", ec.message()));
  }
  // What goes into the job script: quoted there, but a line break cannot be, and Slurm reads --output's '%'.
  for (const auto& [value, option] : {std::pair<std::string_view, std::string_view>{spec.partition, "--partition"},
                                      {spec.nodelist, "--nodelist"}, {spec.binary_dir, "--binary"},
                                      {job_dir, "--job-dir"}, {spec.self, "run-nccl-tests' own path"}}) {
    if (auto checked = nccltests::CheckScriptText(value, option); !checked.ok()) return CouldNotRun(checked.message());
  }
  if (job_dir.find('%') != std::string::npos) {
    return CouldNotRun(fmt::format("--job-dir {}: Slurm would read its '%' as a pattern in the job's log name",
                                   job_dir));
  }
  spec.output = job_dir + "/" + spec.job_name + "-%j.out";
  const std::string script = nccltests::SbatchScript(spec);
  if (dry_run) {
    common::Print("{}", script);
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
  // The report is written once the job has ended: a directory that cannot take it is refused before submitting.
  if (!report_dir.empty()) {
    if (auto made = common::PrepareWritableDir(report_dir, "--report"); !made.ok()) return CouldNotRun(made.message());
  }
  auto scheduler = nccltests::MakeSlurmScheduler();
  nccltests::Campaign campaign(*scheduler, job_dir, [](const std::string& line) {
    common::Print("run-nccl-tests: {}\n", line);
    std::fflush(stdout);
  });
  // Ctrl-C, a closed terminal or a kill while the jobs run: they are cancelled (exclusive nodes stay held
  // otherwise) and the exit code is 128 + the signal, as a shell's.
  const volatile std::sig_atomic_t* stop = common::StopOnSignals();
  campaign.StopOn(stop);
  auto submitted = campaign.Submit(spec, "", "the whole run");
  if (!submitted.ok()) return CouldNotRun(submitted.status().message());
  common::Print("run-nccl-tests: submitted job {} ({} on {} node{}, {} to {}); log {}\n", submitted->job,
                spec.collective->name, spec.nodes, spec.nodes == 1 ? "" : "s", nccltests::FormatSize(spec.min_bytes),
                nccltests::FormatSize(spec.max_bytes), submitted->log);
  std::vector<nccltests::Submitted> whole = {*submitted};
  const auto deadline =
      std::chrono::steady_clock::now() + common::TimeoutMillis(wait_limit_s);
  if (auto status = campaign.WaitAll(whole, deadline); !status.ok()) return Ended(status, *stop);
  const nccltests::Submitted& run = whole[0];
  auto text = common::ReadFile(run.log);
  if (!text.ok()) {
    return CouldNotRun(fmt::format("job {} ended {} and left no log: {}", run.job, run.state, text.status().message()));
  }
  // The report when the log holds one (a run whose ranks never started has none), then what went wrong.
  auto parsed = nccltests::ParseAny(*text, run.log);
  int code = parsed.ok() && !parsed->back().devices.empty()
                 ? Judge(*text, run.log, spec.collective, expect, reference, json, report_dir)
                 : kExitCouldNotRun;
  if (spec.compare_order) PrintOrderComparison(*text);
  const auto threshold = nccltests::ChooseThreshold(expect, reference, spec.collective->id, spec.nodes);
  const nccltests::Finding finding = nccltests::Examine(run, threshold);
  if (!finding.ok()) {
    common::Print("run-nccl-tests: the run: {}: {} (log: {})\n", nccltests::KindName(finding.kind), finding.evidence,
                  run.log);
    if (finding.kind != nccltests::Finding::Kind::kSlow && finding.kind != nccltests::Finding::Kind::kWrong) {
      code = kExitCouldNotRun;
    }
  }
  if (run.state != "COMPLETED" && code == 0) {
    return CouldNotRun(fmt::format("job {} ended {} (log: {})", run.job, run.state, run.log));
  }
  // DCGM first: a node whose diagnostic failed is bad whatever the bandwidth says.
  std::vector<nccltests::BadNode> bad;
  for (const nccltests::DcgmResult& d : nccltests::ParseDcgmLines(*text)) {
    if (d.outcome == nccltests::DcgmResult::Outcome::kSkipped) {
      common::Print("run-nccl-tests: dcgm on {}: skipped ({})\n", d.node, d.detail);
    } else if (d.outcome == nccltests::DcgmResult::Outcome::kFail) {
      bad.push_back({d.node, fmt::format("dcgmi diag -r {} failed: {}", spec.dcgm_level, d.detail)});
    }
  }
  if (!finding.ok() && isolate) {
    const auto pair = nccltests::ChooseThreshold(expect, reference, spec.collective->id, 2);
    const auto alone = nccltests::AloneThreshold(reference, spec.collective->id);
    auto isolated = campaign.Isolate(spec, nccltests::NodesOfLog(run.log), finding, pair, alone, deadline);
    if (!isolated.ok()) return Ended(isolated.status(), *stop);
    if (isolated->empty() && bad.empty()) {
      common::Print("run-nccl-tests: no node failed consistently: nobody is named\n");
    }
    bad.insert(bad.end(), isolated->begin(), isolated->end());
  }
  if (!bad.empty()) code = 1;
  std::vector<std::string> bad_nodes;
  for (const auto& [node, evidence] : bad) {
    bad_nodes.push_back(node);
    const std::string reason = fmt::format("run-nccl-tests {} job {}: {}", spec.collective->name, run.job, evidence);
    common::Print("run-nccl-tests: bad node {}: {}\n", node, evidence);
    std::vector<std::string> command = {"scontrol", "update", "nodename=" + node, "state=drain", "reason=" + reason};
    if (!drain) {
      common::Print("  to drain it: {}\n", common::ShellCommand(command));
      continue;
    }
    auto result = common::RunCommand(command, true);
    if (!result.ok() || result->exit_code != 0) {
      common::LogError("drain {}: {}", node, result.ok() ? std::string(common::Trim(result->output)) : result.status().message());
      return kExitCouldNotRun;
    }
    common::Print("run-nccl-tests: drained {}; after repair: scontrol update nodename={} state=resume\n", node, node);
  }
  if (!requeue_job.empty()) {
    if (bad_nodes.empty()) {
      common::Print("run-nccl-tests: no bad node named: job {} is left as it is\n", requeue_job);
    } else if (auto requeued = scheduler->RequeueExcluding(requeue_job, bad_nodes); !requeued.ok()) {
      return CouldNotRun(fmt::format("--requeue-job {}: {}", requeue_job, requeued.message()));
    } else {
      common::Print("run-nccl-tests: requeued job {} without {}\n", requeue_job, fmt::join(bad_nodes, ","));
    }
  }
  return code;
}
