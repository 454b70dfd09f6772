// Turns a topology, a network profile and a task's GPUs into the task's environment plan and CPU set.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "topology/profiles.h"
#include "topology/topology.h"

namespace srunway::topology {

// Where each GPU's traffic and threads should go on this node.
struct GpuPlacement {
  int gpu = -1;                 // GPU index
  std::vector<size_t> nics;     // indices into Topology::nics, closest first
  std::string_view nic_locality = "none";  // "pcie-switch", "numa", "package", "machine" or "none"
  std::vector<int> cpus;        // its share of the cores of its NUMA node (with hyperthread siblings)
};

struct NodePlacement {
  std::vector<size_t> data_nics;  // NICs beside GPUs (all NICs when none shares a PCIe switch with a GPU)
  std::vector<size_t> host_nics;  // the others: control and socket traffic
  std::vector<GpuPlacement> gpus; // in Topology::gpus order
  std::vector<int> reserved_cpus; // kept for NIC threads (TCPX), not given to tasks
  std::string tx_bindings;        // TCPX "eth1:8-21,112-125;..." in data NIC order; empty unless reserved
  std::string rx_bindings;
};

// Pairs every GPU with its closest data NICs (same PCIe switch, then NUMA node, then package, balanced when NICs
// are fewer than GPUs) and with cores of its NUMA node. With `reserve_nic_cores`, first sets aside TCPX
// transmit/receive cores on each socket that has data NICs.
NodePlacement PlaceNode(const Topology& topology, bool reserve_nic_cores);

using PathExists = std::function<bool(const std::string& path)>;
bool PathExistsOnDisk(const std::string& path);

// What `auto` means on this node: a3mega or a3high where the PCI layout and the installed plugin say so,
// generic where there are GPUs, none otherwise. `why` receives one sentence explaining the choice.
ProfileId DetectProfile(const Topology& topology, const std::string& plugin_dir, const PathExists& exists,
                        std::string* why);

// The GPUs a task will use, as node GPU indices. `visible` is what CUDA_VISIBLE_DEVICES lists. A task that sees
// several GPUs while sharing the node with other tasks uses the one at its local rank (as torchrun programs
// do); a task alone on the node uses all it sees.
std::vector<int> TaskGpus(const std::vector<int>& visible, int local_rank, int local_tasks);

// What slurmstepd saw of the step's GPUs before its tasks started: CUDA_VISIBLE_DEVICES and SLURM_STEP_GPUS.
// Under task/cgroup with ConstrainDevices=yes (slurm-gcp's cgroup.conf) Slurm numbers CUDA_VISIBLE_DEVICES from 0
// within the step, and within each task under --gpus-per-task, while SLURM_STEP_GPUS keeps the node's numbers.
struct StepGpus {
  std::vector<int> visible;  // the step's CUDA_VISIBLE_DEVICES
  std::vector<int> node;     // SLURM_STEP_GPUS; empty where Slurm gave the step no GPUs
};

// The node GPUs of a task that sees `task_visible`: a task whose devices Slurm numbered from 0 while the step has
// more GPUs is given the local_rank-th equal share of SLURM_STEP_GPUS (the order in which Slurm's --gpus-per-task
// binding hands them out), all of it; otherwise, in a step numbered from 0 each index maps to SLURM_STEP_GPUS, and
// TaskGpus chooses among them. `note` receives a sentence when the numbers were translated.
std::vector<int> TaskNodeGpus(const std::vector<int>& task_visible, const StepGpus& step, int local_rank,
                              int local_tasks, std::string* note);

struct EnvVar {
  std::string name;
  std::string value;
  VarMode mode = VarMode::kSet;
  bool enforced = false;
};

struct EnvPlan {
  ProfileId profile = ProfileId::kNone;
  std::vector<int> gpus;                 // the task's GPUs, in its order
  std::vector<std::string> nics;         // the NICs closest to them, in that order
  std::vector<EnvVar> env;
  std::vector<int> cpus;                 // where to pin the task; empty: leave its affinity alone
  std::vector<std::string> notes;        // decisions and warnings, one sentence each
};

struct PlanRequest {
  ProfileId profile = ProfileId::kAuto;
  std::vector<int> task_gpus;
  std::string plugin_dir;                // the admin's plugin_path=; empty: the profile's usual places
  PathExists exists = PathExistsOnDisk;
  std::string nccl_topo_file;            // exported as NCCL_TOPO_FILE when set
};

// Never fails for a valid profile; a GPU missing from the topology becomes a note, not an error.
EnvPlan MakePlan(const Topology& topology, const PlanRequest& request);

}  // namespace srunway::topology
