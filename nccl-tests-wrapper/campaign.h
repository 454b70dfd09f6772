// A validation campaign: benchmark jobs submitted through a Scheduler, followed to the end, judged, and, when a
// run fails, bad-node isolation by node pairs. Progress goes to a reporter the program supplies; nothing here
// prints or exits.
#pragma once

#include <chrono>
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "nccl-tests-wrapper/job.h"
#include "nccl-tests-wrapper/scheduler.h"
#include "nccl-tests-wrapper/verdict.h"

namespace srunway::nccltests {

struct Submitted {
  std::string label;  // "the whole run", "node1,node2", "node2 alone"
  std::string job;
  std::string log;    // the job's output file, once Slurm's %j is known
  std::string state;  // the last state seen; empty before the first answer
  std::chrono::milliseconds run_timeout{0};  // see RunTimeout(); 0: none
  std::chrono::steady_clock::time_point started{};  // when it was first seen RUNNING
  bool hung = false;  // cancelled because it ran past run_timeout
};

struct BadNode {
  std::string node;
  std::string evidence;  // "3.10 GB/s at 64 MiB node3 with node1"
};

// What a finished benchmark job showed, in the words an admin acts on.
struct Finding {
  enum class Kind { kPass, kSlow, kWrong, kHung, kCrashed, kNoComm, kFailed };
  Kind kind = Kind::kFailed;
  Verdict verdict;
  std::string evidence;  // one line: "task 3 on node2: Segmentation fault", "no end within 40s of its start..."
  bool ok() const { return kind == Kind::kPass; }
};
// "pass", "slow", "wrong values", "hung", "crashed", "no communicator", "failed".
std::string_view KindName(Finding::Kind kind);

// The verdict on a finished job and what went wrong: a hang (cancelled at its run timeout), a rank that could not
// set up its communicator, a rank that crashed (srun's own line for it), wrong values, a figure below
// `threshold` (which does not apply to a host-memory run when it is a published GPU figure), or another failure.
Finding Examine(const Submitted& job, const Threshold& threshold);

// "12.34 GB/s at 8 GiB", or the verdict's reason when there is no figure.
std::string Figure(const Verdict& verdict);

class Campaign {
 public:
  using Clock = std::chrono::steady_clock;
  using Reporter = std::function<void(const std::string& line)>;

  // Scripts and logs go to `job_dir`, which must exist.
  Campaign(Scheduler& scheduler, std::string job_dir, Reporter report,
           std::chrono::milliseconds poll = std::chrono::milliseconds(500));

  // Writes the script for `spec` as job_dir/run-nccl-tests[-TAG].sbatch and submits it; its log is
  // job_dir/run-nccl-tests[-TAG]-JOBID.out.
  common::StatusOr<Submitted> Submit(JobSpec spec, const std::string& tag, const std::string& label);

  // Waits for every job, reporting state changes (and, with one job, each size as its log shows it). When the
  // deadline passes every unfinished job is cancelled and the error names them with their logs; likewise, as an
  // Aborted error, once `*stop` (see StopOn) is non-zero: the user's Ctrl-C must not leave nodes held.
  common::Status WaitAll(std::vector<Submitted>& jobs, Clock::time_point deadline);

  // A flag a signal handler sets (the signal's number) to end the waiting; null: none.
  void StopOn(const volatile std::sig_atomic_t* stop) { stop_ = stop; }

  // Bad-node isolation after a failed run over `nodes` (`whole` is what it showed): disjoint pairs in parallel (an
  // odd node out pairs with the first; with two nodes the whole run was the pair), then each node of a failed
  // pair that passed in no pair is re-tested with a node that passed, judged by `pair`. When no pair passed, each
  // suspect is re-tested alone, judged by `alone` (the machine's single-node figure) or, without one, against
  // the best of the suspects measured alone the same way. A hang, crash, failed communicator or wrong values
  // condemn a node in any re-test. Every suspect failing alone in the same way is a site-wide problem and names
  // nobody. The nodes that failed both times, with the evidence.
  common::StatusOr<std::vector<BadNode>> Isolate(const JobSpec& base, const std::vector<std::string>& nodes,
                                                 const Finding& whole, const Threshold& pair, const Threshold& alone,
                                                 Clock::time_point deadline);

 private:
  Scheduler& scheduler_;
  std::string job_dir_;
  Reporter report_;
  std::chrono::milliseconds poll_;
  const volatile std::sig_atomic_t* stop_ = nullptr;
};

// The verdict on a finished job's log; a job that ended other than COMPLETED never passes.
Verdict JudgeJob(const Submitted& job, const Threshold& threshold);

// The nodes a job ran on, sorted: the job script's "run-nccl-tests: job N on NODELIST" line (there even when no
// rank got as far as naming its device), else the hosts of the log's devices.
std::vector<std::string> NodesOfLog(const std::string& log_path);

}  // namespace srunway::nccltests
