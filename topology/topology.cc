// A node's GPUs, NICs, NUMA nodes and cores, read once from hwloc (live or XML) into plain data.
#include "topology/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "common/fs.h"
#include "common/json.h"
#include "common/parse.h"
#include "common/subprocess.h"

namespace srunway::topology {
namespace {

constexpr uint16_t kNvidiaVendor = 0x10de;

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::string PciAddressOf(hwloc_obj_t obj) {
  const auto& pci = obj->attr->pcidev;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.domain, pci.bus, pci.dev, pci.func);
}

// The PUs of `set`; none for an infinite or absurdly large set, which an XML file can give and whose walk would
// never end.
std::vector<int> PusOf(hwloc_const_bitmap_t set) {
  constexpr int kMaxPus = 1 << 16;
  std::vector<int> pus;
  if (set == nullptr || hwloc_bitmap_weight(set) < 0 || hwloc_bitmap_last(set) >= kMaxPus) return pus;
  unsigned index;
  hwloc_bitmap_foreach_begin(index, set) pus.push_back(static_cast<int>(index));
  hwloc_bitmap_foreach_end();
  return pus;
}

struct Locality {
  int numa = -1;
  int package = -1;
  uint64_t switch_id = 0;
  std::string switch_pci;
};

// Where an I/O object sits: the NUMA node and package of its CPU-side parent, and the top switch above it.
Locality LocalityOf(hwloc_topology_t topology, hwloc_obj_t obj) {
  Locality locality;
  hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(topology, obj);
  if (cpu_side != nullptr && cpu_side->nodeset != nullptr && hwloc_bitmap_weight(cpu_side->nodeset) == 1) {
    locality.numa = hwloc_bitmap_first(cpu_side->nodeset);
  }
  hwloc_obj_t package = cpu_side;
  while (package != nullptr && package->type != HWLOC_OBJ_PACKAGE) package = package->parent;
  if (package != nullptr) locality.package = static_cast<int>(package->os_index);
  for (hwloc_obj_t up = obj->parent; up != nullptr && up->type == HWLOC_OBJ_BRIDGE; up = up->parent) {
    // hwloc stores whatever number an XML file gave; read it as an integer, not as the enum it may not be.
    std::underlying_type_t<hwloc_obj_bridge_type_t> upstream;
    std::memcpy(&upstream, &up->attr->bridge.upstream_type, sizeof upstream);
    if (upstream == HWLOC_OBJ_BRIDGE_PCI) {
      locality.switch_id = up->gp_index;
      const auto& pci = up->attr->bridge.upstream.pci;
      locality.switch_pci = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.domain, pci.bus, pci.dev, pci.func);
    }
  }
  return locality;
}

