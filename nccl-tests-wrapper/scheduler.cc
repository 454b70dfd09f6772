// Slurm as run-nccl-tests' scheduler.
#include "nccl-tests-wrapper/scheduler.h"

#include "common/parse.h"
#include "common/subprocess.h"

namespace srunway::nccltests {
namespace {

class SlurmScheduler final : public Scheduler {
 public:
  common::StatusOr<std::string> Submit(const std::string& script_path) override {
    SRUNWAY_ASSIGN_OR_RETURN(auto submitted, common::RunCommand({"sbatch", "--parsable", script_path}, true));
    if (submitted.exit_code != 0) {
      return common::Unavailable("sbatch {}: {}", script_path, common::Trim(submitted.output));
    }
    std::string job(common::Trim(submitted.output));
    return job.substr(0, job.find(';'));  // "123;cluster" on federated clusters
  }

  std::optional<std::string> State(const std::string& job) override {
    auto result = common::RunCommand({"scontrol", "show", "job", job, "-o"});
    if (!result.ok() || result->exit_code != 0) return std::nullopt;
    const size_t at = result->output.find("JobState=");
    if (at == std::string::npos) return std::nullopt;
    const size_t end = result->output.find(' ', at);
    return result->output.substr(at + 9, end - at - 9);
  }

  void Cancel(const std::string& job) override { (void)common::RunCommand({"scancel", job}); }
};

}  // namespace

std::unique_ptr<Scheduler> MakeSlurmScheduler() { return std::make_unique<SlurmScheduler>(); }

bool IsFinished(std::string_view state) {
  return !state.empty() && state != "PENDING" && state != "CONFIGURING" && state != "RUNNING" &&
         state != "COMPLETING" && state != "REQUEUED" && state != "RESIZING" && state != "SUSPENDED";
}

}  // namespace srunway::nccltests
