// Turns a topology, a network profile and a task's GPUs into the task's environment plan and CPU set.
#include "topology/plan.h"

#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace srunway::topology {
namespace {

constexpr uint16_t kGoogleGvnicVendor = 0x1ae0;
// Published A3 High TCPX bindings on a 52-core socket: skip 8 cores, 14 transmit, 14 receive.
constexpr int kTcpxSocketCores = 52, kTcpxSkipCores = 8, kTcpxTxCores = 14, kTcpxRxCores = 14;

std::vector<int> FlattenCores(const std::vector<std::vector<int>>& cores, size_t begin, size_t end) {
  std::vector<int> pus;
  for (size_t i = begin; i < end && i < cores.size(); ++i) pus.insert(pus.end(), cores[i].begin(), cores[i].end());
  std::sort(pus.begin(), pus.end());
  return pus;
}

constexpr uint16_t kClassEthernet = 0x0200, kClassInfiniBand = 0x0207;
// A NIC whose PCIe link is below this share of the fastest NIC's is an onboard or management port (1 GbE on
// PCIe 2.0 x1 reads 0.5 GB/s beside 31.5 for a 400G HCA on PCIe 4.0 x16), never a data NIC.
constexpr double kSlowLinkShare = 0.25;

// "0000:3b:00.1" -> "0000:3b:00": the functions of one adapter share it.
std::string_view AdapterOf(std::string_view pci) { return pci.substr(0, pci.rfind('.')); }

// The NICs that may carry GPU traffic: not an Ethernet function of an adapter that also has an InfiniBand
// function (the GPU path takes the InfiniBand port), and not a port whose PCIe link is far slower than the
// fastest NIC's (links hwloc does not know count as fast).
std::vector<size_t> DataNicCandidates(const Topology& topology) {
  std::set<std::string_view> ib_adapters;
  double fastest = 0;
  for (const Nic& nic : topology.nics) {
    if (nic.class_id == kClassInfiniBand) ib_adapters.insert(AdapterOf(nic.pci));
    fastest = std::max(fastest, nic.link_gbps);
  }
  std::vector<size_t> candidates;
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    const Nic& nic = topology.nics[i];
    if (nic.class_id == kClassEthernet && ib_adapters.contains(AdapterOf(nic.pci))) continue;
    if (nic.link_gbps > 0 && nic.link_gbps < kSlowLinkShare * fastest) continue;
    candidates.push_back(i);
  }
  return candidates;
}

// The candidates beside GPUs (sharing a PCIe switch with one); all candidates when none is.
std::vector<size_t> DataNics(const Topology& topology) {
  std::set<uint64_t> gpu_switches;
  for (const Gpu& gpu : topology.gpus) {
    if (gpu.switch_id != 0) gpu_switches.insert(gpu.switch_id);
  }
  const std::vector<size_t> candidates = DataNicCandidates(topology);
  std::vector<size_t> data;
  for (size_t i : candidates) {
    if (topology.nics[i].switch_id != 0 && gpu_switches.contains(topology.nics[i].switch_id)) data.push_back(i);
  }
  return data.empty() ? candidates : data;
}

// Google's pairing on A3: in each PCIe switch, GPUs and NICs sorted by PCI address, paired in order.
void PairWithinSwitches(const Topology& topology, const std::vector<size_t>& data, NodePlacement& placement,
                        std::vector<int>& load) {
  std::map<uint64_t, std::pair<std::vector<size_t>, std::vector<size_t>>> by_switch;  // gpu positions, nics
  for (size_t g = 0; g < topology.gpus.size(); ++g) {
    if (topology.gpus[g].switch_id != 0) by_switch[topology.gpus[g].switch_id].first.push_back(g);
  }
  for (size_t n : data) {
    auto it = by_switch.find(topology.nics[n].switch_id);
    if (it != by_switch.end()) it->second.second.push_back(n);
  }
  for (auto& [id, members] : by_switch) {
    auto& [gpus, nics] = members;
    if (nics.empty()) continue;
    std::sort(gpus.begin(), gpus.end(),
              [&](size_t a, size_t b) { return topology.gpus[a].pci < topology.gpus[b].pci; });
    for (size_t i = 0; i < gpus.size(); ++i) {
      GpuPlacement& gpu = placement.gpus[gpus[i]];
      if (nics.size() >= gpus.size()) {  // one or more NICs each
        for (size_t j = i * nics.size() / gpus.size(); j < (i + 1) * nics.size() / gpus.size(); ++j) {
          gpu.nics.push_back(nics[j]);
        }
      } else {  // several GPUs per NIC, balanced
        gpu.nics.push_back(nics[i * nics.size() / gpus.size()]);
      }
      for (size_t n : gpu.nics) ++load[n];
      gpu.nic_locality = "pcie-switch";
    }
  }
}

