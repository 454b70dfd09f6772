// Writes the part of an NCCL topology file (NCCL_TOPO_FILE) that fixes where GPUs and NICs sit: which CPU
// (NUMA node) and which PCIe switch each one hangs off. NCCL detects and fills in the rest.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "topology/topology.h"

namespace srunway::topology {

// <system version="1"> with one <cpu numaid affinity> per NUMA node, each holding a <pci class="0x060400"> per
// top-level PCIe switch and, inside it, a <pci> per GPU and NIC (by bus id and class); devices with no switch
// sit directly under their <cpu>. Devices whose NUMA node is unknown are left for NCCL to place.
std::string NcclTopologyXml(const Topology& topology);

// Creates a fresh private directory under `parent` (mkdtemp, mode 0700) and writes the file there without
// following links; returns the file's path. Run as root, it hands both to `uid`:`gid`, so the job can read it.
common::StatusOr<std::string> WriteNcclTopologyFile(const Topology& topology, const std::string& parent, uid_t uid,
                                                    gid_t gid);

// Removes what WriteNcclTopologyFile made, only if the directory is still a real directory owned by `uid`
// (it runs as root at the end of the step; a user must not be able to point it elsewhere).
void RemoveNcclTopologyFile(const std::string& path, uid_t uid);

// /sys-style cpumask text: 32-bit hex words, most significant first ("ffffffff,00000000").
std::string CpuMaskHex(const std::vector<int>& cpus);

}  // namespace srunway::topology
