// Submission, waiting and bad-node isolation against a fake scheduler that "runs" each script it is given: it
// reads the script's #SBATCH lines, picks the nodes, and writes an nccl-tests log whose bandwidth depends on
// which nodes the job got.
#include "nccl-tests-wrapper/campaign.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/fs.h"
#include "common/parse.h"
#include "tests/unit/temp_dir.h"

namespace srunway::nccltests {
namespace {

class FakeScheduler final : public Scheduler {
 public:
  explicit FakeScheduler(std::vector<std::string> nodes) : nodes_(std::move(nodes)) {}
  const std::vector<std::string>& nodes() const { return nodes_; }

  // What is wrong with a node, and so with every job it is in: kSlow runs at 1 GB/s (healthy pairs at 100, a
  // healthy node alone at 200, a slow one alone at 2), kHung never leaves RUNNING, kCrashed has srun report a
  // rank's SIGSEGV, kNoComm a rank that cannot load NCCL, kWrong wrong values.
  std::map<std::string, Finding::Kind> faulty;
  // Jobs never leave RUNNING.
  bool hang = false;
  // Polls a job stays PENDING, then RUNNING, before it completes.
  int polls_before_done = 2;

  std::vector<std::set<std::string>> submitted_nodes;
  std::set<std::string> cancelled;
  std::vector<std::pair<std::string, std::vector<std::string>>> requeued;

  common::StatusOr<std::string> Submit(const std::string& script_path) override {
    SRUNWAY_ASSIGN_OR_RETURN(std::string script, common::ReadFile(script_path));
    std::string output, nodelist;
    int count = 0;
    for (std::string_view line : common::Split(script, '\n')) {
      if (line.starts_with("#SBATCH --output=")) output = line.substr(17);
      if (line.starts_with("#SBATCH --nodelist=")) nodelist = line.substr(19);
      if (line.starts_with("#SBATCH --nodes=")) count = std::stoi(std::string(line.substr(16)));
    }
    std::set<std::string> nodes;
    if (!nodelist.empty()) {
      for (std::string_view n : common::Split(nodelist, ',')) nodes.insert(std::string(n));
    } else {
      nodes.insert(nodes_.begin(), nodes_.begin() + count);
    }
    if (static_cast<int>(nodes.size()) != count) return common::InvalidArgument("--nodes={} but --nodelist={}", count, nodelist);
    const std::string job = std::to_string(100 + submitted_nodes.size());
    submitted_nodes.push_back(nodes);
    const std::string log = output.replace(output.find("%j"), 2, job);
    auto [text, end] = Log(job, nodes);
    SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(log, text));
    polls_[job] = 0;
    ends_[job] = end;
    return job;
  }

  std::optional<std::string> State(const std::string& job) override {
    if (cancelled.contains(job)) return "CANCELLED";
    const int polls = polls_[job]++;
    if (polls == 0) return "PENDING";
    if (hang || ends_[job].empty() || polls < polls_before_done) return "RUNNING";
    return ends_[job];
  }

  void Cancel(const std::string& job) override { cancelled.insert(job); }

  common::Status RequeueExcluding(const std::string& job, const std::vector<std::string>& exclude) override {
    requeued.emplace_back(job, exclude);
    return common::Status::Ok();
  }