// GPUs without a NIC in their switch take the least-loaded data NIC of their NUMA node, else package, else any.
void PairByLocality(const Topology& topology, const std::vector<size_t>& data, NodePlacement& placement,
                    std::vector<int>& load) {
  for (size_t g = 0; g < topology.gpus.size(); ++g) {
    GpuPlacement& gpu = placement.gpus[g];
    if (!gpu.nics.empty() || data.empty()) continue;
    const Gpu& info = topology.gpus[g];
    struct Level {
      std::string_view name;
      std::function<bool(const Nic&)> matches;
    };
    const Level levels[] = {
        {"numa", [&](const Nic& nic) { return info.numa >= 0 && nic.numa == info.numa; }},
        {"package", [&](const Nic& nic) { return info.package >= 0 && nic.package == info.package; }},
        {"machine", [](const Nic&) { return true; }},
    };
    for (const Level& level : levels) {
      std::optional<size_t> best;
      for (size_t n : data) {
        if (level.matches(topology.nics[n]) && (!best || load[n] < load[*best])) best = n;
      }
      if (best) {
        gpu.nics.push_back(*best);
        ++load[*best];
        gpu.nic_locality = level.name;
        break;
      }
    }
  }
}

void ReserveNicCores(const Topology& topology, NodePlacement& placement) {
  std::map<int, std::pair<std::vector<int>, std::vector<int>>> per_numa;  // tx, rx PUs
  for (const NumaNode& node : topology.numa_nodes) {
    size_t n = node.cores.size();
    size_t skip = n * kTcpxSkipCores / kTcpxSocketCores;
    size_t tx = n * kTcpxTxCores / kTcpxSocketCores;
    size_t rx = n * kTcpxRxCores / kTcpxSocketCores;
    if (tx == 0 || rx == 0) {  // too few cores to split: NIC threads share them all with the tasks
      per_numa[node.id] = {FlattenCores(node.cores, 0, n), FlattenCores(node.cores, 0, n)};
      continue;
    }
    per_numa[node.id] = {FlattenCores(node.cores, skip, skip + tx), FlattenCores(node.cores, skip + tx, skip + tx + rx)};
  }
  std::set<int> reserved;
  for (size_t n : placement.data_nics) {
    const Nic& nic = topology.nics[n];
    auto it = per_numa.find(nic.numa);
    if (it == per_numa.end()) continue;  // NUMA unknown: no binding for this NIC
    const auto& [tx, rx] = it->second;
    placement.tx_bindings += fmt::format("{}{}:{}", placement.tx_bindings.empty() ? "" : ";", nic.name, FormatCpuList(tx));
    placement.rx_bindings += fmt::format("{}{}:{}", placement.rx_bindings.empty() ? "" : ";", nic.name, FormatCpuList(rx));
    const NumaNode* node = topology.FindNuma(nic.numa);
    if (node != nullptr && tx.size() + rx.size() < FlattenCores(node->cores, 0, node->cores.size()).size()) {
      reserved.insert(tx.begin(), tx.end());
      reserved.insert(rx.begin(), rx.end());
    }
  }
  placement.reserved_cpus.assign(reserved.begin(), reserved.end());
}

