// Batch script, thresholds and the report.
#include "nccl-tests-wrapper/job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "common/hostlist.h"
#include "common/json.h"
#include "common/parse.h"
#include "common/subprocess.h"

namespace srunway::nccltests {

common::Status ApplyNodelist(JobSpec& spec, bool nodes_given) {
  if (spec.nodelist.empty()) return common::Status::Ok();
  auto hosts = common::ExpandHostlist(spec.nodelist);
  if (!hosts.ok()) return common::InvalidArgument("--nodelist {}: {}", spec.nodelist, hosts.status().message());
  const std::set<std::string> distinct(hosts->begin(), hosts->end());
  const int named = static_cast<int>(distinct.size());
  if (!nodes_given) {
    spec.nodes = named;
  } else if (spec.nodes < named) {
    return common::InvalidArgument("--nodes {} is fewer than the {} nodes --nodelist {} names (Slurm would refuse "
                                   "the job): drop --nodes, or name {} of them",
                                   spec.nodes, named, spec.nodelist, spec.nodes);
  }
  return common::Status::Ok();
}

namespace {

// A value on an #SBATCH line: sbatch splits those lines at whitespace, groups quoted text and drops a backslash
// before any character. (A newline cannot be said at all: CheckScriptText refuses it first.)
std::string DirectiveValue(std::string_view value) {
  if (value.find_first_of(" \t\"'\\") == std::string_view::npos) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

common::Status CheckScriptText(std::string_view value, std::string_view option) {
  if (value.find_first_of("\n\r") == std::string_view::npos) return common::Status::Ok();
  return common::InvalidArgument("{}: a line break cannot go into the job script", option);
}

std::string SbatchScript(const JobSpec& s) {
  std::string out = "#!/bin/bash\n";
  out += fmt::format("# Written by run-nccl-tests: {} over {} nodes.\n", s.collective->name, s.nodes);
  out += fmt::format("#SBATCH --job-name={}\n", s.job_name);
  out += fmt::format("#SBATCH --nodes={}\n", s.nodes);
  const int tasks = s.gpus_per_node > 0 ? s.gpus_per_node : s.tasks_per_node;
  out += fmt::format("#SBATCH --ntasks-per-node={}\n", tasks);
  if (s.gpus_per_node > 0) out += fmt::format("#SBATCH --gpus-per-node={}\n", s.gpus_per_node);
  if (!s.partition.empty()) out += fmt::format("#SBATCH --partition={}\n", DirectiveValue(s.partition));
  if (!s.nodelist.empty()) out += fmt::format("#SBATCH --nodelist={}\n", DirectiveValue(s.nodelist));
  out += fmt::format("#SBATCH --time={}\n", s.time_limit_min);
  out += "#SBATCH --exclusive\n";
  if (!s.output.empty()) out += fmt::format("#SBATCH --output={}\n", DirectiveValue(s.output));
  out += "set -uo pipefail\n";
  out += "echo \"run-nccl-tests: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST\"\n";
  const std::string sizes = fmt::format("-b {} -e {} -f {} -n {} -w {} -c 1", s.min_bytes, s.max_bytes, s.step_factor,
                                        s.iters, s.warmup);
  const std::string comm = s.comm.empty() ? "" : " --comm " + s.comm;
  const std::string program =
      s.binary_dir.empty()
          ? fmt::format("{} {}{} -g 1", common::ShellQuote(s.collbench), s.collective->name, comm)
          : fmt::format("{} -g 1", common::ShellQuote(fmt::format("{}/{}", s.binary_dir, s.collective->binary)));
  // A rank that dies ends the step at once (its peers would otherwise wait in the collective for it).
  const std::string profile = " --kill-on-bad-exit=1" +
                              (s.network_profile.empty() ? ""
                                                          : " --network-profile=" + common::ShellQuote(s.network_profile));
  if (s.dcgm_level > 0) {
    // NVIDIA DCGM's diagnostic on every node first, one line per node; run-nccl-tests reads the lines.
    out += fmt::format(
        "srun --mpi=none --ntasks-per-node=1 bash -c 'if ! command -v dcgmi >/dev/null; then "
        "echo \"dcgm: $SLURMD_NODENAME skipped: no dcgmi on this node\"; elif diag=$(dcgmi diag -r {} 2>&1); then "
        "echo \"dcgm: $SLURMD_NODENAME pass\"; else echo \"dcgm: $SLURMD_NODENAME FAIL: $(printf \"%s\" \"$diag\" | "
        "grep -m1 -i fail | tr -s \" \")\"; fi'\n",
        s.dcgm_level);
  }
  std::string distribution;
  if (s.topology_order != "none") {
    // Each node's physical_host from its own metadata server (SRUNWAY_METADATA_ANSWERS stands in for it in tests),
    // or Slurm's switch tree; then the hosts in that order, one line per task, for --distribution=arbitrary.
    out += fmt::format("order={}\n", s.topology_order);
    out += "placement=$(mktemp); hostfile=$(mktemp)\n";
    out += "metadata() {\n"
           "  if [ -n \"${SRUNWAY_METADATA_ANSWERS:-}\" ]; then cat \"$SRUNWAY_METADATA_ANSWERS\"; return; fi\n"
           "  srun --mpi=none --ntasks-per-node=1 bash -c 'echo \"$SLURMD_NODENAME $(curl -sf -m 5 -H Metadata-Flavor:Google "
           "http://metadata.google.internal/computeMetadata/v1/instance/attributes/physical_host)\"'\n"
           "}\n";
    out += "if [ $order = auto ]; then\n"
           "  if [ -n \"${SRUNWAY_METADATA_ANSWERS:-}\" ] || curl -sf -m 2 -o /dev/null -H Metadata-Flavor:Google "
           "http://metadata.google.internal/computeMetadata/v1/; then order=metadata\n"
           "  elif [ -n \"$(scontrol show topology 2>/dev/null)\" ]; then order=slurm; else order=none; fi\n"
           "fi\n";
    out += "case $order in\n"
           "  metadata) metadata >\"$placement\" ;;\n"
           "  slurm) scontrol show topology >\"$placement\" ;;\n"
           "esac\n";
    out += fmt::format("if [ $order != none ]; then\n"
                       "  {} --order-hosts \"$placement\" --order-source $order --gpus-per-node 0 --tasks-per-node {} >\"$hostfile\" || exit 2\n"
                       "  export SLURM_HOSTFILE=$hostfile\n"
                       "  distribution=--distribution=arbitrary\n"
                       "fi\n",
                       common::ShellQuote(s.self), tasks);
    distribution = " ${distribution:-}";
    if (s.compare_order) {
      // The same benchmark in Slurm's own order first; run-nccl-tests reports both and judges the ordered run.
      out += fmt::format("echo \"{}slurm order\"\n", kRunOrderMarker);
      out += fmt::format("env -u SLURM_HOSTFILE srun --mpi=pmix{} {} {}\n", profile, program, sizes);
      out += fmt::format("echo \"{}${{order}} order\"\n", kRunOrderMarker);
    }
  }
  out += fmt::format("srun --mpi=pmix{}{} {} {}\n", profile, distribution, program, sizes);
  return out;
}

std::vector<DcgmResult> ParseDcgmLines(std::string_view log) {
  std::vector<DcgmResult> results;
  for (std::string_view line : common::Split(log, '\n')) {
    if (!line.starts_with("dcgm: ")) continue;
    line.remove_prefix(6);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    DcgmResult r;
    r.node = std::string(line.substr(0, space));
    std::string_view rest = line.substr(space + 1);
    if (rest.starts_with("pass")) {
      r.outcome = DcgmResult::Outcome::kPass;
    } else if (rest.starts_with("FAIL")) {
      r.outcome = DcgmResult::Outcome::kFail;
      r.detail = std::string(rest.size() > 6 ? rest.substr(6) : "");
    } else if (rest.starts_with("skipped")) {
      r.outcome = DcgmResult::Outcome::kSkipped;
      r.detail = std::string(rest.size() > 9 ? rest.substr(9) : "");
    } else {
      continue;
    }
    results.push_back(std::move(r));
  }
  return results;
}

std::chrono::milliseconds RunTimeout(const JobSpec& s) {
  const std::chrono::milliseconds limit(int64_t{s.time_limit_min} * 60'000);
  if (s.run_timeout_s > 0) return std::min(limit, common::TimeoutMillis(s.run_timeout_s));
  constexpr double kStartSeconds = 120;
  const double floor_bytes_per_s = s.gpus_per_node > 0 ? 5e9 : 0.5e9;
  double seconds = kStartSeconds;
  for (int64_t size = s.min_bytes; size <= s.max_bytes;) {
    // Two halves of warmup and timed operations, each moving at most twice the size per rank (all_reduce).
    seconds += 2.0 * (s.warmup + s.iters) * (2.0 * static_cast<double>(size) / floor_bytes_per_s + 1e-3);
    const std::optional<int64_t> next = NextSize(size, s.step_factor > 1 ? s.step_factor : 2, 0);
    if (!next.has_value()) break;
    size = *next;
  }
  return std::min(limit, common::TimeoutMillis(seconds));
}

Threshold ChooseThreshold(std::optional<double> expected, const std::string& reference, Collective collective,
                          int nodes) {
  if (expected) return {expected, "--expect-busbw"};
  if (auto figure = FindFigure(reference, collective, nodes)) {
    return {figure->busbw_gbps * kDefaultPassFraction,
            fmt::format("{:.0f}% of {:.0f} GB/s, {}", 100 * kDefaultPassFraction, figure->busbw_gbps, figure->source),
            true};
  }
  return {std::nullopt, reference.empty() ? "no --reference or --expect-busbw: correctness only"
                                          : fmt::format("no published figure for {} {} on {} nodes: correctness only",
                                                        reference, Info(collective).name, nodes)};
}

Threshold AloneThreshold(const std::string& reference, Collective collective) {
  if (auto figure = FindAloneFigure(reference, collective)) {
    return {figure->busbw_gbps * kDefaultPassFraction,
            fmt::format("{:.0f}% of {:.0f} GB/s for one node alone ({}), {}", 100 * kDefaultPassFraction,
                        figure->busbw_gbps, figure->reference, figure->source),
            true};
  }
  return {std::nullopt, fmt::format("no single-node figure for {}", reference.empty() ? "this run" : reference)};
}

Threshold ForCommunicator(const Threshold& threshold, const std::string& comm) {
  if (!threshold.published || comm.empty() || comm == "nccl") return threshold;
  return {std::nullopt,
          fmt::format("a host-memory run ({} communicator) is not judged against a GPU figure ({}): correctness "
                      "only",
                      comm, threshold.source)};
}

std::map<std::string, std::string> ReportFiles(const Run& run, const Verdict& v, const Threshold& threshold,
                                               const std::string& log) {
  static constexpr const char* kWords[] = {"PASS", "FAIL", "COULD NOT RUN"};
  const std::string word = kWords[static_cast<int>(v.outcome)];
  std::map<std::string, std::string> files;
  common::Json json = {{"log", log}, {"run", ToJson(run)}, {"verdict", ToJson(v)}, {"threshold_source", threshold.source}};
  if (threshold.gbps) json["threshold_gbps"] = *threshold.gbps;
  files["report.json"] = json.dump(2) + "\n";

  auto cell = [](const std::optional<double>& value) { return value ? fmt::format("{:.2f}", *value) : "N/A"; };
  std::set<std::string> hosts;
  for (const Device& d : run.devices) hosts.insert(d.host);
  std::string md = fmt::format("# run-nccl-tests: {} on {} nodes ({} ranks)\n\n**Verdict: {}** ({})\n\n",
                               run.collective, hosts.size(), run.devices.size(), word, v.reason);
  md += fmt::format("- threshold: {}\n", threshold.gbps ? fmt::format("{:.2f} GB/s ({})", *threshold.gbps, threshold.source)
                                                        : threshold.source);
  md += fmt::format("- bus bandwidth at the largest size: {} GB/s; nccl-tests' average over every size: {:.2f} GB/s\n",
                    cell(v.busbw_largest_gbps), v.mean_busbw_gbps);
  md += fmt::format("- nodes: {}\n- log: `{}`\n\n", fmt::join(hosts, ", "), log);
  md += "| size | time out (us) | busbw out (GB/s) | #wrong out | time in (us) | busbw in (GB/s) | #wrong in |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  std::string data = "# size_bytes busbw_out_gbps busbw_in_gbps (nan: not measured)\n";
  for (const Row& row : run.rows) {
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", FormatSize(row.size_bytes), cell(row.out_of_place.time_us),
                      cell(row.out_of_place.busbw_gbps), row.out_of_place.wrong ? fmt::format("{:g}", *row.out_of_place.wrong) : "N/A",
                      cell(row.in_place.time_us), cell(row.in_place.busbw_gbps),
                      row.in_place.wrong ? fmt::format("{:g}", *row.in_place.wrong) : "N/A");
    data += fmt::format("{} {} {}\n", row.size_bytes, row.out_of_place.busbw_gbps ? fmt::format("{:g}", *row.out_of_place.busbw_gbps) : "nan",
                        row.in_place.busbw_gbps ? fmt::format("{:g}", *row.in_place.busbw_gbps) : "nan");
  }
  md += "\n![bus bandwidth per size](busbw.png)\n";
  files["report.md"] = md;
  files["busbw.dat"] = data;
  std::string plot = fmt::format(
      "# gnuplot busbw.gp: writes busbw.png\nset terminal pngcairo size 900,500 noenhanced\nset output 'busbw.png'\n"
      "set title '{} on {} nodes: {}'\nset logscale x 2\nset format x '%.0b%BB'\nset xlabel 'size'\nset ylabel 'bus bandwidth (GB/s)'\n"
      "set key top left\nset grid\n",
      run.collective, hosts.size(), word);
  plot += "plot 'busbw.dat' using 1:2 with linespoints title 'out of place', '' using 1:3 with linespoints title 'in place'";
  if (threshold.gbps) plot += fmt::format(", {:g} with lines dashtype 2 title 'threshold {:.1f} GB/s'", *threshold.gbps, *threshold.gbps);
  files["busbw.gp"] = plot + "\n";
  return files;
}

std::string FormatReport(const Run& run, const Verdict& v, const Threshold& threshold) {
  std::string out = fmt::format("{:>10}  {:>14}  {:>14}\n", "size", "busbw out (GB/s)", "busbw in (GB/s)");
  auto cell = [](const std::optional<double>& value) { return value ? fmt::format("{:.2f}", *value) : "N/A"; };
  for (const Row& row : run.rows) {
    out += fmt::format("{:>10}  {:>16}  {:>15}\n", FormatSize(row.size_bytes), cell(row.out_of_place.busbw_gbps),
                       cell(row.in_place.busbw_gbps));
  }
  std::set<std::string> hosts;
  for (const Device& d : run.devices) hosts.insert(d.host);
  out += fmt::format("ranks {} on {} node{}; busbw at the largest size {} GB/s; nccl-tests' average over every "
                     "size {:.2f} GB/s\n",
                     run.devices.size(), hosts.size(), hosts.size() == 1 ? "" : "s", cell(v.busbw_largest_gbps),
                     v.mean_busbw_gbps);
  out += fmt::format("threshold: {}\n", threshold.gbps ? fmt::format("{:.2f} GB/s ({})", *threshold.gbps, threshold.source)
                                                       : threshold.source);
  static constexpr const char* kWords[] = {"PASS", "FAIL", "COULD NOT RUN"};
  out += fmt::format("verdict: {}: {}\n", kWords[static_cast<int>(v.outcome)], v.reason);
  return out;
}

}  // namespace srunway::nccltests