 private:
  // The job's log and the state it ends in (empty: it never ends).
  std::pair<std::string, std::string> Log(const std::string& job, const std::set<std::string>& nodes) const {
    std::string head = fmt::format("run-nccl-tests: job {} on {}\n", job, fmt::join(nodes, ","));
    Run run;
    run.collective = "all_gather";
    run.comm = "nccl";
    run.nccl_version = "2.27.3";
    int rank = 0;
    for (const std::string& node : nodes) run.devices.push_back({rank++, 0, 1000, node, 0, "0x1b", "NVIDIA H100"});
    const std::string last = *nodes.rbegin();
    auto has = [&](Finding::Kind kind) {
      return std::ranges::any_of(nodes, [&](const std::string& n) { return faulty.contains(n) && faulty.at(n) == kind; });
    };
    auto which = [&](Finding::Kind kind) {
      for (const std::string& n : nodes) {
        if (faulty.contains(n) && faulty.at(n) == kind) return n;
      }
      return std::string();
    };
    if (has(Finding::Kind::kNoComm)) {
      const std::string n = which(Finding::Kind::kNoComm);
      return {head + fmt::format("srunway-collbench[{} rank 1] error: rank 1 on {}: communicator init: cannot load "
                                 "NCCL: libnccl.so.2: cannot open shared object file\n"
                                 "srun: error: {}: task 1: Exited with exit code 3\n", n, n, n),
              "FAILED"};
    }
    if (has(Finding::Kind::kHung)) return {head + FormatHeader(run), ""};
    if (has(Finding::Kind::kCrashed)) {
      const std::string n = which(Finding::Kind::kCrashed);
      return {head + FormatHeader(run) +
                  fmt::format("srun: error: {}: tasks 0-1: Killed\nsrun: error: {}: task 1: Segmentation fault\n",
                              *nodes.begin() == n ? last : *nodes.begin(), n),
              "FAILED"};
    }
    const bool alone = nodes.size() == 1;
    const double busbw = has(Finding::Kind::kSlow) ? (alone ? 2.0 : 1.0) : (alone ? 200.0 : 100.0);
    Row row;
    row.size_bytes = 1 << 20;
    row.count = 1 << 18;
    row.type = "float";
    row.redop = "none";
    row.out_of_place = {100.0, busbw, busbw, has(Finding::Kind::kWrong) ? 4.0 : 0.0};
    row.in_place = row.out_of_place;
    run.rows = {row};
    return {head + FormatHeader(run) + FormatRow(row) + FormatFooter(run),
            has(Finding::Kind::kWrong) ? "FAILED" : "COMPLETED"};
  }

  std::vector<std::string> nodes_;
  std::map<std::string, int> polls_;
  std::map<std::string, std::string> ends_;
};

class CampaignTest : public ::testing::Test {
 protected:
  CampaignTest() : dir_("campaign-test") {}

  Campaign MakeCampaign(FakeScheduler& scheduler) {
    return Campaign(scheduler, dir_.path().string(), [this](const std::string& line) { lines_.push_back(line); },
                    std::chrono::milliseconds(1));
  }
  static JobSpec Spec(int nodes) {
    JobSpec spec;
    spec.collective = *FindCollective("all_gather");
    spec.nodes = nodes;
    spec.collbench = "srunway-collbench";
    return spec;
  }
  static Campaign::Clock::time_point Soon() { return Campaign::Clock::now() + std::chrono::seconds(20); }
  bool Reported(std::string_view text) const {
    return std::ranges::any_of(lines_, [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }

  // What the whole run showed before isolation.
  static Finding Whole(Finding::Kind kind = Finding::Kind::kSlow) {
    Finding f;
    f.kind = kind;
    f.evidence = "the whole run";
    return f;
  }

  // Isolation over every node of `scheduler` after a whole run that failed as `kind`, judged by threshold_ and
  // no single-node figure.
  common::StatusOr<std::vector<BadNode>> IsolateAll(FakeScheduler& scheduler, Finding::Kind kind) {
    Campaign campaign = MakeCampaign(scheduler);
    return campaign.Isolate(Spec(static_cast<int>(scheduler.nodes().size())), scheduler.nodes(), Whole(kind), threshold_,
                            no_alone_, Soon());
  }

  testing::TempDir dir_;
  std::vector<std::string> lines_;
  const Threshold threshold_{50.0, "test"};
  const Threshold no_alone_{std::nullopt, "no single-node figure"};
};

TEST_F(CampaignTest, SubmitWritesTheScriptAndFindsTheLog) {
  FakeScheduler scheduler({"n1", "n2"});
  Campaign campaign = MakeCampaign(scheduler);
  auto job = campaign.Submit(Spec(2), "", "the whole run");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->job, "100");
  EXPECT_EQ(job->log, (dir_.path() / "run-nccl-tests-100.out").string());
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "run-nccl-tests.sbatch"));
  std::vector<Submitted> jobs = {*job};
  ASSERT_TRUE(campaign.WaitAll(jobs, Soon()).ok());
  EXPECT_EQ(jobs[0].state, "COMPLETED");
  EXPECT_TRUE(Reported("job 100 (the whole run) is PENDING"));
  EXPECT_TRUE(Reported("job 100 (the whole run) is COMPLETED"));
  EXPECT_TRUE(Reported("1 sizes done; 1M busbw 100.00 GB/s"));
  EXPECT_EQ(JudgeJob(jobs[0], threshold_).outcome, Outcome::kPass);
  EXPECT_EQ(NodesOfLog(jobs[0].log), (std::vector<std::string>{"n1", "n2"}));
}

