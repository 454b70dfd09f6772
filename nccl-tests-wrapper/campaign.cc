// Submission, waiting and isolation over a Scheduler.
#include "nccl-tests-wrapper/campaign.h"

#include <fmt/format.h>

#include <set>
#include <thread>

#include "common/fs.h"

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
  return Submitted{label, job, job_dir_ + "/" + spec.job_name + "-" + job + ".out", ""};
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
    if (Clock::now() > deadline) {
      std::string ids;
      for (const Submitted& s : jobs) {
        if (IsFinished(s.state)) continue;
        scheduler_.Cancel(s.job);
        ids += (ids.empty() ? "" : ", ") + s.job + " (log: " + s.log + ")";
      }
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

std::vector<std::string> NodesOfLog(const std::string& log_path) {
  std::set<std::string> hosts;
  if (auto text = common::ReadFile(log_path); text.ok()) {
    for (const Run& run : ParseLog(*text)) {
      for (const Device& d : run.devices) hosts.insert(d.host);
    }
  }
  return {hosts.begin(), hosts.end()};
}

common::StatusOr<std::vector<BadNode>> Campaign::Isolate(const JobSpec& base, const std::vector<std::string>& nodes,
                                                         const Threshold& threshold, Clock::time_point deadline) {
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
  std::set<std::string> good, suspects;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Verdict v = JudgeJob(pairs[i], threshold);
    const bool pass = v.outcome == Outcome::kPass;
    report_(fmt::format("pair {}: {} ({})", pairs[i].label, pass ? "pass" : "FAIL", Figure(v)));
    for (const std::string& node : {members[i].first, members[i].second}) (pass ? good : suspects).insert(node);
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
  if (!second.empty()) {
    report_(fmt::format("re-testing {} suspects {}", second.size(),
                        good.empty() ? "alone (no pair passed)" : "with nodes that passed"));
    SRUNWAY_RETURN_IF_ERROR(WaitAll(second, deadline));
  }
  std::vector<BadNode> bad;
  for (size_t i = 0; i < second.size(); ++i) {
    const Verdict v = JudgeJob(second[i], threshold);
    const bool pass = v.outcome == Outcome::kPass;
    report_(fmt::format("{}: {} ({})", second[i].label, pass ? "pass" : "FAIL", Figure(v)));
    if (!pass) bad.push_back({second_node[i], Figure(v) + " " + second[i].label});
  }
  return bad;
}

}  // namespace srunway::nccltests
