// Node order by physical placement, for launching ranks so that neighbours in the ring share a block, rack or
// switch: from Google Cloud's `physical_host` metadata attribute ("/CLUSTER/RACK/HOST") or Slurm's
// `scontrol show topology` (switch tree). The order becomes a SLURM_HOSTFILE for `srun --distribution=arbitrary`,
// as Google's topological nccl-tests recipe does by hand; run-nccl-tests and training job scripts use it.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::topology {

enum class OrderSource { kAuto, kMetadata, kSlurm, kNone };
// "auto", "metadata", "slurm", "none"; anything else is an InvalidArgument naming them.
common::StatusOr<OrderSource> ParseOrderSource(std::string_view name);
std::string_view OrderSourceName(OrderSource source);

// Node -> placement key, from lines "NODE PHYSICAL_HOST" (what each node's metadata server answered, collected by
// the job; blank lines and '#' comments skipped). A line without a value leaves that node unplaced.
common::StatusOr<std::map<std::string, std::string>> ParsePhysicalHosts(std::string_view text, std::string_view where);

// Node -> placement key from `scontrol show topology`: the path of switch names from the top level down to the
// node's leaf switch ("spine1/leaf3"), so nodes under one leaf sort together.
common::StatusOr<std::map<std::string, std::string>> ParseSlurmTopology(std::string_view text);

// `nodes` ordered by placement key, then name; nodes without a key keep their name order after the placed ones.
std::vector<std::string> OrderByPlacement(std::span<const std::string> nodes,
                                          const std::map<std::string, std::string>& placement);

// SLURM_HOSTFILE's content: each node `tasks_per_node` times, one per line, in order.
std::string HostfileFor(std::span<const std::string> order, int tasks_per_node);

}  // namespace srunway::topology