TEST_F(CampaignTest, ADeadlineCancelsWhatIsStillRunningAndNamesIt) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.hang = true;
  Campaign campaign = MakeCampaign(scheduler);
  auto job = campaign.Submit(Spec(2), "", "the whole run");
  ASSERT_TRUE(job.ok());
  std::vector<Submitted> jobs = {*job};
  const common::Status status = campaign.WaitAll(jobs, Campaign::Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(status.code(), common::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("cancelled 100 (log: " + job->log + ")"), std::string::npos) << status.message();
  EXPECT_EQ(scheduler.cancelled, (std::set<std::string>{"100"}));
}

TEST_F(CampaignTest, ASignalCancelsWhatIsStillRunningAndSaysWhichSignal) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.hang = true;
  Campaign campaign = MakeCampaign(scheduler);
  volatile std::sig_atomic_t stop = 0;
  campaign.StopOn(&stop);
  auto job = campaign.Submit(Spec(2), "", "the whole run");
  ASSERT_TRUE(job.ok());
  std::vector<Submitted> jobs = {*job};
  stop = SIGINT;  // as the handler sets it; the deadline is far off
  const common::Status status = campaign.WaitAll(jobs, Soon());
  EXPECT_EQ(status.code(), common::StatusCode::kAborted);
  EXPECT_EQ(status.message(), "stopped by SIGINT; cancelled 100 (log: " + job->log + ")");
  EXPECT_EQ(scheduler.cancelled, (std::set<std::string>{"100"}));
}

TEST_F(CampaignTest, AJobThatDidNotCompleteNeverPasses) {
  Submitted job{"the whole run", "7", (dir_.path() / "none.out").string(), "NODE_FAIL"};
  EXPECT_EQ(JudgeJob(job, threshold_).outcome, Outcome::kCouldNotRun);
  EXPECT_NE(JudgeJob(job, threshold_).reason.find("job 7 ended NODE_FAIL and left no log"), std::string::npos);
}

TEST_F(CampaignTest, IsolationNamesTheSlowNodeAndNobodyElse) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.faulty["n3"] = Finding::Kind::kSlow;
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(4), {"n1", "n2", "n3", "n4"}, Whole(), threshold_, no_alone_, Soon());
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n3");
  EXPECT_EQ((*bad)[0].evidence, "slow: bus bandwidth 1.00 GB/s at 1M is below the threshold 50.00 GB/s (n3 with n1)");
  // Two disjoint pairs, then n4 (its pair failed but passed nowhere) and n3 re-tested with n1.
  ASSERT_EQ(scheduler.submitted_nodes.size(), 4u);
  EXPECT_EQ(scheduler.submitted_nodes[0], (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(scheduler.submitted_nodes[1], (std::set<std::string>{"n3", "n4"}));
  EXPECT_TRUE(Reported("pair n3,n4: FAIL: slow (bus bandwidth 1.00 GB/s at 1M is below the threshold 50.00 GB/s)"));
  EXPECT_TRUE(Reported("n4 with n2: pass"));
}

TEST_F(CampaignTest, AnOddNodeOutIsPairedWithTheFirst) {
  FakeScheduler scheduler({"n1", "n2", "n3"});
  scheduler.faulty["n3"] = Finding::Kind::kSlow;
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(3), {"n1", "n2", "n3"}, Whole(), threshold_, no_alone_, Soon());
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n3");
  EXPECT_EQ(scheduler.submitted_nodes[1], (std::set<std::string>{"n3", "n1"}));
}

