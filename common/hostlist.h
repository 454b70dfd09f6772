// Slurm hostlists both ways, matching `scontrol show hostnames` and `scontrol show hostlist` of Slurm 22.05.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::common {

// Slurm refuses a single range of more hosts than this ("Too many hosts in range").
inline constexpr uint64_t kMaxHostsPerRange = 65536;
// Our own bound on a whole expansion, so that `a[1-65536]b[1-65536]` is an error and not an OOM: ten times the
// largest cluster's node count (El Capitan, about 11,000), yet an expansion that stays in the tens of megabytes.
// (At 1 << 20 a 140-byte list from the fuzzer took 6 s and hundreds of MB to expand.)
inline constexpr uint64_t kMaxExpandedHosts = 1 << 17;

// "gpu-a[01-03,07],login1" -> {gpu-a01, gpu-a02, gpu-a03, gpu-a07, login1}, in order, duplicates kept.
// Separators are commas and white space; several bracket groups multiply out (r[1-2]-n[1-2]).
// Malformed input (unbalanced or nested brackets, text after the last bracket, reversed or
// non-numeric ranges, too many hosts) is an InvalidArgument that quotes the offending part.
StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

// The inverse, in the order given: consecutive hosts that share a prefix join one bracket,
// numbers keep their zero padding ({n1,n2,n3,n5} -> "n[1-3,5]"; {n1,n3,n2} -> "n[1,3,2]").
std::string CompressHostlist(std::span<const std::string> hosts);

}  // namespace srunway::common
