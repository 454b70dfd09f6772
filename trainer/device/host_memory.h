// How much host memory a rank may fill: the machine's RAM, what of it was free, and the limit of the cgroup the
// rank runs in (Slurm's task/cgroup with ConstrainRAMSpace=yes puts the job's --mem there). The kernel overcommits
// and a cgroup over its limit is OOM-killed, so the CPU device refuses an allocation beyond this up front.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace srunway::trainer {

struct HostMemory {
  size_t bytes = 0;  // 0: nothing could be told, and nothing is refused
  // Where the bound comes from, said of the rank: "this machine's memory", "what of this machine's 23.54 GiB was
  // free when it started", "what cgroup /slurm/uid_0/job_7 had left of its 2.00 GiB limit when it started: ...".
  std::string why;
};

// Read when asked, from `root`/proc/meminfo, `root`/proc/self/cgroup and `root`/sys/fs/cgroup (v2, or v1's memory
// controller): every cgroup from the rank's up to the root that has a limit bounds it by what is left under it.
HostMemory HostMemoryBudget(const std::filesystem::path& root = "/");

// What each of `ranks` ranks that share `whole` (a node's ranks share its memory and their job's cgroup) may hold:
// an even share, said as such.
HostMemory ShareOf(const HostMemory& whole, int ranks);

}  // namespace srunway::trainer