// The ports hwloc's OpenFabrics device reports ACTIVE: its infos "Port<N>State" hold the first digit of sysfs's
// ports/<N>/state, and 4 is IB_PORT_ACTIVE.
std::vector<int> ActivePorts(hwloc_obj_t osdev) {
  std::vector<int> ports;
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    std::string_view name = osdev->infos[i].name != nullptr ? osdev->infos[i].name : "";
    std::string_view value = osdev->infos[i].value != nullptr ? osdev->infos[i].value : "";
    if (!name.starts_with("Port") || !name.ends_with("State") || !value.starts_with('4')) continue;
    auto port = common::ParseInt(name.substr(4, name.size() - 9), name, 1, 255);
    if (port.ok()) ports.push_back(static_cast<int>(*port));
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

// hwloc's CUDA ("cuda3") or NVML ("nvml3") device below a GPU gives its index; -1 when neither is there.
int IndexFromOsDevice(hwloc_obj_t pcidev) {
  for (hwloc_obj_t child = pcidev->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
    std::string_view name = child->name;
    for (std::string_view prefix : {"cuda", "nvml"}) {
      if (name.starts_with(prefix)) {
        auto index = common::ParseInt(name.substr(prefix.size()), name, 0, 1 << 16);
        if (index.ok()) return static_cast<int>(*index);
      }
    }
  }
  return -1;
}

Topology Extract(hwloc_topology_t topology, std::string source) {
  Topology result;
  result.source = std::move(source);
  std::vector<std::pair<Gpu, int>> gpus;  // with the index hwloc's OS devices gave, or -1
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(topology, nullptr); obj != nullptr;
       obj = hwloc_get_next_pcidev(topology, obj)) {
    const auto& pci = obj->attr->pcidev;
    Locality locality = LocalityOf(topology, obj);
    if ((pci.class_id >> 8) == 0x03 && pci.vendor_id == kNvidiaVendor) {
      gpus.push_back({Gpu{-1, PciAddressOf(obj), locality.numa, locality.package, locality.switch_id,
                          locality.switch_pci},
                      IndexFromOsDevice(obj)});
      continue;
    }
    Nic nic{"", "", PciAddressOf(obj), pci.vendor_id, pci.class_id, locality.numa, locality.package,
            locality.switch_id, locality.switch_pci, std::isfinite(pci.linkspeed) ? pci.linkspeed : 0.0, {}};
    for (hwloc_obj_t child = obj->io_first_child; child != nullptr; child = child->next_sibling) {
      if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
      if (child->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && nic.name.empty()) nic.name = child->name;
      if (child->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && nic.ib_device.empty()) {
        nic.ib_device = child->name;
        nic.active_ports = ActivePorts(child);
      }
    }
    if (!nic.name.empty() || !nic.ib_device.empty()) result.nics.push_back(std::move(nic));
  }

  // CUDA numbers GPUs in PCI order when CUDA_DEVICE_ORDER=PCI_BUS_ID, as Slurm's gres order does; use hwloc's
  // own CUDA/NVML numbering only when every GPU has one.
  std::sort(gpus.begin(), gpus.end(), [](const auto& a, const auto& b) { return a.first.pci < b.first.pci; });
  bool all_numbered = !gpus.empty() && std::all_of(gpus.begin(), gpus.end(), [](auto& g) { return g.second >= 0; });
  std::set<int> seen;
  for (auto& [gpu, os_index] : gpus) seen.insert(os_index);
  if (seen.size() != gpus.size()) all_numbered = false;
  for (size_t i = 0; i < gpus.size(); ++i) {
    gpus[i].first.index = all_numbered ? gpus[i].second : static_cast<int>(i);
    result.gpus.push_back(gpus[i].first);
  }
  std::sort(result.gpus.begin(), result.gpus.end(), [](const Gpu& a, const Gpu& b) { return a.index < b.index; });
  std::sort(result.nics.begin(), result.nics.end(), [](const Nic& a, const Nic& b) { return a.pci < b.pci; });

  for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr); numa != nullptr;
       numa = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, numa)) {
    NumaNode node;
    node.id = static_cast<int>(numa->os_index);
    hwloc_obj_t package = numa->parent;
    while (package != nullptr && package->type != HWLOC_OBJ_PACKAGE) package = package->parent;
    node.package = package != nullptr ? static_cast<int>(package->os_index) : -1;
    bool has_cores = false;
    for (hwloc_obj_t core = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_CORE, nullptr); core != nullptr;
         core = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_CORE, core)) {
      has_cores = true;
      if (hwloc_bitmap_isincluded(core->cpuset, numa->cpuset) && !hwloc_bitmap_iszero(core->cpuset)) {
        if (std::vector<int> pus = PusOf(core->cpuset); !pus.empty()) node.cores.push_back(std::move(pus));
      }
    }
    if (!has_cores) {  // some virtual machines expose PUs without cores: each PU is its own core
      for (int pu : PusOf(numa->cpuset)) node.cores.push_back({pu});
    }
    std::sort(node.cores.begin(), node.cores.end());
    result.numa_nodes.push_back(std::move(node));
  }
  return result;
}

// When `xml` says it was written by a newer hwloc than the one running (`<topology version="3.0">` against hwloc
// 2), the sentence that says so; else empty. hwloc itself only answers EINVAL.
std::string NewerXmlNote(std::string_view xml) {
  const size_t topology = xml.find("<topology");
  if (topology == std::string_view::npos) return "";
  const size_t end = xml.find('>', topology);
  const std::string_view tag = xml.substr(topology, end == std::string_view::npos ? end : end - topology);
  constexpr std::string_view kVersion = "version=\"";
  const size_t at = tag.find(kVersion);
  if (at == std::string_view::npos) return "";
  const std::string_view version = tag.substr(at + kVersion.size(), tag.find('"', at + kVersion.size()) -
                                                                        (at + kVersion.size()));
  auto major = common::ParseInt(version.substr(0, version.find('.')), "XML version", 0, 1000);
  const unsigned running = hwloc_get_api_version() >> 16;
  if (!major.ok() || *major <= running) return "";
  return fmt::format("it was written by hwloc {} (topology version {}) and this program reads hwloc {}.x XML "
                     "(built with hwloc {}): export it again with hwloc {}.x's lstopo, or build srunway against "
                     "hwloc {}",
                     *major, version, running, HWLOC_VERSION, running, *major);
}