// Each GPU gets an equal share of its NUMA node's unreserved cores; when there are fewer cores than GPUs, all.
void ShareCores(const Topology& topology, NodePlacement& placement) {
  std::set<int> reserved(placement.reserved_cpus.begin(), placement.reserved_cpus.end());
  auto free_cores = [&](const NumaNode& node) {
    std::vector<std::vector<int>> cores;
    for (const auto& core : node.cores) {
      if (std::none_of(core.begin(), core.end(), [&](int pu) { return reserved.contains(pu); })) cores.push_back(core);
    }
    return cores;
  };
  std::map<int, std::vector<size_t>> gpus_per_numa;
  for (size_t g = 0; g < topology.gpus.size(); ++g) gpus_per_numa[topology.gpus[g].numa].push_back(g);
  for (const auto& [numa, gpus] : gpus_per_numa) {
    const NumaNode* node = topology.FindNuma(numa);
    if (node == nullptr) {  // NUMA unknown: the whole machine is as close as anything
      std::vector<int> all;
      for (int pu : topology.AllPus()) {
        if (!reserved.contains(pu)) all.push_back(pu);
      }
      for (size_t g : gpus) placement.gpus[g].cpus = all;
      continue;
    }
    auto cores = free_cores(*node);
    for (size_t i = 0; i < gpus.size(); ++i) {
      placement.gpus[gpus[i]].cpus = cores.size() >= gpus.size()
                                         ? FlattenCores(cores, i * cores.size() / gpus.size(),
                                                        (i + 1) * cores.size() / gpus.size())
                                         : FlattenCores(cores, 0, cores.size());
    }
  }
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ",") + name;
  return joined;
}

std::string ResolvePluginDir(const Profile& profile, const std::string& admin_dir, const PathExists& exists) {
  if (!admin_dir.empty()) return admin_dir;
  for (std::string_view dir : profile.plugin_dirs) {
    if (exists(std::string(dir))) return std::string(dir);
  }
  return profile.plugin_dirs.empty() ? std::string() : std::string(profile.plugin_dirs.front());
}

bool PluginInstalled(const Profile& profile, const std::string& admin_dir, const PathExists& exists) {
  std::string dir = ResolvePluginDir(profile, admin_dir, exists);
  return !dir.empty() && exists(dir + "/" + std::string(profile.plugin_file));
}

}  // namespace

NodePlacement PlaceNode(const Topology& topology, bool reserve_nic_cores) {
  NodePlacement placement;
  placement.data_nics = DataNics(topology);
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    if (std::find(placement.data_nics.begin(), placement.data_nics.end(), i) == placement.data_nics.end()) {
      placement.host_nics.push_back(i);
    }
  }
  for (const Gpu& gpu : topology.gpus) placement.gpus.push_back(GpuPlacement{gpu.index, {}, "none", {}});
  std::vector<int> load(topology.nics.size(), 0);
  PairWithinSwitches(topology, placement.data_nics, placement, load);
  PairByLocality(topology, placement.data_nics, placement, load);
  if (reserve_nic_cores) ReserveNicCores(topology, placement);
  ShareCores(topology, placement);
  return placement;
}

bool PathExistsOnDisk(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

ProfileId DetectProfile(const Topology& topology, const std::string& plugin_dir, const PathExists& exists,
                        std::string* why) {
  auto say = [&](std::string text) {
    if (why != nullptr) *why = std::move(text);
  };
  if (topology.gpus.empty()) {
    say("no GPU on this node");
    return ProfileId::kNone;
  }
  NodePlacement placement = PlaceNode(topology, false);
  size_t gvnics = 0;
  for (size_t n : placement.data_nics) gvnics += topology.nics[n].vendor_id == kGoogleGvnicVendor ? 1 : 0;
  const size_t gpus = topology.gpus.size();
  struct Candidate {
    ProfileId id;
    size_t nics;  // data NICs this machine type has for its GPUs
  };
  for (const Candidate& candidate : {Candidate{ProfileId::kA3Mega, gpus}, Candidate{ProfileId::kA3High, gpus / 2}}) {
    if (gvnics == 0 || gvnics != placement.data_nics.size() || gvnics != candidate.nics) continue;
    const Profile& profile = GetProfile(candidate.id);
    if (PluginInstalled(profile, plugin_dir, exists)) {
      say(fmt::format("{} GPUs and {} gVNIC data NICs, and {} is installed", gpus, gvnics, profile.description));
      return candidate.id;
    }
    say(fmt::format("{} GPUs and {} gVNIC data NICs look like {}, but no {} was found in {}; using generic, so NCCL "
                    "will not use GPUDirect", gpus, gvnics, profile.name, profile.plugin_file,
                    ResolvePluginDir(profile, plugin_dir, exists)));
    return ProfileId::kGeneric;
  }
  say(fmt::format("{} GPUs and {} data NICs: no vendor profile matches", gpus, placement.data_nics.size()));
  return ProfileId::kGeneric;
}

std::vector<int> TaskGpus(const std::vector<int>& visible, int local_rank, int local_tasks) {
  if (visible.size() <= 1 || local_tasks <= 1 || local_rank < 0) return visible;
  return {visible[static_cast<size_t>(local_rank) % visible.size()]};
}

namespace {

bool CountsFromZero(const std::vector<int>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != static_cast<int>(i)) return false;
  }
  return !ids.empty();
}

