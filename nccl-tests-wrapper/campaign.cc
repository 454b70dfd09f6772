// Submission, waiting and isolation over a Scheduler.
#include "nccl-tests-wrapper/campaign.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <thread>

#include "common/fs.h"
#include "common/hostlist.h"
#include "common/parse.h"
#include "common/signals.h"

namespace srunway::nccltests {

std::string Figure(const Verdict& v) {
  return v.busbw_largest_gbps
             ? fmt::format("{:.2f} GB/s at {}", *v.busbw_largest_gbps, FormatSize(v.largest_size_bytes))
             : v.reason;
}

Campaign::Campaign(Scheduler& scheduler, std::string job_dir, Reporter report, std::chrono::milliseconds poll)
    : scheduler_(scheduler), job_dir_(std::move(job_dir)), report_(std::move(report)), poll_(poll) {}

common::StatusOr<Submitted> Campaign::Submit(JobSpec spec, const std::string& tag, const std::string& label) {
  spec.job_name = tag.empty() ? "run-nccl-tests" : "run-nccl-tests-" + tag;
  spec.output = job_dir_ + "/" + spec.job_name + "-%j.out";
  const std::string script_path = job_dir_ + "/" + spec.job_name + ".sbatch";
  SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(script_path, SbatchScript(spec)));
  SRUNWAY_ASSIGN_OR_RETURN(std::string job, scheduler_.Submit(script_path));
  Submitted submitted{label, job, job_dir_ + "/" + spec.job_name + "-" + job + ".out", ""};
  submitted.run_timeout = RunTimeout(spec);
  return submitted;
}

common::Status Campaign::WaitAll(std::vector<Submitted>& jobs, Clock::time_point deadline) {
  size_t last_rows = 0;
  while (true) {
    bool all_done = true;
    for (Submitted& s : jobs) {
      if (IsFinished(s.state)) continue;
      const std::string state = scheduler_.State(s.job).value_or("");
      if (!state.empty() && state != s.state) report_(fmt::format("job {} ({}) is {}", s.job, s.label, state));
      if (!state.empty()) s.state = state;
      if (s.state == "RUNNING" && s.started == Clock::time_point{}) s.started = Clock::now();
      if (!s.hung && s.started != Clock::time_point{} && s.run_timeout.count() > 0 &&
          Clock::now() - s.started > s.run_timeout) {
        report_(fmt::format("job {} ({}) has not ended {:g}s after it started: cancelled as hung", s.job, s.label,
                            s.run_timeout.count() / 1000.0));
        scheduler_.Cancel(s.job);
        s.hung = true;
      }
      all_done = all_done && IsFinished(s.state);
    }
    if (jobs.size() == 1) {
      if (auto text = common::ReadFile(jobs[0].log); text.ok()) {
        auto runs = ParseLog(*text);
        const size_t rows = runs.empty() ? 0 : runs.back().rows.size();
        if (rows > last_rows) {
          const Row& row = runs.back().rows.back();
          report_(fmt::format("{} sizes done; {} busbw {:.2f} GB/s", rows, FormatSize(row.size_bytes),
                              row.out_of_place.busbw_gbps.value_or(0)));
          last_rows = rows;
        }
      }
    }
    if (all_done) return common::Status::Ok();
    const bool stopped = stop_ != nullptr && *stop_ != 0;
    if (stopped || Clock::now() > deadline) {
      std::string ids;
      for (const Submitted& s : jobs) {
        if (IsFinished(s.state)) continue;
        scheduler_.Cancel(s.job);
        ids += (ids.empty() ? "" : ", ") + s.job + " (log: " + s.log + ")";
      }
      if (stopped) return common::Aborted("stopped by {}; cancelled {}", common::SignalName(*stop_), ids);
      return common::DeadlineExceeded("jobs did not finish in time; cancelled {}", ids);
    }
    std::this_thread::sleep_for(poll_);
  }
}

Verdict JudgeJob(const Submitted& s, const Threshold& threshold) {
  Verdict v;
  auto text = common::ReadFile(s.log);
  if (!text.ok()) {
    v.reason = fmt::format("job {} ended {} and left no log", s.job, s.state);
    return v;
  }
  auto runs = ParseAny(*text, s.log);
  if (!runs.ok()) {
    v.reason = fmt::format("job {} ended {}: {}", s.job, s.state, runs.status().message());
    return v;
  }
  v = Judge(runs->back(), threshold.gbps);
  if (s.state != "COMPLETED" && v.outcome == Outcome::kPass) {
    v.outcome = Outcome::kCouldNotRun;
    v.reason = fmt::format("job {} ended {}", s.job, s.state);
  }
  return v;
}

std::string_view KindName(Finding::Kind kind) {
  switch (kind) {
    case Finding::Kind::kPass: return "pass";
    case Finding::Kind::kSlow: return "slow";
    case Finding::Kind::kWrong: return "wrong values";
    case Finding::Kind::kHung: return "hung";
    case Finding::Kind::kCrashed: return "crashed";
    case Finding::Kind::kNoComm: return "no communicator";
    case Finding::Kind::kFailed: return "failed";
  }
  return "failed";
}

