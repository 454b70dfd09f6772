// The SPANK plugin srunway.so: dispatch only. Options and plugstack arguments are parsed, and plans computed,
// by topology/; every entry point runs its body through a noexcept wrapper (Guarded) and never throws, aborts or
// blocks inside slurmstepd.
#include <sched.h>

extern "C" {
#include <slurm/spank.h>
}

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "topology/binding.h"
#include "topology/nccl_topo.h"
#include "topology/plan.h"
#include "topology/plugin_config.h"
#include "topology/topology.h"

// Built with -fvisibility=hidden; only these symbols (also listed in srunway.map) leave the plugin.
#define SRUNWAY_SPANK_EXPORT __attribute__((visibility("default")))

extern "C" {
// SPANK_PLUGIN() gives these internal linkage in C++; define them by hand (see the design notes).
SRUNWAY_SPANK_EXPORT extern const char plugin_name[] = "srunway";
SRUNWAY_SPANK_EXPORT extern const char plugin_type[] = "spank";
SRUNWAY_SPANK_EXPORT extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
SRUNWAY_SPANK_EXPORT extern const unsigned int spank_plugin_version = 1;
}

namespace {

using namespace srunway;

constexpr int kOptionProfile = 1;
constexpr int kOptionGpuAffinity = 2;
constexpr int kTopologyTimeoutMs = 10000;

// Per-process state: slurmstepd loads the plugin once per step; each task inherits it across fork.
struct PluginState {
  topology::PluginConfig config;
  std::optional<std::string> user_profile;
  topology::GpuAffinity affinity = topology::GpuAffinity::kClosest;
  std::optional<topology::ProfileId> profile;
  std::optional<topology::Topology> topology;
  std::string nccl_topo_file;  // written for this step on this node, removed at its end
  uid_t job_uid = 0;
  std::optional<std::string> user_cpu_bind;  // the binding the step asked for, before Slurm's task plugin ran
  std::vector<int> step_cpus;  // slurmstepd's CPUs: the step's cpuset under task/cgroup, else the whole node
  topology::StepGpus step_gpus;  // the step's GPUs as slurmstepd saw them, before Slurm set each task's
};

PluginState& State() {
  static PluginState state;
  return state;
}

int OnOption(int option, const char* optarg, int remote) noexcept;

char kProfileName[] = "network-profile";
char kProfileArg[] = "auto|a3mega|a3high|generic|none";
char kProfileUsage[] = "srunway: NCCL network profile for each task (default: the site's, usually auto)";
char kAffinityName[] = "gpu-affinity";
char kAffinityArg[] = "closest|none";
char kAffinityUsage[] = "srunway: pin each task to the cores next to its GPU (closest, default) or not (none)";

spank_option kOptions[] = {
    {kProfileName, kProfileArg, kProfileUsage, 1, kOptionProfile, OnOption},
    {kAffinityName, kAffinityArg, kAffinityUsage, 1, kOptionGpuAffinity, OnOption},
};

std::optional<std::string> JobEnv(spank_t spank, const std::string& name) {
  std::vector<char> buffer(4096);
  spank_err_t result = spank_getenv(spank, name.c_str(), buffer.data(), static_cast<int>(buffer.size()));
  if (result == ESPANK_NOSPACE) {
    buffer.resize(1 << 16);
    result = spank_getenv(spank, name.c_str(), buffer.data(), static_cast<int>(buffer.size()));
  }
  if (result != ESPANK_SUCCESS) return std::nullopt;
  return std::string(buffer.data());
}

int OnOption(int option, const char* optarg, int remote) noexcept {
  try {
    std::string value = optarg != nullptr ? optarg : "";
    PluginState& state = State();
    if (option == kOptionProfile) {
      auto chosen = topology::ChooseProfile(state.config, value);
      if (!chosen.ok()) {
        slurm_error("srunway: %s", chosen.status().message().c_str());
        return -1;
      }
      state.user_profile = value;
    } else if (option == kOptionGpuAffinity) {
      auto affinity = topology::ParseGpuAffinity(value);
      if (!affinity.ok()) {
        slurm_error("srunway: %s", affinity.status().message().c_str());
        return -1;
      }
      state.affinity = *affinity;
    }
    (void)remote;
    return 0;
  } catch (...) {
    slurm_error("srunway: internal error while parsing an option");
    return -1;
  }
}

// The calling process's CPUs.
std::vector<int> CurrentCpus() {
  cpu_set_t current;
  CPU_ZERO(&current);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof current, &current) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &current)) cpus.push_back(cpu);
  }
  return cpus;
}

