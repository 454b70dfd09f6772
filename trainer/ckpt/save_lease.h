// One run at a time saves in a --save directory. Two runs saving in one (a job array whose tasks share --save, a
// script submitted twice) wrote their shards into the same staging directories and committed each other's: a
// checkpoint mixed from two runs, every checksum good. Rank 0 holds a lease on the directory, a small file that names
// the run and that a thread of it touches every few seconds; another run finds it and is refused, naming the holder,
// until the holder has ended (it removes the file) or is known to be gone.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/process_mark.h"
#include "common/status.h"

namespace srunway::trainer {

// Who holds a lease: the Slurm job (empty outside Slurm), the process, a nonce that tells two holders apart, and
// the Slurm cluster the job ran on (empty outside Slurm: clusters that share a file system number jobs apart).
struct SaveLeaseHolder {
  std::string job;
  common::ProcessMark process;
  std::string nonce;
  std::string cluster;
};

// This process as a holder: SLURM_JOB_ID, the process mark, a random nonce, SLURM_CLUSTER_NAME.
SaveLeaseHolder ThisLeaseHolder();

class SaveLease {
 public:
  static constexpr std::chrono::seconds kBeat{10};
  // A lease untouched for this long is taken for a dead run's (a node lost, a SIGKILL).
  static constexpr std::chrono::seconds kStale{120};
  static constexpr const char* kFileName = ".srunway-save-lease.json";

  // Takes the lease on `dir` for `me`, or says who holds it: FailedPrecondition, "--save DIR is in use by job 1234's
  // process 4242 on node3 (its lease touched 3 s ago): ...". A lease is taken over when its holder is known to have
  // ended: the same Slurm job (a job requeued or restarted runs again), a process on this host that no longer exists,
  // a job of this Slurm cluster that `scontrol show job` says has ended (or no longer knows), or a lease left
  // untouched for kStale; a file that does not parse is taken over too. `beat` is how often the lease is touched
  // (kBeat; tests give less).
  static common::StatusOr<std::unique_ptr<SaveLease>> Take(const std::filesystem::path& dir,
                                                           const SaveLeaseHolder& me,
                                                           std::chrono::milliseconds beat = kBeat);
  // Stops touching the lease and removes it when it is still this run's.
  ~SaveLease();
  SaveLease(const SaveLease&) = delete;
  SaveLease& operator=(const SaveLease&) = delete;

  // Whether the lease is still this run's, before each save: FailedPrecondition naming the run that took it over
  // (it judged this one dead: untouched for kStale), so that this run stops rather than save beside it.
  common::Status Check() const;

 private:
  SaveLease(std::filesystem::path path, std::string contents, std::chrono::milliseconds beat);
  void Touch();

  std::filesystem::path path_;
  std::string contents_;  // what this run wrote there
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread beating_;
};

}  // namespace srunway::trainer