namespace {

// "srunway-collbench[node2 rank 3] error: rank 3 on node2: communicator init: cannot load NCCL: ..." -> the rank's
// words after "communicator init: " and its host; nullopt for other lines.
std::optional<std::pair<std::string, std::string>> CommInitFailure(std::string_view line) {
  constexpr std::string_view kMark = "communicator init: ";
  const size_t mark = line.find(kMark);
  const size_t open = line.find('[');
  if (mark == std::string_view::npos || open == std::string_view::npos || open > mark) return std::nullopt;
  const size_t end = line.find_first_of(" ]", open + 1);
  if (end == std::string_view::npos) return std::nullopt;
  return std::pair{std::string(line.substr(open + 1, end - open - 1)), std::string(line.substr(mark + kMark.size()))};
}

// srun's line for a task that died of a signal: "srun: error: node2: task 3: Segmentation fault (core dumped)".
// Exit codes and the Killed/Terminated of the step's other tasks (srun ending the step) are not crashes.
std::optional<std::string> CrashLine(std::string_view line) {
  constexpr std::string_view kMark = "srun: error: ";
  const size_t at = line.find(kMark);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + kMark.size());
  const auto parts = common::Split(rest, ':');
  if (parts.size() < 3 || !common::Trim(parts[1]).starts_with("task")) return std::nullopt;
  const std::string_view why = common::Trim(rest.substr(rest.find(':', rest.find(':') + 1) + 1));
  if (why.starts_with("Exited with exit code") || why == "Killed" || why == "Terminated") return std::nullopt;
  return fmt::format("{} on {}: {}", common::Trim(parts[1]), common::Trim(parts[0]), why);
}

}  // namespace

Finding Examine(const Submitted& job, const Threshold& threshold) {
  Finding f;
  auto text = common::ReadFile(job.log);
  std::string comm;
  std::string last_size = "before its first size";
  if (text.ok()) {
    if (auto runs = ParseAny(*text, job.log); runs.ok()) {
      comm = runs->back().comm;
      if (!runs->back().rows.empty()) last_size = "last size done " + FormatSize(runs->back().rows.back().size_bytes);
    }
  }
  f.verdict = JudgeJob(job, ForCommunicator(threshold, comm));
  if (job.hung) {
    f.kind = Finding::Kind::kHung;
    f.evidence = fmt::format("no end within {:g}s of its start ({})", job.run_timeout.count() / 1000.0, last_size);
    return f;
  }
  if (text.ok()) {
    std::optional<std::string> crash, no_comm;
    std::set<std::string> no_comm_nodes;
    for (std::string_view line : common::Split(*text, '\n')) {
      if (auto failure = CommInitFailure(line)) {
        no_comm_nodes.insert(failure->first);
        if (!no_comm) no_comm = failure->second;
      }
      if (!crash) crash = CrashLine(line);
    }
    if (no_comm) {
      f.kind = Finding::Kind::kNoComm;
      f.evidence = fmt::format("{} could not set up {} communicator: {}", fmt::join(no_comm_nodes, ", "),
                               no_comm_nodes.size() == 1 ? "its" : "their", *no_comm);
      return f;
    }
    if (crash) {
      f.kind = Finding::Kind::kCrashed;
      f.evidence = *crash;
      return f;
    }
  }
  if (f.verdict.outcome == Outcome::kPass) {
    f.kind = Finding::Kind::kPass;
  } else if (f.verdict.outcome == Outcome::kFail) {
    f.kind = f.verdict.wrong > 0 || f.verdict.reason.find("out-of-bounds") != std::string::npos
                 ? Finding::Kind::kWrong
                 : Finding::Kind::kSlow;
  }
  f.evidence = f.ok() ? Figure(f.verdict) : f.verdict.reason;
  return f;
}

std::vector<std::string> NodesOfLog(const std::string& log_path) {
  std::set<std::string> hosts;
  auto text = common::ReadFile(log_path);
  if (!text.ok()) return {};
  for (std::string_view line : common::Split(*text, '\n')) {
    constexpr std::string_view kMark = "run-nccl-tests: job ";
    if (!line.starts_with(kMark)) continue;
    const size_t on = line.find(" on ");
    if (on == std::string_view::npos) continue;
    if (auto nodes = common::ExpandHostlist(common::Trim(line.substr(on + 4))); nodes.ok()) {
      hosts.insert(nodes->begin(), nodes->end());
      return {hosts.begin(), hosts.end()};
    }
  }
  for (const Run& run : ParseLog(*text)) {
    for (const Device& d : run.devices) hosts.insert(d.host);
  }
  return {hosts.begin(), hosts.end()};
}