// Pins the calling task to `cpus`; says why when it cannot.
std::string PinTask(const std::vector<int>& cpus) {
  cpu_set_t target;
  CPU_ZERO(&target);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &target);
  }
  if (sched_setaffinity(0, sizeof target, &target) != 0) return "sched_setaffinity failed";
  return "";
}

int TaskInit(spank_t spank) {
  PluginState& state = State();
  if (!state.profile || *state.profile == topology::ProfileId::kNone || !state.topology) return 0;
  int local_rank = 0;
  uint32_t local_tasks = 1;
  spank_get_item(spank, S_TASK_ID, &local_rank);
  spank_get_item(spank, S_JOB_LOCAL_TASK_COUNT, &local_tasks);
  const bool first_task = local_rank == 0;

  std::vector<int> visible;
  if (auto devices = JobEnv(spank, "CUDA_VISIBLE_DEVICES")) {
    auto parsed = topology::ParseVisibleDevices(*devices);
    if (!parsed.ok()) {
      if (first_task) slurm_spank_log("srunway: warning: %s; no GPU affinity", parsed.status().message().c_str());
    } else {
      visible = *parsed;
    }
  }
  topology::PlanRequest request;
  request.profile = *state.profile;
  std::string renumbered;
  request.task_gpus = topology::TaskNodeGpus(visible, state.step_gpus, local_rank, static_cast<int>(local_tasks),
                                             &renumbered);
  if (!renumbered.empty()) slurm_info("srunway: task %d: %s", local_rank, renumbered.c_str());
  request.plugin_dir = state.config.plugin_path;
  request.nccl_topo_file = state.nccl_topo_file;
  topology::EnvPlan plan = topology::MakePlan(*state.topology, request);
  bool verbose = JobEnv(spank, "SRUNWAY_LOG").value_or("") == "debug";
  for (const std::string& note : plan.notes) {
    slurm_info("srunway: task %d: %s", local_rank, note.c_str());
    if (verbose || (first_task && note.starts_with("warning"))) slurm_spank_log("srunway: task %d: %s", local_rank, note.c_str());
  }

  auto decisions = topology::DecideEnv(plan, [&](const std::string& name) { return JobEnv(spank, name); },
                                       state.config.forced);
  if (!decisions.ok()) {
    slurm_error("srunway: %s", decisions.status().message().c_str());
    return -1;
  }
  for (const auto& decision : *decisions) {
    if (decision.action == topology::EnvDecision::Action::kKeepUser) continue;
    if (decision.action == topology::EnvDecision::Action::kOverrideUser && first_task) {
      slurm_spank_log("srunway: %s=%s replaced by %s: the %s profile requires it", decision.name.c_str(),
                      decision.user_value.c_str(), decision.value.c_str(), topology::ProfileName(plan.profile).data());
    }
    if (spank_setenv(spank, decision.name.c_str(), decision.value.c_str(), 1) != ESPANK_SUCCESS) {
      slurm_error("srunway: cannot set %s in the task's environment", decision.name.c_str());
      return -1;
    }
  }

  // The user's own CPU binding (srun or sbatch --cpu-bind) wins; Slurm's computed one does not count as a choice.
  topology::BindingRequest binding{state.affinity, state.user_cpu_bind, plan.cpus, state.step_cpus};
  topology::BindingDecision decision = topology::DecideBinding(binding);
  if (!decision.cpus.empty()) {
    if (std::string problem = PinTask(decision.cpus); !problem.empty()) {
      decision.note = "no CPU binding: " + problem;
      decision.warning = true;
    } else {
      spank_setenv(spank, "SRUNWAY_CPU_BIND", topology::FormatCpuList(decision.cpus).c_str(), 1);
    }
  }
  slurm_info("srunway: task %d: %s", local_rank, decision.note.c_str());
  if (verbose || (first_task && decision.warning)) {
    slurm_spank_log("srunway: task %d: %s", local_rank, decision.note.c_str());
  }
  return 0;
}

// An entry point's body, run so that nothing escapes into slurmstepd: an exception is one error line naming the
// entry point (and what follows from it) and `failed`. (The entry points themselves cannot be noexcept: spank.h
// declares them through spank_f, without it, and clang holds a definition to its declaration.)
template <typename Body>
int Guarded(const char* entry, const char* consequence, int failed, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    slurm_error("srunway: internal error in %s%s", entry, consequence);
    return failed;
  }
}