// Two nodes: the whole run was the pair, so each is re-tested alone at once; alone a node runs over NVLink (200
// GB/s here), so the multi-node threshold (50) would pass a slow one (2): it is judged against its peer.
TEST_F(CampaignTest, AloneANodeIsJudgedAgainstPeersMeasuredAloneNotTheMultiNodeFigure) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.faulty["n2"] = Finding::Kind::kSlow;
  Campaign campaign = MakeCampaign(scheduler);
  const Threshold low_pair{1.5, "a threshold the slow node alone would pass"};
  auto bad = campaign.Isolate(Spec(2), {"n1", "n2"}, Whole(), low_pair, no_alone_, Soon());
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n2");
  EXPECT_EQ((*bad)[0].evidence,
            "slow: 2.00 GB/s at 1M, below 90% of n1's 200.00 GB/s measured alone the same way (n2 alone)");
  ASSERT_EQ(scheduler.submitted_nodes.size(), 2u);  // no pair job: the whole run was the pair
  EXPECT_TRUE(Reported("re-testing 2 suspects alone (no pair passed)"));
}

TEST_F(CampaignTest, AloneWithASingleNodeFigureEachNodeIsJudgedByIt) {
  FakeScheduler scheduler({"n1", "n2"});
  Campaign campaign = MakeCampaign(scheduler);
  const Threshold single{250.0, "90% of a single-node figure", true};
  auto bad = campaign.Isolate(Spec(2), {"n1", "n2"}, Whole(), threshold_, single, Soon());
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 0u) << "both below the figure alike: a site-wide problem names nobody";
  EXPECT_TRUE(Reported("every suspect failed alone in the same way (slow)"));
  const Threshold met{150.0, "90% of a single-node figure", true};
  lines_.clear();
  scheduler.faulty["n1"] = Finding::Kind::kSlow;
  bad = campaign.Isolate(Spec(2), {"n1", "n2"}, Whole(), threshold_, met, Soon());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n1");
  EXPECT_NE((*bad)[0].evidence.find("below the threshold 150.00 GB/s"), std::string::npos) << (*bad)[0].evidence;
}

TEST_F(CampaignTest, AHungPairIsCancelledAtItsRunTimeoutAndTheHangingNodeNamed) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.faulty["n2"] = Finding::Kind::kHung;
  Campaign campaign = MakeCampaign(scheduler);
  JobSpec spec = Spec(4);
  spec.run_timeout_s = 0.05;
  auto bad = campaign.Isolate(spec, {"n1", "n2", "n3", "n4"}, Whole(Finding::Kind::kHung), threshold_, no_alone_, Soon());
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n2");
  EXPECT_EQ((*bad)[0].evidence.rfind("hung: no end within 0.05s of its start (before its first size)", 0), 0u)
      << (*bad)[0].evidence;
  EXPECT_TRUE(Reported("pair n1,n2: FAIL: hung"));
  EXPECT_TRUE(Reported("cancelled as hung"));
  EXPECT_TRUE(scheduler.cancelled.contains("100"));
}

TEST_F(CampaignTest, ACrashNamesTheNodeOfTheCrashedRankNotThoseSrunKilled) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.faulty["n4"] = Finding::Kind::kCrashed;
  auto bad = IsolateAll(scheduler, Finding::Kind::kCrashed);
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n4");
  EXPECT_EQ((*bad)[0].evidence, "crashed: task 1 on n4: Segmentation fault (n4 with n2)");
}

TEST_F(CampaignTest, ANodeThatCannotStartItsCommunicatorIsNamedWithTheReason) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.faulty["n2"] = Finding::Kind::kNoComm;
  auto bad = IsolateAll(scheduler, Finding::Kind::kNoComm);
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n2");
  EXPECT_EQ((*bad)[0].evidence,
            "no communicator: n2 could not set up its communicator: cannot load NCCL: libnccl.so.2: cannot open "
            "shared object file (n2 alone)");
  EXPECT_TRUE(Reported("n1 alone: pass (200.00 GB/s at 1M)"));
}

