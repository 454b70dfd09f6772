// The CPUs a rank may run on, as the ranks exchange them, and a rank's share of them: ranks that Slurm did not pin
// (no --cpus-per-task, no CPU binding) each see every CPU of their node, and a thread per CPU in each of them
// oversubscribes it. srunway-launch sets OMP_NUM_THREADS from it, srunway-train its own threads.
#pragma once

#include <span>
#include <string>

#include "common/status.h"

namespace srunway::launcher {

// This process's affinity mask as the ranks exchange it: the bytes of its cpu_set_t in hex, CPU 0's byte first,
// without the zero bytes past its last CPU ("03": CPUs 0 and 1).
std::string AffinityMaskText();

struct CpuShare {
  int cpus = 1;   // the CPUs this rank may run on
  int ranks = 1;  // the ranks of its node that may run on any of them, itself included
  int threads() const { return cpus / ranks > 1 ? cpus / ranks : 1; }
};

// `rank`'s share, from every rank's host and AffinityMaskText(). A mask that does not parse counts as apart from
// every other (the share is advice, not worth failing a step for); `rank`'s own must parse (InvalidArgument).
common::StatusOr<CpuShare> ShareOf(int rank, std::span<const std::string> hosts, std::span<const std::string> masks);

}  // namespace srunway::launcher