std::string Renumbered(const std::vector<int>& visible, const std::vector<int>& node, const std::vector<int>& step) {
  return fmt::format("CUDA_VISIBLE_DEVICES={} is node GPU {} (SLURM_STEP_GPUS={}; Slurm numbers devices from 0 "
                     "under ConstrainDevices)", fmt::join(visible, ","), fmt::join(node, ","), fmt::join(step, ","));
}

}  // namespace

std::vector<int> TaskNodeGpus(const std::vector<int>& task_visible, const StepGpus& step, int local_rank,
                              int local_tasks, std::string* note) {
  const size_t share = task_visible.size();
  std::vector<int> node = task_visible;
  if (!step.node.empty() && share < step.node.size() && CountsFromZero(task_visible) && local_rank >= 0 &&
      share * static_cast<size_t>(local_tasks) == step.node.size()) {
    // --gpus-per-task under ConstrainDevices: every task sees 0..share-1.
    const auto first = step.node.begin() + static_cast<std::ptrdiff_t>(share * static_cast<size_t>(local_rank));
    node.assign(first, first + static_cast<std::ptrdiff_t>(share));
    if (note != nullptr && node != task_visible) *note = Renumbered(task_visible, node, step.node);
    return node;  // the task's own share, all of it
  }
  if (!step.node.empty() && step.visible.size() == step.node.size() && CountsFromZero(step.visible) &&
             std::ranges::all_of(task_visible, [&](int i) { return i >= 0 && static_cast<size_t>(i) < step.node.size(); })) {
    for (int& id : node) id = step.node[static_cast<size_t>(id)];  // the step's devices numbered from 0
  }
  if (note != nullptr && node != task_visible) *note = Renumbered(task_visible, node, step.node);
  return TaskGpus(node, local_rank, local_tasks);
}