TEST_F(CampaignTest, EveryNodeFailingAloneTheSameWayIsASiteProblemNotABadNode) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.faulty = {{"n1", Finding::Kind::kNoComm}, {"n2", Finding::Kind::kNoComm}};
  auto bad = IsolateAll(scheduler, Finding::Kind::kNoComm);
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE(bad->empty());
  EXPECT_TRUE(Reported("every suspect failed alone in the same way (no communicator): a site-wide problem"));
}

TEST_F(CampaignTest, WrongValuesCondemnANodeWhateverItsBandwidth) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.faulty["n1"] = Finding::Kind::kWrong;
  auto bad = IsolateAll(scheduler, Finding::Kind::kWrong);
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n1");
  EXPECT_EQ((*bad)[0].evidence.rfind("wrong values: 8 wrong values", 0), 0u) << (*bad)[0].evidence;
}

TEST_F(CampaignTest, ExamineReadsTheWholeRunsFailure) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.faulty["n1"] = Finding::Kind::kCrashed;
  Campaign campaign = MakeCampaign(scheduler);
  auto job = campaign.Submit(Spec(2), "", "the whole run");
  ASSERT_TRUE(job.ok());
  std::vector<Submitted> jobs = {*job};
  ASSERT_TRUE(campaign.WaitAll(jobs, Soon()).ok());
  const Finding f = Examine(jobs[0], threshold_);
  EXPECT_EQ(f.kind, Finding::Kind::kCrashed);
  EXPECT_EQ(f.evidence, "task 1 on n1: Segmentation fault");  // not "tasks 0-1 on n2: Killed"
  EXPECT_EQ(NodesOfLog(jobs[0].log), (std::vector<std::string>{"n1", "n2"}));
}

TEST_F(CampaignTest, AHostMemoryRunIsNotJudgedByAPublishedGpuFigure) {
  const Threshold published{150.0, "90% of a GPU figure", true};
  EXPECT_FALSE(ForCommunicator(published, "mpi").gbps.has_value());
  EXPECT_NE(ForCommunicator(published, "mpi").source.find("host-memory run (mpi communicator)"), std::string::npos);
  EXPECT_EQ(ForCommunicator(published, "nccl").gbps, 150.0);
  EXPECT_EQ(ForCommunicator(threshold_, "mpi").gbps, 50.0);  // the admin's own --expect-busbw stands
}

TEST_F(CampaignTest, TheRunTimeoutGrowsWithSizesAndIterationsAndStopsAtTheTimeLimit) {
  JobSpec spec = Spec(2);
  spec.min_bytes = spec.max_bytes = 1 << 20;
  spec.iters = 20;
  spec.warmup = 5;
  const auto small = RunTimeout(spec);
  EXPECT_GE(small, std::chrono::seconds(120));
  EXPECT_LT(small, std::chrono::seconds(121));
  spec.max_bytes = int64_t{8} << 30;
  EXPECT_GT(RunTimeout(spec), small + std::chrono::seconds(60));
  spec.gpus_per_node = 0;  // CPU ranks: a lower floor, a longer allowance
  EXPECT_GT(RunTimeout(spec), std::chrono::minutes(29));
  EXPECT_EQ(RunTimeout(spec), std::chrono::minutes(30));  // the job's --time
  spec.run_timeout_s = 7.5;
  EXPECT_EQ(RunTimeout(spec), std::chrono::milliseconds(7500));
}

TEST_F(CampaignTest, TheScriptRunsNcclOnGpusAndEndsTheStepWhenARankDies) {
  JobSpec spec = Spec(2);
  spec.comm = "nccl";
  spec.network_profile = "a3mega";
  const std::string script = SbatchScript(spec);
  EXPECT_NE(script.find("srun --mpi=pmix --kill-on-bad-exit=1 --network-profile=a3mega srunway-collbench all_gather "
                        "--comm nccl -g 1"),
            std::string::npos)
      << script;
}

TEST_F(CampaignTest, AHangDuringIsolationIsAnErrorNotAVerdict) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.hang = true;
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(4), {"n1", "n2", "n3", "n4"}, Whole(), threshold_, no_alone_,
                              Campaign::Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(bad.status().code(), common::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(scheduler.cancelled, (std::set<std::string>{"100", "101"}));
}

}  // namespace
}  // namespace srunway::nccltests
