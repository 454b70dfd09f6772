// Tests for the heartbeat watchdog with its ranks on threads of this process (each its own watchdog thread and
// loopback connections, as across nodes): an abort reaches every other rank with its reason, phases change while
// the watchdog beats, and a clean end reports nothing. Also built with ThreadSanitizer (launcher/watchdog-tsan).
#include "launcher/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace srunway::launcher {
namespace {

using namespace std::chrono_literals;

// Where the ranks' broadcasts meet: the root posts a phase's value, the others wait for it.
class Rendezvous {
 public:
  void Post(const std::string& phase, const std::string& value) {
    {
      std::lock_guard lock(mutex_);
      values_[phase] = value;
    }
    posted_.notify_all();
  }
  common::StatusOr<std::string> Wait(const std::string& phase) {
    std::unique_lock lock(mutex_);
    if (!posted_.wait_for(lock, 5s, [&] { return values_.count(phase) > 0; })) {
      return common::DeadlineExceeded("nothing was broadcast during {}", phase);
    }
    return values_[phase];
  }

 private:
  std::mutex mutex_;
  std::condition_variable posted_;
  std::map<std::string, std::string> values_;
};

// One rank of a step whose ranks are threads on node1 (Broadcast is all the watchdog's start asks for).
class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(Rendezvous& rendezvous, int rank, int size) : rendezvous_(rendezvous) {
    identity_ = {rank, size, rank, size, 0, 1, "node1"};
    peers_.assign(static_cast<size_t>(size), Peer{"node1", "127.0.0.1", ""});
  }
  BootstrapKind kind() const override { return BootstrapKind::kEnv; }
  common::StatusOr<std::vector<std::string>> AllGather(std::string_view, std::string_view) override {
    return common::Internal("not part of this test");
  }
  common::StatusOr<std::string> Broadcast(std::string_view value, int root, std::string_view phase) override {
    if (identity_.rank == root) {
      rendezvous_.Post(std::string(phase), std::string(value));
      return std::string(value);
    }
    return rendezvous_.Wait(std::string(phase));
  }
  common::Status Barrier(std::string_view) override { return common::Internal("not part of this test"); }
  void Abort(const std::string&) override {}
  common::Status Finalize() override { return common::Status::Ok(); }

 private:
  Rendezvous& rendezvous_;
};

// A step of `size` ranks, each with its watchdog started (collectively, one thread per rank) and a record of the
// failures its watchdog reported.
struct Step {
  explicit Step(int size) : failures(static_cast<size_t>(size)) {
    for (int r = 0; r < size; ++r) bootstraps.push_back(std::make_unique<ThreadBootstrap>(rendezvous, r, size));
    watchdogs.resize(static_cast<size_t>(size));
    std::vector<std::thread> starting;
    for (int r = 0; r < size; ++r) {
      starting.emplace_back([this, r] {
        auto started = Watchdog::Start(*bootstraps[static_cast<size_t>(r)], 10s, [this, r](const std::string& why) {
          std::lock_guard lock(mutex);
          failures[static_cast<size_t>(r)].push_back(why);
        });
        EXPECT_TRUE(started.ok()) << "rank " << r << ": " << started.status().ToString();
        if (started.ok()) watchdogs[static_cast<size_t>(r)] = std::move(*started);
      });
    }
    for (std::thread& thread : starting) thread.join();
  }
  std::vector<std::string> FailuresOf(int rank) {
    std::lock_guard lock(mutex);
    return failures[static_cast<size_t>(rank)];
  }

  Rendezvous rendezvous;
  std::vector<std::unique_ptr<ThreadBootstrap>> bootstraps;
  std::vector<std::unique_ptr<Watchdog>> watchdogs;
  std::mutex mutex;
  std::vector<std::vector<std::string>> failures;
};

TEST(Watchdog, AnAbortReachesEveryOtherRankWithItsReason) {
  Step step(3);
  ASSERT_NE(step.watchdogs[2], nullptr);
  step.watchdogs[2]->Abort("rank 2 on node1: CUDA out of memory");
  for (int r : {0, 1}) {
    ASSERT_TRUE(step.watchdogs[r]->WaitFinished(5s)) << "rank " << r << " was not told";
    EXPECT_EQ(step.FailuresOf(r), std::vector<std::string>{"rank 2 on node1: CUDA out of memory"}) << "rank " << r;
  }
  EXPECT_TRUE(step.FailuresOf(2).empty()) << "the rank that aborted reports its own failure, not its watchdog";
}

TEST(Watchdog, PhasesChangeWhileItBeatsAndACleanEndReportsNothing) {
  Step step(3);
  ASSERT_NE(step.watchdogs[0], nullptr);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      for (int i = 0; i < 50; ++i) {
        step.watchdogs[static_cast<size_t>(r)]->SetPhase("step " + std::to_string(i));
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (std::thread& thread : ranks) thread.join();
  EXPECT_EQ(step.watchdogs[1]->Phase(), "step 49");
  // Peers say goodbye as they go; rank 0 is finished once all have.
  step.watchdogs[1].reset();
  step.watchdogs[2].reset();
  EXPECT_TRUE(step.watchdogs[0]->WaitFinished(5s));
  step.watchdogs[0].reset();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(step.FailuresOf(r).empty()) << "rank " << r << ": " << step.FailuresOf(r)[0];
}

}  // namespace
}  // namespace srunway::launcher
