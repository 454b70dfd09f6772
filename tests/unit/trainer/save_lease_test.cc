// The lease on a --save directory: taken, refused while another live run holds it, taken over once that run is
// known to have ended, kept fresh while held, and given up at the end.
#include "trainer/ckpt/save_lease.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "common/fs.h"
#include "tests/unit/temp_dir.h"

namespace srunway::trainer {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SaveLeaseTest : public ::testing::Test {
 protected:
  fs::path Lease() const { return dir_.path() / SaveLease::kFileName; }
  // Sets the lease's last touch `seconds` in the past.
  void Age(int seconds) const {
    struct timespec times[2] = {};
    ::clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= seconds;
    times[1] = times[0];
    ASSERT_EQ(::utimensat(AT_FDCWD, Lease().c_str(), times, 0), 0);
  }
  double SecondsSinceTouched() const {
    struct stat st {};
    EXPECT_EQ(::stat(Lease().c_str(), &st), 0);
    return static_cast<double>(std::time(nullptr) - st.st_mtim.tv_sec);
  }
  // A run on this host whose process exists (init), outside Slurm.
  static SaveLeaseHolder LiveHere() {
    SaveLeaseHolder holder = ThisLeaseHolder();
    holder.job.clear();
    holder.process.pid = 1;
    return holder;
  }
  static SaveLeaseHolder Elsewhere(std::string job, std::string cluster = "") {
    return {std::move(job), {"node9", 4026531836, 4242}, "n9", std::move(cluster)};
  }
  // The lease a run left when it was killed (nothing gave it up).
  void Leave(const SaveLeaseHolder& holder) const {
    ASSERT_TRUE(common::WriteFileAtomic(Lease(), fmt::format("{{\"job\":\"{}\",\"host\":\"{}\",\"pid_ns\":{},"
                                                             "\"pid\":{},\"nonce\":\"{}\",\"cluster\":\"{}\"}}\n",
                                                             holder.job, holder.process.host, holder.process.pid_ns,
                                                             holder.process.pid, holder.nonce, holder.cluster)).ok());
  }

  testing::TempDir dir_{"save-lease-test"};
};

TEST_F(SaveLeaseTest, ALiveRunsLeaseIsRefusedNamingItAndGivenUpAtItsEnd) {
  auto first = SaveLease::Take(dir_.path(), LiveHere());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(fs::exists(Lease()));
  auto second = SaveLease::Take(dir_.path(), ThisLeaseHolder());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), common::StatusCode::kFailedPrecondition);
  // The lease's age in whole seconds: 0 here, but 1 when a busy machine (a sanitized build in CI) took a second.
  const std::regex refusal(fmt::format(
      "--save {} is in use by process 1 on {} \\(its lease {} touched [0-9]+ s ago\\): two runs saving in one directory "
      "mix their checkpoints", dir_.path().string(), LiveHere().process.host, Lease().string()));
  EXPECT_TRUE(std::regex_search(std::string(second.status().message()), refusal)) << second.status().message();
  // Another host's run, fresh, whose process cannot be seen from here: refused too, naming its job.
  first->reset();
  EXPECT_FALSE(fs::exists(Lease())) << "the lease stayed after its run ended";
  auto far = SaveLease::Take(dir_.path(), Elsewhere("1234"));
  ASSERT_TRUE(far.ok());
  second = SaveLease::Take(dir_.path(), ThisLeaseHolder());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use by job 1234's process 4242 on node9"), std::string::npos)
      << second.status().message();
}

TEST_F(SaveLeaseTest, ARunKnownToHaveEndedIsTakenOver) {
  // Its Slurm job run again (requeued): the same job id.
  auto old = SaveLease::Take(dir_.path(), Elsewhere("77"));
  ASSERT_TRUE(old.ok());
  SaveLeaseHolder requeued = ThisLeaseHolder();
  requeued.job = "77";
  auto again = SaveLease::Take(dir_.path(), requeued);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  // The run it took over finds out before its next save, and does not remove the new holder's lease.
  const common::Status check = (*old)->Check();
  EXPECT_EQ(check.code(), common::StatusCode::kFailedPrecondition);
  EXPECT_NE(check.message().find("job 77's process " + std::to_string(::getpid())), std::string::npos)
      << check.message();
  old->reset();
  EXPECT_TRUE((*again)->Check().ok());
  again->reset();

  // A process on this host that no longer exists.
  const pid_t ended = fork();
  if (ended == 0) _exit(0);
  ASSERT_EQ(waitpid(ended, nullptr, 0), ended);
  SaveLeaseHolder gone = LiveHere();
  gone.process.pid = ended;
  Leave(gone);
  auto after_gone = SaveLease::Take(dir_.path(), ThisLeaseHolder());
  EXPECT_TRUE(after_gone.ok()) << after_gone.status().ToString();
  after_gone->reset();

  // Another host's lease untouched for longer than kStale; a lease that does not parse.
  Leave(Elsewhere("1234"));
  Age(static_cast<int>(SaveLease::kStale.count()) - 5);
  EXPECT_FALSE(SaveLease::Take(dir_.path(), ThisLeaseHolder()).ok()) << "taken over before it went stale";
  Age(static_cast<int>(SaveLease::kStale.count()) + 1);
  auto after_stale = SaveLease::Take(dir_.path(), ThisLeaseHolder());
  EXPECT_TRUE(after_stale.ok()) << after_stale.status().ToString();
  after_stale->reset();
  ASSERT_TRUE(common::WriteFileAtomic(Lease(), "{\"job\": ").ok());
  EXPECT_TRUE(SaveLease::Take(dir_.path(), ThisLeaseHolder()).ok());
}