StatusOr<Topology> Load(const std::function<int(hwloc_topology_t)>& configure, std::string source,
                        std::string_view xml = {}) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return common::Internal("hwloc_topology_init failed");
  HwlocTopology topology(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  // Linux's own sysfs discovery finds every PCI device we need. The libpciaccess component leaks on each load,
  // and the OpenCL and OpenGL ones would pull those stacks into slurmstepd for devices we never look at.
  for (const char* component : {"pci", "opencl", "gl"}) {
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  }
  // The whole machine, not just what this process's cgroup allows: a task's share is computed from it.
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  const bool configured = configure(raw) == 0;
  if (!configured || hwloc_topology_load(raw) != 0) {
    const int error = errno;
    if (std::string note = NewerXmlNote(xml); !note.empty()) return common::InvalidArgument("{}: {}", source, note);
    return common::InvalidArgument("{}: {}: {}", source,
                                   configured ? "hwloc failed to load the topology" : "hwloc cannot read it as XML",
                                   std::strerror(error));
  }
  Topology result = Extract(raw, source);
  if (result.numa_nodes.empty()) return common::InvalidArgument("{}: the topology has no NUMA node", source);
  return result;
}

StatusOr<Topology> LoadXmlBuffer(std::string buffer, std::string source) {
  // hwloc's XML parsers need a NUL-terminated buffer whose length includes the NUL.
  return Load([&](hwloc_topology_t t) {
    return hwloc_topology_set_xmlbuffer(t, buffer.c_str(), static_cast<int>(buffer.size() + 1));
  }, std::move(source), buffer);
}

common::Json ToJson(const Topology& topology) {
  common::Json gpus = common::Json::array(), nics = common::Json::array(), numa = common::Json::array();
  for (const Gpu& g : topology.gpus) gpus.push_back({g.index, g.pci, g.numa, g.package, g.switch_id, g.switch_pci});
  for (const Nic& n : topology.nics) {
    nics.push_back({n.name, n.ib_device, n.pci, n.vendor_id, n.class_id, n.numa, n.package, n.switch_id,
                    n.switch_pci, n.link_gbps, n.active_ports});
  }
  for (const NumaNode& node : topology.numa_nodes) numa.push_back({node.id, node.package, node.cores});
  return {{"source", topology.source}, {"gpus", gpus}, {"nics", nics}, {"numa", numa}};
}

// A field of the helper's answer as T; integers through common::JsonInteger (a double converted to an int out of
// its range is undefined behaviour), its refusal thrown to FromJson's one handler.
template <typename T>
T Get(const common::Json& json) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    auto value = common::JsonInteger<T>(json, "a field");
    if (!value.ok()) throw std::out_of_range(value.status().message());
    return *value;
  } else {
    return json.get<T>();
  }
}

std::vector<int> Ints(const common::Json& json) {
  std::vector<int> out;
  for (const auto& value : json) out.push_back(Get<int>(value));
  return out;
}

StatusOr<Topology> FromJson(const common::Json& json) {
  try {
    Topology topology;
    topology.source = Get<std::string>(json.at("source"));
    for (const auto& g : json.at("gpus")) {
      topology.gpus.push_back(Gpu{Get<int>(g.at(0)), Get<std::string>(g.at(1)), Get<int>(g.at(2)), Get<int>(g.at(3)),
                                  Get<uint64_t>(g.at(4)), Get<std::string>(g.at(5))});
    }
    for (const auto& n : json.at("nics")) {
      topology.nics.push_back(Nic{Get<std::string>(n.at(0)), Get<std::string>(n.at(1)), Get<std::string>(n.at(2)),
                                  Get<uint16_t>(n.at(3)), Get<uint16_t>(n.at(4)), Get<int>(n.at(5)),
                                  Get<int>(n.at(6)), Get<uint64_t>(n.at(7)), Get<std::string>(n.at(8)),
                                  Get<double>(n.at(9)), Ints(n.at(10))});
    }
    for (const auto& node : json.at("numa")) {
      std::vector<std::vector<int>> cores;
      for (const auto& core : node.at(2)) cores.push_back(Ints(core));
      topology.numa_nodes.push_back(NumaNode{Get<int>(node.at(0)), Get<int>(node.at(1)), std::move(cores)});
    }
    return topology;
  } catch (const std::exception& error) {  // nlohmann's type and range errors, and Get's
    return common::Internal("topology helper sent a malformed answer: {}", error.what());
  }
}

}  // namespace

