// Submission, waiting and bad-node isolation against a fake scheduler that "runs" each script it is given: it
// reads the script's #SBATCH lines, picks the nodes, and writes an nccl-tests log whose bandwidth depends on
// which nodes the job got.
#include "nccl-tests-wrapper/campaign.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/fs.h"
#include "common/parse.h"
#include "tests/unit/temp_dir.h"

namespace srunway::nccltests {
namespace {

class FakeScheduler final : public Scheduler {
 public:
  explicit FakeScheduler(std::vector<std::string> nodes) : nodes_(std::move(nodes)) {}

  // The node that slows every job it is in to 1 GB/s (others run at 100 GB/s).
  std::string slow_node;
  // Jobs never leave RUNNING.
  bool hang = false;
  // Polls a job stays PENDING, then RUNNING, before it completes.
  int polls_before_done = 2;

  std::vector<std::set<std::string>> submitted_nodes;
  std::set<std::string> cancelled;

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
    SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(log, Log(nodes)));
    polls_[job] = 0;
    return job;
  }

  std::optional<std::string> State(const std::string& job) override {
    if (cancelled.contains(job)) return "CANCELLED";
    const int polls = polls_[job]++;
    if (polls == 0) return "PENDING";
    if (hang || polls < polls_before_done) return "RUNNING";
    return "COMPLETED";
  }

  void Cancel(const std::string& job) override { cancelled.insert(job); }

 private:
  std::string Log(const std::set<std::string>& nodes) const {
    Run run;
    run.collective = "all_gather";
    int rank = 0;
    for (const std::string& node : nodes) run.devices.push_back({rank++, 0, 1000, node, 0, "0x1b", "NVIDIA H100"});
    const double busbw = nodes.contains(slow_node) ? 1.0 : 100.0;
    Row row;
    row.size_bytes = 1 << 20;
    row.count = 1 << 18;
    row.type = "float";
    row.redop = "none";
    row.out_of_place = {100.0, busbw, busbw, 0.0};
    row.in_place = row.out_of_place;
    run.rows = {row};
    return FormatHeader(run) + FormatRow(row) + FormatFooter(run);
  }

  std::vector<std::string> nodes_;
  std::map<std::string, int> polls_;
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

  testing::TempDir dir_;
  std::vector<std::string> lines_;
  const Threshold threshold_{50.0, "test"};
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

TEST_F(CampaignTest, AJobThatDidNotCompleteNeverPasses) {
  Submitted job{"the whole run", "7", (dir_.path() / "none.out").string(), "NODE_FAIL"};
  EXPECT_EQ(JudgeJob(job, threshold_).outcome, Outcome::kCouldNotRun);
  EXPECT_NE(JudgeJob(job, threshold_).reason.find("job 7 ended NODE_FAIL and left no log"), std::string::npos);
}

TEST_F(CampaignTest, IsolationNamesTheSlowNodeAndNobodyElse) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.slow_node = "n3";
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(4), {"n1", "n2", "n3", "n4"}, threshold_, Soon());
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n3");
  EXPECT_EQ((*bad)[0].evidence, "1.00 GB/s at 1M n3 with n1");
  // Two disjoint pairs, then n4 (its pair failed but passed nowhere) and n3 re-tested with n1.
  ASSERT_EQ(scheduler.submitted_nodes.size(), 4u);
  EXPECT_EQ(scheduler.submitted_nodes[0], (std::set<std::string>{"n1", "n2"}));
  EXPECT_EQ(scheduler.submitted_nodes[1], (std::set<std::string>{"n3", "n4"}));
  EXPECT_TRUE(Reported("pair n3,n4: FAIL (1.00 GB/s at 1M)"));
  EXPECT_TRUE(Reported("n4 with n2: pass"));
}

TEST_F(CampaignTest, AnOddNodeOutIsPairedWithTheFirst) {
  FakeScheduler scheduler({"n1", "n2", "n3"});
  scheduler.slow_node = "n3";
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(3), {"n1", "n2", "n3"}, threshold_, Soon());
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);
  EXPECT_EQ((*bad)[0].node, "n3");
  EXPECT_EQ(scheduler.submitted_nodes[1], (std::set<std::string>{"n3", "n1"}));
}

TEST_F(CampaignTest, WithNoGoodPairSuspectsAreRetestedAlone) {
  FakeScheduler scheduler({"n1", "n2"});
  scheduler.slow_node = "n2";
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(2), {"n1", "n2"}, threshold_, Soon());
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->size(), 1u);  // n1 alone passes; n2 alone does not
  EXPECT_EQ((*bad)[0].node, "n2");
  EXPECT_EQ((*bad)[0].evidence, "1.00 GB/s at 1M n2 alone");
  EXPECT_TRUE(Reported("re-testing 2 suspects alone (no pair passed)"));
}

TEST_F(CampaignTest, AHangDuringIsolationIsAnErrorNotAVerdict) {
  FakeScheduler scheduler({"n1", "n2", "n3", "n4"});
  scheduler.hang = true;
  Campaign campaign = MakeCampaign(scheduler);
  auto bad = campaign.Isolate(Spec(4), {"n1", "n2", "n3", "n4"}, threshold_,
                              Campaign::Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(bad.status().code(), common::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(scheduler.cancelled, (std::set<std::string>{"100", "101"}));
}

}  // namespace
}  // namespace srunway::nccltests