// A job of this cluster that Slurm says has ended is taken over at once, not after kStale: a run killed without its
// handler (an OOM kill, a node lost) and its job over. `scontrol` here is a script on PATH that prints what a real one
// would, and notes each call.
TEST_F(SaveLeaseTest, AJobSlurmSaysHasEndedIsTakenOverAtOnce) {
  const fs::path bin = dir_.path() / "bin", calls = dir_.path() / "calls";
  fs::create_directories(bin);
  auto scontrol = [&](const std::string& body) {
    ASSERT_TRUE(common::WriteFileAtomic(bin / "scontrol", "#!/bin/sh\necho \"$*\" >>" + calls.string() + "\n" + body +
                                                          "\n").ok());
    fs::permissions(bin / "scontrol", fs::perms::owner_all);
  };
  // PATH as it was when the test ends, however it ends (an ASSERT returns early).
  struct RestorePath {
    std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
    ~RestorePath() { ::setenv("PATH", path.c_str(), 1); }
  } restore;
  ::setenv("PATH", (bin.string() + ":" + restore.path).c_str(), 1);
  SaveLeaseHolder me = ThisLeaseHolder();
  me.job = "78";
  me.cluster = "c1";
  auto taken_after = [&](const std::string& body) {
    scontrol(body);
    Leave(Elsewhere("77", "c1"));
    auto taken = SaveLease::Take(dir_.path(), me);
    std::string what = taken.ok() ? "taken" : taken.status().message();
    if (taken.ok()) taken->reset();
    return what;
  };
  EXPECT_EQ(taken_after("echo 'JobId=77 JobName=train UserId=u(1) JobState=CANCELLED Reason=None Dependency=(null)'"),
            "taken");
  EXPECT_EQ(*common::ReadFile(calls), "show job -o 77\n");
  EXPECT_EQ(taken_after("echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1"), "taken");
  EXPECT_EQ(taken_after("echo 'JobId=77 JobState=TIMEOUT Reason=TimeLimit'"), "taken");
  // Still running, pending again (requeued), or ending; scontrol unable to say: the lease stands.
  for (const char* body : {"echo 'JobId=77 JobState=RUNNING Reason=None'", "echo 'JobId=77 JobState=PENDING'",
                           "echo 'JobId=77 JobState=COMPLETING'", "echo 'slurm_load_jobs error: Unable to contact "
                           "slurm controller (connect failure)' >&2; exit 1", "echo 'JobId=77'", "exit 0"}) {
    const std::string refused = taken_after(body);
    EXPECT_NE(refused.find("is in use by job 77's process 4242 on node9"), std::string::npos) << body << ": " << refused;
  }
  // Another cluster's job 77 (clusters sharing a file system number their jobs apart), or a lease with no cluster:
  // this cluster's controller is not asked.
  fs::remove(calls);
  scontrol("echo 'JobId=77 JobState=COMPLETED'");
  for (const std::string& cluster : {std::string("c2"), std::string()}) {
    Leave(Elsewhere("77", cluster));
    EXPECT_FALSE(SaveLease::Take(dir_.path(), me).ok()) << "cluster '" << cluster << "'";
  }
  EXPECT_FALSE(fs::exists(calls)) << *common::ReadFile(calls);
}

TEST_F(SaveLeaseTest, ALeaseThatCannotBeReadIsAnErrorNamingIt) {
  fs::create_directories(Lease());
  auto taken = SaveLease::Take(dir_.path(), ThisLeaseHolder());
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("--save " + dir_.path().string() + ": "), std::string::npos)
      << taken.status().message();
  EXPECT_NE(taken.status().message().find("Is a directory"), std::string::npos) << taken.status().message();
}

TEST_F(SaveLeaseTest, AHeldLeaseIsTouchedWhileItsRunGoesOn) {
  auto lease = SaveLease::Take(dir_.path(), ThisLeaseHolder(), 20ms);
  ASSERT_TRUE(lease.ok());
  Age(100);
  for (int i = 0; i < 100 && SecondsSinceTouched() > 50; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_LT(SecondsSinceTouched(), 50) << "the lease was not touched";
  // One another run took over is not touched by this one.
  ASSERT_TRUE(common::WriteFileAtomic(Lease(), "{}").ok());
  Age(100);
  std::this_thread::sleep_for(100ms);
  EXPECT_GT(SecondsSinceTouched(), 50) << "this run touched another's lease";
  lease->reset();
  EXPECT_EQ(*common::ReadFile(Lease()), "{}") << "this run removed or changed another's lease";
}

}  // namespace
}  // namespace srunway::trainer