common::Json TopologyAnswer(const StatusOr<Topology>& topology) {
  return topology.ok() ? common::Json{{"ok", true}, {"topology", ToJson(*topology)}}
                       : common::Json{{"ok", false}, {"error", topology.status().message()}};
}

StatusOr<Topology> TopologyFromAnswer(std::string_view answer) {
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json, common::ParseJson(answer, "topology helper"));
  if (!json.is_object()) return common::Internal("topology helper sent a malformed answer: not an object");
  const auto ok = json.find("ok");
  if (ok == json.end() || !ok->is_boolean()) {
    return common::Internal("topology helper sent a malformed answer: no boolean \"ok\"");
  }
  if (!ok->get<bool>()) {
    const auto error = json.find("error");
    return common::InvalidArgument("{}", error != json.end() && error->is_string() ? error->get<std::string>()
                                                                                  : std::string("unknown error"));
  }
  return FromJson(json["topology"]);
}

std::string DefaultTopologyHelper() { return SRUNWAY_TOPO_HELPER; }

StatusOr<Topology> LoadTopologyIsolated(const std::string& xml_path, int timeout_ms, const std::string& helper) {
  const std::string what = xml_path.empty() ? "live topology" : xml_path;
  std::vector<std::string> argv = {helper};
  if (!xml_path.empty()) argv.push_back(xml_path);
  auto ran = common::RunCommand(argv, /*with_stderr=*/false, std::chrono::milliseconds(timeout_ms));
  if (!ran.ok() && ran.status().code() == common::StatusCode::kDeadlineExceeded) {
    return common::DeadlineExceeded("{}: hwloc did not finish within {} ms", what, timeout_ms);
  }
  if (!ran.ok()) return ran.status().WithContext(fmt::format("{}: the topology helper", what));
  if (ran->signal != 0) {
    return common::InvalidArgument("{}: hwloc crashed (signal {}) reading it; the file is probably corrupt", what,
                                   ran->signal);
  }
  if (ran->exit_code != 0) {
    return common::InvalidArgument("{}: the topology helper {} failed (exit {})", what, helper, ran->exit_code);
  }
  return TopologyFromAnswer(ran->output);
}

const NumaNode* Topology::FindNuma(int id) const {
  for (const NumaNode& node : numa_nodes) {
    if (node.id == id) return &node;
  }
  return nullptr;
}

std::vector<int> Topology::AllPus() const {
  std::vector<int> pus;
  for (const NumaNode& node : numa_nodes) {
    for (const auto& core : node.cores) pus.insert(pus.end(), core.begin(), core.end());
  }
  std::sort(pus.begin(), pus.end());
  pus.erase(std::unique(pus.begin(), pus.end()), pus.end());
  return pus;
}

StatusOr<Topology> LoadTopologyXmlFile(const std::string& path) {
  // Read once and handed to hwloc as a buffer, so a failure can also say what the file is.
  SRUNWAY_ASSIGN_OR_RETURN(std::string text, common::ReadFile(path));
  return LoadXmlBuffer(std::move(text), path);
}

StatusOr<Topology> LoadTopologyXmlText(std::string_view xml) { return LoadXmlBuffer(std::string(xml), "XML buffer"); }

StatusOr<Topology> LoadLiveTopology() {
  return Load([](hwloc_topology_t) { return 0; }, "live");
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

StatusOr<std::vector<int>> ParseCpuList(std::string_view text, std::string_view what) {
  std::vector<int> cpus;
  text = common::Trim(text);
  if (text.empty()) return cpus;
  constexpr int64_t kMaxCpu = 1 << 16;
  for (std::string_view field : common::Split(text, ',')) {
    size_t dash = field.find('-');
    auto lo = common::ParseInt(field.substr(0, dash), what, 0, kMaxCpu);
    if (!lo.ok()) return common::InvalidArgument("{}: '{}' is not a CPU list", what, common::Printable(text));
    auto hi = dash == std::string_view::npos ? lo : common::ParseInt(field.substr(dash + 1), what, 0, kMaxCpu);
    if (!hi.ok() || *hi < *lo) {
      return common::InvalidArgument("{}: '{}' is not a CPU list", what, common::Printable(text));
    }
    for (int64_t cpu = *lo; cpu <= *hi; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace srunway::topology