// slurm_spank_user_init's work, remote only: the step's CPUs, GPUs and profile, the topology and NCCL's file.
int UserInit(spank_t spank) {
  if (!spank_remote(spank)) return 0;
  PluginState& state = State();
  // The step's environment as srun sent it: Slurm's task/affinity rewrites SLURM_CPU_BIND_TYPE in each task for
  // the binding it computes itself, so the user's request is read here, before any task starts.
  state.user_cpu_bind = JobEnv(spank, "SLURM_CPU_BIND_TYPE");
  // What Slurm allows the step is slurmstepd's own mask (task/cgroup moves it into the step's cpuset), not the
  // task's mask: task/affinity has already narrowed that to the core it picked when task_init runs.
  state.step_cpus = CurrentCpus();
  for (auto [name, ids] : {std::pair{"CUDA_VISIBLE_DEVICES", &state.step_gpus.visible},
                           std::pair{"SLURM_STEP_GPUS", &state.step_gpus.node}}) {
    auto parsed = topology::ParseVisibleDevices(JobEnv(spank, name).value_or(""));
    if (parsed.ok()) *ids = *parsed;
  }
  auto profile = topology::ChooseProfile(state.config, state.user_profile);
  if (!profile.ok()) {
    slurm_error("srunway: %s", profile.status().message().c_str());
    return -1;
  }
  state.profile = *profile;
  if (*profile == topology::ProfileId::kNone) return 0;
  // Once per node per step; every task of the step is forked from here and inherits it.
  // In a helper process started with posix_spawn (never fork in threaded slurmstepd), with a deadline: a corrupt
  // file or a stuck hwloc must not take slurmstepd down.
  const std::string& helper = state.config.topo_helper;
  auto topo = topology::LoadTopologyIsolated(state.config.topology_xml, kTopologyTimeoutMs,
                                             helper.empty() ? topology::DefaultTopologyHelper() : helper);
  if (!topo.ok()) {
    slurm_spank_log("srunway: warning: %s; tasks run without GPU/NIC affinity", topo.status().message().c_str());
    return 0;
  }
  state.topology = std::move(*topo);
  if (state.config.nccl_topo_file) {
    gid_t gid = 0;
    spank_get_item(spank, S_JOB_UID, &state.job_uid);
    spank_get_item(spank, S_JOB_GID, &gid);
    auto path = topology::WriteNcclTopologyFile(*state.topology, state.config.tmpdir, state.job_uid, gid);
    if (path.ok()) {
      state.nccl_topo_file = *path;
    } else {
      slurm_spank_log("srunway: warning: no NCCL_TOPO_FILE: %s", path.status().message().c_str());
    }
  }
  return 0;
}

}  // namespace

extern "C" SRUNWAY_SPANK_EXPORT int slurm_spank_init(spank_t spank, int argc, char** argv) {
  return Guarded("slurm_spank_init", "", -1, [&] {
    for (spank_option& option : kOptions) {
      if (spank_option_register(spank, &option) != ESPANK_SUCCESS) {
        slurm_error("srunway: cannot register --%s", option.name);
        return -1;
      }
    }
    std::vector<std::string> args(argv, argv + argc);
    auto config = topology::ParsePluginArgs(args);
    if (!config.ok()) {
      slurm_error("srunway: plugstack.conf: %s", config.status().message().c_str());
      return -1;
    }
    State().config = *config;
    return 0;
  });
}

extern "C" SRUNWAY_SPANK_EXPORT int slurm_spank_user_init(spank_t spank, int, char**) {
  return Guarded("slurm_spank_user_init", "; tasks run without GPU/NIC affinity", 0, [&] { return UserInit(spank); });
}

extern "C" SRUNWAY_SPANK_EXPORT int slurm_spank_task_init(spank_t spank, int, char**) {
  return Guarded("slurm_spank_task_init", "", -1, [&] { return spank_remote(spank) ? TaskInit(spank) : 0; });
}

extern "C" SRUNWAY_SPANK_EXPORT int slurm_spank_exit(spank_t spank, int, char**) {
  return Guarded("slurm_spank_exit", "", 0, [&] {
    PluginState& state = State();
    if (spank_remote(spank) && !state.nccl_topo_file.empty()) {
      topology::RemoveNcclTopologyFile(state.nccl_topo_file, state.job_uid);
    }
    return 0;
  });
}