common::StatusOr<std::vector<BadNode>> Campaign::Isolate(const JobSpec& base, const std::vector<std::string>& nodes,
                                                         const Finding& whole, const Threshold& pair_threshold,
                                                         const Threshold& alone_threshold,
                                                         Clock::time_point deadline) {
  std::set<std::string> good, suspects;
  if (nodes.size() <= 2) {
    // The whole run was the pair, or the node alone: re-test to see that it fails consistently.
    report_(fmt::format("isolating: the run over {} was {} ({}: {})", fmt::join(nodes, ","),
                        nodes.size() == 1 ? "the node alone" : "the only pair", KindName(whole.kind), whole.evidence));
    suspects.insert(nodes.begin(), nodes.end());
  } else {
    std::vector<Submitted> pairs;
    std::vector<std::pair<std::string, std::string>> members;
    for (size_t i = 0; i < nodes.size(); i += 2) {
      const std::string& a = nodes[i];
      const std::string& b = i + 1 < nodes.size() ? nodes[i + 1] : nodes[0];
      if (a == b) break;
      JobSpec spec = base;
      spec.nodes = 2;
      spec.nodelist = a + "," + b;
      SRUNWAY_ASSIGN_OR_RETURN(Submitted s, Submit(spec, "pair-" + a + "-" + b, a + "," + b));
      pairs.push_back(s);
      members.emplace_back(a, b);
    }
    report_(fmt::format("isolating: {} node pairs in parallel", pairs.size()));
    SRUNWAY_RETURN_IF_ERROR(WaitAll(pairs, deadline));
    for (size_t i = 0; i < pairs.size(); ++i) {
      const Finding f = Examine(pairs[i], pair_threshold);
      report_(fmt::format("pair {}: {} ({})", pairs[i].label, f.ok() ? "pass" : "FAIL: " + std::string(KindName(f.kind)),
                          f.evidence));
      for (const std::string& node : {members[i].first, members[i].second}) (f.ok() ? good : suspects).insert(node);
    }
  }
  for (const std::string& node : good) suspects.erase(node);  // passed in some pair
  std::vector<Submitted> second;
  std::vector<std::string> second_node;
  auto partner = good.begin();
  for (const std::string& suspect : suspects) {
    JobSpec spec = base;
    std::string label;
    if (!good.empty()) {
      spec.nodes = 2;
      spec.nodelist = suspect + "," + *partner;
      label = suspect + " with " + *partner;
      if (++partner == good.end()) partner = good.begin();
    } else {
      spec.nodes = 1;
      spec.nodelist = suspect;
      label = suspect + " alone";
    }
    SRUNWAY_ASSIGN_OR_RETURN(Submitted s, Submit(spec, "check-" + suspect, label));
    second.push_back(s);
    second_node.push_back(suspect);
  }
  if (second.empty()) return std::vector<BadNode>{};
  const bool alone = good.empty();
  report_(fmt::format("re-testing {} {} {}", second.size(), second.size() == 1 ? "suspect" : "suspects",
                      alone ? "alone (no pair passed)" : "with nodes that passed"));
  SRUNWAY_RETURN_IF_ERROR(WaitAll(second, deadline));
  std::vector<Finding> findings;
  for (const Submitted& s : second) findings.push_back(Examine(s, alone ? alone_threshold : pair_threshold));
  // Alone without a single-node figure: a node far below the best of its peers measured the same way is slow.
  if (alone && !alone_threshold.gbps) {
    std::optional<double> best;
    std::string best_node;
    for (size_t i = 0; i < findings.size(); ++i) {
      const auto figure = findings[i].verdict.busbw_largest_gbps;
      if (findings[i].ok() && figure && (!best || *figure > *best)) {
        best = figure;
        best_node = second_node[i];
      }
    }
    for (size_t i = 0; best && i < findings.size(); ++i) {
      const auto figure = findings[i].verdict.busbw_largest_gbps;
      if (!findings[i].ok() || !figure || *figure >= *best * kDefaultPassFraction) continue;
      findings[i].kind = Finding::Kind::kSlow;
      findings[i].evidence = fmt::format("{}, below {:.0f}% of {}'s {:.2f} GB/s measured alone the same way",
                                         Figure(findings[i].verdict), 100 * kDefaultPassFraction, best_node, *best);
    }
    if (findings.size() == 1 && findings[0].ok()) {
      findings[0].evidence += " (no single-node figure and no peer measured alone: its bandwidth is not judged)";
    }
  }
  std::vector<BadNode> bad;
  std::set<Finding::Kind> kinds;
  for (size_t i = 0; i < second.size(); ++i) {
    const Finding& f = findings[i];
    report_(fmt::format("{}: {} ({})", second[i].label, f.ok() ? "pass" : "FAIL: " + std::string(KindName(f.kind)),
                        f.evidence));
    if (f.ok()) continue;
    kinds.insert(f.kind);
    bad.push_back({second_node[i], fmt::format("{}: {} ({})", KindName(f.kind), f.evidence, second[i].label)});
  }
  if (alone && bad.size() == second.size() && bad.size() > 1 && kinds.size() == 1) {
    report_(fmt::format("every suspect failed alone in the same way ({}): a site-wide problem (software, "
                        "configuration, the reference), not a bad node",
                        KindName(*kinds.begin())));
    return std::vector<BadNode>{};
  }
  return bad;
}

}  // namespace srunway::nccltests