EnvPlan MakePlan(const Topology& topology, const PlanRequest& request) {
  EnvPlan plan;
  plan.gpus = request.task_gpus;
  ProfileId id = request.profile;
  if (id == ProfileId::kAuto) {
    std::string why;
    id = DetectProfile(topology, request.plugin_dir, request.exists, &why);
    plan.notes.push_back(fmt::format("auto chose {}: {}", ProfileName(id), why));
  }
  plan.profile = id;
  if (id == ProfileId::kNone) {
    // Asked for none: nothing at all. Chosen by auto: say so, so a job can see the plugin ran and what it chose.
    if (request.profile == ProfileId::kAuto) plan.env.push_back(EnvVar{"SRUNWAY_NETWORK_PROFILE", "none"});
    return plan;
  }
  const Profile& profile = GetProfile(id);
  NodePlacement placement = PlaceNode(topology, profile.reserves_nic_cores);

  // The task's GPUs in its order, their NICs and cores.
  std::vector<size_t> task_nics;
  std::set<int> cpus;
  for (int index : request.task_gpus) {
    auto it = std::find_if(placement.gpus.begin(), placement.gpus.end(), [&](auto& g) { return g.gpu == index; });
    if (it == placement.gpus.end()) {
      plan.notes.push_back(fmt::format("GPU {} is not in the topology of this node ({} GPUs): no NIC or CPU "
                                       "affinity for it", index, topology.gpus.size()));
      continue;
    }
    for (size_t n : it->nics) {
      if (std::find(task_nics.begin(), task_nics.end(), n) == task_nics.end()) task_nics.push_back(n);
    }
    cpus.insert(it->cpus.begin(), it->cpus.end());
    std::vector<std::string> names;
    for (size_t n : it->nics) names.push_back(topology.nics[n].name.empty() ? topology.nics[n].ib_device : topology.nics[n].name);
    plan.notes.push_back(fmt::format("GPU {} ({}): NIC {} ({}), CPUs {}", index,
                                     topology.gpus[static_cast<size_t>(it - placement.gpus.begin())].pci,
                                     names.empty() ? "none" : JoinNames(names), it->nic_locality,
                                     it->cpus.empty() ? "none" : FormatCpuList(it->cpus)));
  }
  for (size_t n : task_nics) plan.nics.push_back(topology.nics[n].name);
  plan.cpus.assign(cpus.begin(), cpus.end());

  // Every data NIC, the task's own first, then in the node's GPU order.
  std::vector<size_t> ordered = task_nics;
  for (const GpuPlacement& gpu : placement.gpus) {
    for (size_t n : gpu.nics) {
      if (std::find(ordered.begin(), ordered.end(), n) == ordered.end()) ordered.push_back(n);
    }
  }
  for (size_t n : placement.data_nics) {
    if (std::find(ordered.begin(), ordered.end(), n) == ordered.end()) ordered.push_back(n);
  }

  std::map<std::string_view, std::string> values;
  // InfiniBand/RoCE devices as NCCL_IB_HCA entries: the device and each active port ("mlx5_1:1"), or the device
  // alone when hwloc gave no port state. The profile puts "=" before the list: exact names, not prefixes.
  auto names_of = [&](const std::vector<size_t>& nics, bool ib) {
    std::vector<std::string> names;
    for (size_t n : nics) {
      const Nic& nic = topology.nics[n];
      if (ib && !nic.ib_device.empty()) {
        if (nic.active_ports.empty()) names.push_back(nic.ib_device);
        for (int port : nic.active_ports) names.push_back(fmt::format("{}:{}", nic.ib_device, port));
      }
      if (!ib && nic.ib_device.empty() && !nic.name.empty()) names.push_back(nic.name);
    }
    return JoinNames(names);
  };
  values["gpu_nics"] = names_of(ordered, false);
  values["task_nics"] = names_of(task_nics, false);
  values["task_hcas"] = names_of(task_nics, true);
  values["host_nic"] = placement.host_nics.empty() ? "" : topology.nics[placement.host_nics.front()].name;
  values["tx_bindings"] = placement.tx_bindings;
  values["rx_bindings"] = placement.rx_bindings;
  std::string plugin_dir = ResolvePluginDir(profile, request.plugin_dir, request.exists);
  values["plugin_dir"] = plugin_dir;
  if (!profile.plugin_file.empty() && !PluginInstalled(profile, request.plugin_dir, request.exists)) {
    plan.notes.push_back(fmt::format("warning: no {} in {}: NCCL will not load the {} network plugin",
                                     profile.plugin_file, plugin_dir, profile.name));
  }

  for (const ProfileVar& var : profile.vars) {
    std::string value;
    bool complete = true;
    std::string_view text = var.value;
    while (!text.empty()) {
      size_t open = text.find('{');
      value += text.substr(0, open);
      if (open == std::string_view::npos) break;
      size_t close = text.find('}', open);
      std::string_view key = text.substr(open + 1, close - open - 1);
      auto it = values.find(key);
      if (it == values.end() || it->second.empty()) complete = false;
      if (it != values.end()) value += it->second;
      text = text.substr(close + 1);
    }
    if (!complete) continue;  // nothing on this node fills it: leave NCCL's default
    plan.env.push_back(EnvVar{std::string(var.name), value, var.mode, var.enforced});
  }
  if (!request.nccl_topo_file.empty()) {
    plan.env.push_back(EnvVar{"NCCL_TOPO_FILE", request.nccl_topo_file, VarMode::kSet, false});
  }
  plan.env.push_back(EnvVar{"SRUNWAY_NETWORK_PROFILE", std::string(profile.name), VarMode::kSet, false});
  return plan;
}

}  // namespace srunway::topology
