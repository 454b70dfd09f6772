// Node order by physical placement: Google Cloud's physical_host answers, Slurm's switch tree, the order and the
// SLURM_HOSTFILE it becomes.
#include "topology/placement.h"

#include <gtest/gtest.h>

namespace srunway::topology {
namespace {

using Strings = std::vector<std::string>;

TEST(Placement, PhysicalHostsOrderByBlockThenRackThenHost) {
  auto placement = ParsePhysicalHosts("# node physical_host\n"
                                      "a3-0 /CLUSTER-B/RACK-1/HOST-7\n"
                                      "a3-1 /CLUSTER-A/RACK-2/HOST-1\n"
                                      "a3-2 /CLUSTER-B/RACK-1/HOST-2\n"
                                      "a3-3 /CLUSTER-A/RACK-1/HOST-9\n"
                                      "a3-4\n",
                                      "answers.txt");
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  const Strings nodes = {"a3-0", "a3-1", "a3-2", "a3-3", "a3-4", "a3-5"};
  EXPECT_EQ(OrderByPlacement(nodes, *placement), (Strings{"a3-3", "a3-1", "a3-2", "a3-0", "a3-4", "a3-5"}));
  EXPECT_EQ(ParsePhysicalHosts("n1 rack7\n", "answers.txt").status().message(),
            "answers.txt:1: 'rack7' is not a physical_host path (/CLUSTER/RACK/HOST)");
}

TEST(Placement, SlurmSwitchTree) {
  auto placement = ParseSlurmTopology(
      "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=node[3-4]\n"
      "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=node[1-2],node9\n"
      "SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]\n");
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  EXPECT_EQ(placement->at("node9"), "/spine/leaf1");
  EXPECT_EQ(placement->at("node3"), "/spine/leaf2");
  const Strings nodes = {"node4", "node9", "node3", "node1", "node7"};
  EXPECT_EQ(OrderByPlacement(nodes, *placement), (Strings{"node1", "node9", "node3", "node4", "node7"}));
  EXPECT_FALSE(ParseSlurmTopology("SwitchName=x Nodes=node[1-\n").ok());
}

TEST(Placement, HostfileAndNames) {
  const Strings order = {"b", "a"};
  EXPECT_EQ(HostfileFor(order, 2), "b\nb\na\na\n");
  EXPECT_EQ(*ParseOrderSource("slurm"), OrderSource::kSlurm);
  EXPECT_EQ(ParseOrderSource("rack").status().message(), "--topology-order rack: expected auto, metadata, slurm or none");
}

}  // namespace
}  // namespace srunway::topology
