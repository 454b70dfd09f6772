// Slurm as run-nccl-tests' scheduler.
#include "nccl-tests-wrapper/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "common/hostlist.h"
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
    std::string state = Field(result->output, "JobState");
    return state.empty() ? std::nullopt : std::optional<std::string>(state);
  }

  void Cancel(const std::string& job) override { (void)common::RunCommand({"scancel", job}); }

  // Held while its exclusion changes (Slurm takes ExcNodeList only from a pending job), then released: it cannot
  // start on a bad node in between.
  common::Status RequeueExcluding(const std::string& job, const std::vector<std::string>& exclude) override {
    SRUNWAY_ASSIGN_OR_RETURN(auto shown, Scontrol({"show", "job", job, "-o"}, job));
    std::set<std::string> excluded(exclude.begin(), exclude.end());
    if (const std::string old = Field(shown, "ExcNodeList"); !old.empty() && old != "(null)") {
      if (auto nodes = common::ExpandHostlist(old); nodes.ok()) excluded.insert(nodes->begin(), nodes->end());
    }
    const bool pending = Field(shown, "JobState") == "PENDING";
    if (!pending) SRUNWAY_RETURN_IF_ERROR(Scontrol({"requeuehold", job}, job).status());
    auto updated = Scontrol({"update", "JobId=" + job, "ExcNodeList=" + fmt::format("{}", fmt::join(excluded, ","))}, job);
    if (!pending) {
      auto released = Scontrol({"release", job}, job);
      if (updated.ok()) return released.status();
    }
    return updated.status();
  }

 private:
  // scontrol ARGS; its output, or its one line of complaint naming the job.
  static common::StatusOr<std::string> Scontrol(std::vector<std::string> args, const std::string& job) {
    args.insert(args.begin(), "scontrol");
    SRUNWAY_ASSIGN_OR_RETURN(auto result, common::RunCommand(args, true));
    if (result.exit_code != 0) {
      return common::FailedPrecondition("{} (job {}): {}", fmt::format("{}", fmt::join(args, " ")), job,
                                        common::Trim(result.output));
    }
    return result.output;
  }

  // KEY's value in `scontrol show job -o` output; empty when absent.
  static std::string Field(const std::string& shown, std::string_view key) {
    const std::string mark = " " + std::string(key) + "=";
    const size_t at = (" " + shown).find(mark);
    if (at == std::string::npos) return "";
    const size_t start = at + mark.size() - 1;
    return shown.substr(start, shown.find_first_of(" \n", start) - start);
  }
};

}  // namespace

std::unique_ptr<Scheduler> MakeSlurmScheduler() { return std::make_unique<SlurmScheduler>(); }

bool IsFinished(std::string_view state) {
  return !state.empty() && state != "PENDING" && state != "CONFIGURING" && state != "RUNNING" &&
         state != "COMPLETING" && state != "REQUEUED" && state != "RESIZING" && state != "SUSPENDED";
}

}  // namespace srunway::nccltests
