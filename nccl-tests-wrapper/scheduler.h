// The batch scheduler as run-nccl-tests needs it: submit a script, ask a job's state, cancel it. Slurm's is the
// real one; the tests drive the same submission, waiting and isolation code through a fake.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::nccltests {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Submits the batch script at `script_path`; returns the job id.
  virtual common::StatusOr<std::string> Submit(const std::string& script_path) = 0;
  // The job's state in Slurm's words (PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, ...); nullopt when the
  // scheduler cannot say right now (a slow controller): the caller asks again.
  virtual std::optional<std::string> State(const std::string& job) = 0;
  virtual void Cancel(const std::string& job) = 0;
  // Puts `job` back in the queue with `exclude` added to its excluded nodes, so it resumes elsewhere (from its
  // last checkpoint, for a training job that saves them). A pending job only gets the exclusion.
  virtual common::Status RequeueExcluding(const std::string& job, const std::vector<std::string>& exclude) = 0;
};

// sbatch --parsable, scontrol show job -o, scancel; each through RunCommand's deadline.
std::unique_ptr<Scheduler> MakeSlurmScheduler();

// Whether a job in this state is over (COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...).
bool IsFinished(std::string_view state);

}  // namespace srunway::nccltests
