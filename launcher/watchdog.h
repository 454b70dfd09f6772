// Heartbeat watchdog: after the bootstrap, every rank keeps a connection to rank 0 and beats on it. A rank that
// dies (its connection closes) or falls silent is reported to every rank, which can then end the step instead of
// waiting forever in a collective. Works under every bootstrap backend; PMIx alone cannot say which rank died.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "launcher/bootstrap.h"
#include "launcher/comm.h"

namespace srunway::launcher {

class Watchdog {
 public:
  // Called once, on the watchdog's thread, with e.g. "rank 3 on node2 died during first collective".
  using OnFailure = std::function<void(const std::string& why)>;

  // Collective over the bootstrap: rank 0 opens a port and shares it, the others connect. `silence` is how long
  // a rank may go without a heartbeat (it beats every `silence` / 10).
  static common::StatusOr<std::unique_ptr<Watchdog>> Start(Bootstrap& bootstrap, std::chrono::milliseconds silence,
                                                           OnFailure on_failure);
  ~Watchdog();  // a clean goodbye: peers are not told of a death

  // Whether the watchdog's work is over: on rank 0, every peer said goodbye (or a failure was reported); on the
  // others, rank 0 did. Always true for one rank.
  bool Finished() const { return finished_; }
  // Waits up to `timeout` for Finished(); returns it.
  bool WaitFinished(std::chrono::milliseconds timeout);

  // Names what this rank is doing, for the failure message.
  void SetPhase(std::string phase);
  std::string Phase();
  // Tells every rank that this one failed (`why` names this rank and the failure), so they end too instead of
  // waiting for it; returns once the message is on its way, or after a second.
  void Abort(const std::string& why);
  // While a CommGuard lives, a known failure aborts its communicator (ncclCommAbort) before it is reported, so no
  // GPU kernel is left spinning on a dead peer. The guard unregisters itself when it goes, and the watchdog reads
  // the pointer and aborts under the same lock, so a communicator destroyed after its guard is never reached:
  // declare the guard after the communicator.
  class CommGuard {
   public:
    CommGuard(CommGuard&& other) noexcept : watchdog_(std::exchange(other.watchdog_, nullptr)) {}
    CommGuard& operator=(CommGuard&&) = delete;
    ~CommGuard();

   private:
    friend class Watchdog;
    explicit CommGuard(Watchdog* watchdog) : watchdog_(watchdog) {}
    Watchdog* watchdog_;
  };
  [[nodiscard]] CommGuard Guard(Comm& comm);

 private:
  Watchdog() = default;
  void RunRoot(std::chrono::milliseconds silence);
  void RunPeer(std::chrono::milliseconds interval);
  void Fail(const std::string& why);
  std::string TakeAnnouncement();

  Bootstrap* bootstrap_ = nullptr;
  OnFailure on_failure_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> finished_{false};  // set through MarkFinished
  std::mutex finished_mutex_;
  std::condition_variable finished_changed_;
  void MarkFinished();
  std::mutex guard_mutex_;
  Comm* guarded_ = nullptr;  // under guard_mutex_
  std::mutex phase_mutex_;
  std::string phase_ = "startup";
  std::string announce_;                  // set by Abort(), sent by the thread; under phase_mutex_
  std::atomic<bool> announced_{false};
  std::vector<int> fds_;  // rank 0: one per peer rank; others: fds_[0] is the connection to rank 0
  int wake_fd_[2] = {-1, -1};  // written on shutdown to end the thread's poll at once
  std::thread thread_;
};

// Test knobs for the failure paths: with SRUNWAY_FAULT_KILL_RANK=R and SRUNWAY_FAULT_KILL_PHASE=P in the
// environment, rank R kills itself with SIGKILL 0.3 s after it enters phase P; with SRUNWAY_FAULT_STALL_RANK and
// SRUNWAY_FAULT_STALL_PHASE it stays alive but stops there for an hour.
void MaybeInjectFault(int rank, std::string_view phase);

}  // namespace srunway::launcher
