// Where a task is pinned: the binding its user asked for wins; otherwise the cores of its GPU, within what Slurm
// lets it use. Kept out of the SPANK plugin so it is tested without slurmstepd.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "topology/plugin_config.h"

namespace srunway::topology {

struct BindingRequest {
  GpuAffinity affinity = GpuAffinity::kClosest;  // --gpu-affinity
  // The step's SLURM_CPU_BIND_TYPE as requested (srun or sbatch --cpu-bind, or SLURM_CPU_BIND in the submit
  // environment), read in slurmstepd before the tasks start: Slurm's task/affinity later sets the same variables
  // in every task for the binding it computes itself, which is not the user's choice. nullopt: none asked.
  std::optional<std::string> user_cpu_bind;
  std::vector<int> gpu_cpus;  // the plan's CPUs for the task's GPUs
  std::vector<int> allowed;   // the CPUs Slurm allows the step on this node (its cpuset), not the core that
                              // task/affinity picked for the task
};

struct BindingDecision {
  std::vector<int> cpus;  // pin the task to these; empty: leave it as Slurm left it
  std::string note;       // why, one sentence
  bool warning = false;   // worth a line on the job's stderr (from the first task of a node)
};

BindingDecision DecideBinding(const BindingRequest& request);

}  // namespace srunway::topology
