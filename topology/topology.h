// A node's GPUs, NICs, NUMA nodes and cores, read once from hwloc (live or XML) into plain data.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace srunway::topology {

using common::Status;
using common::StatusOr;

struct Gpu {
  int index = -1;       // CUDA/NVML index: hwloc's cudaN/nvmlN device when present, else rank in PCI order
  std::string pci;      // "0000:04:00.0"
  int numa = -1;        // NUMA node (OS index), -1 when unknown
  int package = -1;     // package (socket) OS index, -1 when unknown
  uint64_t switch_id = 0;  // identifies the top PCIe switch port above it; 0 = directly under the host bridge
  std::string switch_pci;  // that switch port's PCI address; empty when there is none
};

struct Nic {
  std::string name;       // Linux interface name; differs between images (eth1 / enp6s0), so never used to find it
  std::string ib_device;  // OpenFabrics device (mlx5_0) for InfiniBand/RoCE NICs, else empty
  std::string pci;
  uint16_t vendor_id = 0;
  uint16_t class_id = 0;  // 0x0200 Ethernet, 0x0207 InfiniBand
  int numa = -1;
  int package = -1;
  uint64_t switch_id = 0;
  std::string switch_pci;
  double link_gbps = 0;           // its PCIe link in GB/s as hwloc reads it; 0 when unknown (many VMs)
  std::vector<int> active_ports;  // OpenFabrics ports in state ACTIVE; empty when hwloc gave no port state
};

struct NumaNode {
  int id = -1;
  int package = -1;
  std::vector<std::vector<int>> cores;  // the PUs (OS indices) of each core, cores ordered by their first PU
};

struct Topology {
  std::string source;  // "live" or the XML file's path, for messages
  std::vector<Gpu> gpus;       // ordered by index
  std::vector<Nic> nics;       // ordered by PCI address
  std::vector<NumaNode> numa_nodes;

  const NumaNode* FindNuma(int id) const;
  std::vector<int> AllPus() const;
};

StatusOr<Topology> LoadTopologyXmlFile(const std::string& path);
StatusOr<Topology> LoadTopologyXmlText(std::string_view xml);
StatusOr<Topology> LoadLiveTopology();

// The topology as the helper program (srunway-topo-helper) prints it on stdout: {"ok": true, "topology": ...}
// or {"ok": false, "error": "..."}.
common::Json TopologyAnswer(const StatusOr<Topology>& topology);
StatusOr<Topology> TopologyFromAnswer(std::string_view answer);

// Where the helper was installed (meson's libexecdir/srunway/srunway-topo-helper).
std::string DefaultTopologyHelper();

// The live machine (empty `xml_path`) or an XML file, loaded by `helper` (srunway-topo-helper) started with
// posix_spawn, never fork: the caller may be multithreaded slurmstepd. hwloc crashes on some malformed files (a
// missing complete_cpuset is enough in 2.9); isolated, such a file, or a load that hangs past `timeout_ms` (the
// helper and what it started are killed), is one error naming the file instead of the end of the caller.
StatusOr<Topology> LoadTopologyIsolated(const std::string& xml_path, int timeout_ms,
                                        const std::string& helper = DefaultTopologyHelper());

// "0-3,8,10-11" for {0,1,2,3,8,10,11}; input need not be sorted.
std::string FormatCpuList(std::vector<int> cpus);
// The inverse, strict: "0-3,8" -> {0,1,2,3,8}; errors name `what`.
StatusOr<std::vector<int>> ParseCpuList(std::string_view text, std::string_view what);

}  // namespace srunway::topology
