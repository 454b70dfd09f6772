// libFuzzer target: our walk over hwloc topologies (GPU numbering, NIC and locality extraction, NUMA cores) and
// the plan for every profile, in this process so libFuzzer sees their coverage. The input drives a generator of
// hwloc 2 XML machines (packages, NUMA nodes, cores, PUs, nested PCI bridges, PCI devices of any vendor and class,
// OS devices of any type with names such as cuda99999999999 or mlx5_7) rather than being the XML itself: hwloc
// 2.9 crashes on some malformed files (a missing complete_cpuset), which is why the SPANK plugin loads topologies
// in a helper process, and raw bytes would find that crash instead of ours.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <hwloc.h>

#include "topology/plan.h"
#include "topology/topology.h"

namespace {

std::string Mask(int first, int count) {
  // hwloc's bitmap text: comma-separated 32-bit words, most significant first.
  std::vector<uint32_t> words(static_cast<size_t>((first + count + 31) / 32), 0);
  for (int pu = first; pu < first + count; ++pu) words[static_cast<size_t>(pu / 32)] |= 1u << (pu % 32);
  std::string text;
  for (size_t i = words.size(); i-- > 0;) text += fmt::format("{}0x{:08x}", text.empty() ? "" : ",", words[i]);
  return text.empty() ? "0x0" : text;
}

std::string Sets(const std::string& cpus, const std::string& nodes) {
  return fmt::format(R"(cpuset="{0}" complete_cpuset="{0}" nodeset="{1}" complete_nodeset="{1}")", cpus, nodes);
}

std::string Name(FuzzedDataProvider& in) {
  static constexpr const char* kStems[] = {"cuda", "nvml", "mlx5_", "ib", "eth", "eno", "enp0s", "hsn", "rdma", ""};
  std::string name = kStems[in.ConsumeIntegralInRange<size_t>(0, std::size(kStems) - 1)];
  std::string tail = in.ConsumeRandomLengthString(12);
  for (char c : tail) name += (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' ? c : '7';
  return name;
}

class Generator {
 public:
  explicit Generator(FuzzedDataProvider& in) : in_(in) {}

  std::string Machine() {
    const int packages = in_.ConsumeIntegralInRange(1, 3);
    std::string body;
    int pu = 0;
    for (int p = 0; p < packages; ++p) {
      const int cores = in_.ConsumeIntegralInRange(1, 6);
      const int threads = in_.ConsumeIntegralInRange(1, 2);
      const std::string cpus = Mask(pu, cores * threads), nodes = Mask(p, 1);
      body += fmt::format(R"(<object type="Package" os_index="{}" {} gp_index="{}">)", Index(p), Sets(cpus, nodes),
                          ++gp_);
      body += fmt::format(R"(<object type="NUMANode" os_index="{}" {} gp_index="{}" local_memory="1024"/>)", Index(p),
                          Sets(cpus, nodes), ++gp_);
      for (int c = 0; c < cores; ++c) {
        const std::string core = Mask(pu, threads);
        body += fmt::format(R"(<object type="Core" os_index="{}" {} gp_index="{}">)", c, Sets(core, nodes), ++gp_);
        for (int t = 0; t < threads; ++t, ++pu) {
          body += fmt::format(R"(<object type="PU" os_index="{}" {} gp_index="{}"/>)", pu, Sets(Mask(pu, 1), nodes),
                              ++gp_);
        }
        body += "</object>";
      }
      if (in_.ConsumeBool()) body += Bridge(0, pu - cores * threads, cores * threads, p);
      body += "</object>";
    }
    const std::string all = Mask(0, pu), nodes = Mask(0, packages);
    return fmt::format(R"(<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE topology SYSTEM "hwloc2.dtd">)"
                       R"(<topology version="2.0"><object type="Machine" os_index="0" {} allowed_cpuset="{}" )"
                       R"(allowed_nodeset="{}" gp_index="1">{}</object></topology>)",
                       Sets(all, nodes), all, nodes, body);
  }

 private:
  // Mostly the package's own number; sometimes a large or repeated one. (Not 2^31 and up: hwloc sizes its node
  // bitmaps by the largest index, and a 256 MB memset per input would slow the run a hundredfold.)
  unsigned Index(int fallback) {
    switch (in_.ConsumeIntegralInRange(0, 7)) {
      case 0: return 1u << 20;
      case 1: return 0;
      default: return static_cast<unsigned>(fallback);
    }
  }

  std::string Bridge(int depth, int first_pu, int pus, int numa) {
    const int bus = in_.ConsumeIntegralInRange(1, 250);
    std::string out = fmt::format(
        R"(<object type="Bridge" gp_index="{}" bridge_type="{}-1" depth="{}" bridge_pci="0000:[{:02x}-{:02x}]")",
        ++gp_, depth == 0 ? 0 : in_.ConsumeIntegralInRange(0, 2), depth, bus, bus);
    if (depth > 0) out += fmt::format(R"( pci_busid="0000:{:02x}:00.0" pci_type="0604 [10b5:8796] [0000:0000] 00")", bus - 1);
    out += ">";
    const int children = in_.ConsumeIntegralInRange(0, 4);
    for (int i = 0; i < children && in_.remaining_bytes() > 0; ++i) {
      if (depth < 3 && in_.ConsumeIntegralInRange(0, 3) == 0) {
        out += Bridge(depth + 1, first_pu, pus, numa);
      } else {
        out += Device(bus, i);
      }
    }
    return out + "</object>";
  }

  std::string Device(int bus, int slot) {
    static constexpr uint16_t kVendors[] = {0x10de, 0x15b3, 0x8086, 0x1d0f, 0x14e4};
    static constexpr uint16_t kClasses[] = {0x0302, 0x0300, 0x0207, 0x0200, 0x0108, 0x0604};
    const uint16_t vendor = in_.ConsumeBool() ? kVendors[in_.ConsumeIntegralInRange<size_t>(0, 4)]
                                              : in_.ConsumeIntegral<uint16_t>();
    const uint16_t klass = in_.ConsumeBool() ? kClasses[in_.ConsumeIntegralInRange<size_t>(0, 5)]
                                             : in_.ConsumeIntegral<uint16_t>();
    std::string out = fmt::format(
        R"(<object type="PCIDev" gp_index="{}" pci_busid="{:04x}:{:02x}:{:02x}.{:x}" pci_type="{:04x} [{:04x}:{:04x}] [0000:0000] 00">)",
        ++gp_, in_.ConsumeIntegralInRange(0, 2), bus, slot % 32, in_.ConsumeIntegralInRange(0, 7), klass, vendor,
        in_.ConsumeIntegral<uint16_t>());
    const int devices = in_.ConsumeIntegralInRange(0, 3);
    for (int d = 0; d < devices; ++d) {
      out += fmt::format(R"(<object type="OSDev" gp_index="{}" name="{}" osdev_type="{}"/>)", ++gp_, Name(in_),
                         in_.ConsumeIntegralInRange(0, 6));
    }
    return out + "</object>";
  }

  FuzzedDataProvider& in_;
  int gp_ = 1;
};

}  // namespace

// hwloc loads its plugins when the first topology of a process is made and unloads them with the last one: one
// topology kept for the whole run makes each input's load cost the load alone (26 runs in 5 s without it).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static hwloc_topology_t kept = nullptr;
  return hwloc_topology_init(&kept);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace srunway::topology;
  FuzzedDataProvider in(data, size);
  const std::string xml = Generator(in).Machine();
  auto topology = LoadTopologyXmlText(xml);
  if (!topology.ok()) return 0;
  for (size_t i = 1; i < topology->gpus.size(); ++i) {
    if (topology->gpus[i].index < topology->gpus[i - 1].index) std::abort();  // promised: ordered by index
  }
  auto never = [](const std::string&) { return false; };
  for (ProfileId id : {ProfileId::kAuto, ProfileId::kA3Mega, ProfileId::kA3High, ProfileId::kGeneric}) {
    for (bool one_gpu : {false, true}) {
      PlanRequest request;
      request.profile = id;
      if (one_gpu && !topology->gpus.empty()) request.task_gpus.push_back(topology->gpus.back().index);
      request.exists = never;
      (void)MakePlan(*topology, request);
    }
  }
  return 0;
}
