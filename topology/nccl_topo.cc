// Writes the part of an NCCL topology file (NCCL_TOPO_FILE) that fixes where GPUs and NICs sit: which CPU
// (NUMA node) and which PCIe switch each one hangs off. NCCL detects and fills in the rest.
#include "topology/nccl_topo.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "common/fs.h"

namespace srunway::topology {
namespace {

constexpr const char* kFileName = "nccl_topo.xml";

struct Endpoint {
  std::string pci;
  std::string pci_class;  // NCCL's 0x%06x form
};

}  // namespace

std::string CpuMaskHex(const std::vector<int>& cpus) {
  int highest = cpus.empty() ? 0 : *std::max_element(cpus.begin(), cpus.end());
  std::vector<uint32_t> words(static_cast<size_t>(highest / 32 + 1), 0);
  for (int cpu : cpus) words[static_cast<size_t>(cpu / 32)] |= 1u << (cpu % 32);
  std::string out;
  for (size_t i = words.size(); i-- > 0;) out += fmt::format("{}{:08x}", out.empty() ? "" : ",", words[i]);
  return out;
}

std::string NcclTopologyXml(const Topology& topology) {
  // numa -> switch bus id ("" = no switch) -> endpoints
  std::map<int, std::map<std::string, std::vector<Endpoint>>> tree;
  for (const Gpu& gpu : topology.gpus) {
    if (gpu.numa >= 0) tree[gpu.numa][gpu.switch_pci].push_back({gpu.pci, "0x030200"});
  }
  for (const Nic& nic : topology.nics) {
    if (nic.numa >= 0) tree[nic.numa][nic.switch_pci].push_back({nic.pci, fmt::format("0x{:04x}00", nic.class_id)});
  }
  std::string xml = "<system version=\"1\">\n";
  for (const NumaNode& node : topology.numa_nodes) {
    std::vector<int> pus;
    for (const auto& core : node.cores) pus.insert(pus.end(), core.begin(), core.end());
    xml += fmt::format("  <cpu numaid=\"{}\" affinity=\"{}\">\n", node.id, CpuMaskHex(pus));
    for (const auto& [switch_pci, endpoints] : tree[node.id]) {
      std::string indent = switch_pci.empty() ? "    " : "      ";
      if (!switch_pci.empty()) xml += fmt::format("    <pci busid=\"{}\" class=\"0x060400\">\n", switch_pci);
      for (const Endpoint& endpoint : endpoints) {
        xml += fmt::format("{}<pci busid=\"{}\" class=\"{}\"/>\n", indent, endpoint.pci, endpoint.pci_class);
      }
      if (!switch_pci.empty()) xml += "    </pci>\n";
    }
    xml += "  </cpu>\n";
  }
  xml += "</system>\n";
  return xml;
}

common::StatusOr<std::string> WriteNcclTopologyFile(const Topology& topology, const std::string& parent, uid_t uid,
                                                    gid_t gid) {
  std::string dir = parent + "/srunway-nccl-topo.XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) return common::ErrnoStatus(errno, "mkdtemp in " + parent);
  std::string path = dir + "/" + kFileName;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return common::ErrnoStatus(errno, "create " + path);
  if (::geteuid() == 0 && uid != 0) {  // both were made a moment ago by us, in a directory only we can write
    if (::fchown(fd, uid, gid) != 0 || ::chown(dir.c_str(), uid, gid) != 0) {
      common::Status status = common::ErrnoStatus(errno, "chown " + dir);
      ::close(fd);
      ::unlink(path.c_str());
      ::rmdir(dir.c_str());
      return status;
    }
  }
  common::Status status = common::WriteAll(fd, NcclTopologyXml(topology), path);
  ::close(fd);
  if (!status.ok()) {
    ::unlink(path.c_str());
    ::rmdir(dir.c_str());
    return status;
  }
  return path;
}

void RemoveNcclTopologyFile(const std::string& path, uid_t uid) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return;
  std::string dir = path.substr(0, slash);
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) return;
  struct stat info;
  if (::fstat(dir_fd, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == uid) {
    ::unlinkat(dir_fd, kFileName, 0);  // relative to the directory we checked, so no link is followed
    ::rmdir(dir.c_str());              // only ever removes an empty directory
  }
  ::close(dir_fd);
}

}  // namespace srunway::topology
