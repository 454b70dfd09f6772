// The Slurm side of a blueprint: slurm.conf (nodes with their GPUs as gres, partitions, PlugStackConfig, MPI
// default pmix), gres.conf, plugstack.conf and mpi.conf, from its nodeset, partition and controller modules.
// Two targets: the toolkit's slurm-gcp v6 modules (what the A3 clusters run), and srunway's local two-node cluster
// (srunway/local/* modules), whose files scripts/local-cluster.sh starts the daemons with.
#pragma once

#include <map>
#include <string>

#include "blueprints/blueprint.h"
#include "common/status.h"

namespace srunway::blueprint {

struct LocalCluster {
  std::string state_dir;
  std::vector<std::string> nodes;
  int port_base = 0;
  int gpus_per_node = 0;
};

// File name -> content. Errors name the module and setting at fault.
common::StatusOr<std::map<std::string, std::string>> RenderSlurm(const Blueprint& blueprint);

// The local target's controller settings (state directory, ports) and nodes; NotFound when the blueprint has no
// srunway/local/controller module.
common::StatusOr<LocalCluster> LocalClusterOf(const Blueprint& blueprint);

}  // namespace srunway::blueprint
