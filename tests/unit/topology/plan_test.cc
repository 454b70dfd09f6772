// Tests for GPU placement and per-profile environment plans on the fixtures.
#include "topology/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/unit/topology/fixture.h"

namespace srunway::topology {
namespace {

std::map<std::string, std::string> EnvOf(const EnvPlan& plan) {
  std::map<std::string, std::string> env;
  for (const EnvVar& var : plan.env) env[var.name] = var.value;
  return env;
}

bool NoExists(const std::string&) { return false; }

EnvPlan Plan(const Topology& topo, ProfileId profile, std::vector<int> gpus, PathExists exists = NoExists) {
  PlanRequest request;
  request.profile = profile;
  request.task_gpus = std::move(gpus);
  request.exists = std::move(exists);
  return MakePlan(topo, request);
}

TEST(Placement, A3MegaOneNicPerGpuInPciOrder) {
  Topology topo = LoadFixture("a3mega.xml");
  NodePlacement placement = PlaceNode(topo, false);
  const char* expected[] = {"enp6s0", "enp7s0", "enp13s0", "enp14s0", "enp134s0", "enp135s0", "enp141s0", "enp142s0"};
  ASSERT_EQ(placement.gpus.size(), 8u);
  for (int g = 0; g < 8; ++g) {
    ASSERT_EQ(placement.gpus[g].nics.size(), 1u) << g;
    EXPECT_EQ(topo.nics[placement.gpus[g].nics[0]].name, expected[g]) << g;
    EXPECT_EQ(placement.gpus[g].nic_locality, "pcie-switch");
    EXPECT_EQ(placement.gpus[g].cpus.size(), 26u) << g;  // 13 of the socket's 52 cores, with hyperthreads
  }
  EXPECT_EQ(FormatCpuList(placement.gpus[0].cpus), "0-12,104-116");
  EXPECT_EQ(FormatCpuList(placement.gpus[7].cpus), "91-103,195-207");
  ASSERT_EQ(placement.host_nics.size(), 1u);
  EXPECT_EQ(topo.nics[placement.host_nics[0]].name, "enp0s12");
}

TEST(Placement, A3HighTwoGpusPerNic) {
  Topology topo = LoadFixture("a3high.xml");
  NodePlacement placement = PlaceNode(topo, false);
  const char* expected[] = {"eth1", "eth1", "eth2", "eth2", "eth3", "eth3", "eth4", "eth4"};
  for (int g = 0; g < 8; ++g) EXPECT_EQ(topo.nics[placement.gpus[g].nics.at(0)].name, expected[g]) << g;
}

TEST(Plan, A3HighReproducesThePublishedBindings) {
  Topology topo = LoadFixture("a3high.xml");
  EnvPlan plan = Plan(topo, ProfileId::kA3High, {0});
  auto env = EnvOf(plan);
  EXPECT_EQ(env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"],
            "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177");
  EXPECT_EQ(env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"],
            "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191");
  EXPECT_EQ(env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"], "eth1,eth2,eth3,eth4");
  EXPECT_EQ(env["NCCL_GPUDIRECTTCPX_CTRL_DEV"], "eth0");
  EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "eth0");
  EXPECT_EQ(env["LD_LIBRARY_PATH"], "/var/lib/tcpx/lib64");
  // The task's cores avoid the NIC threads' cores and stay on the GPU's socket.
  ASSERT_FALSE(plan.cpus.empty());
  for (int cpu : plan.cpus) {
    EXPECT_FALSE(cpu >= 8 && cpu <= 35) << cpu;
    EXPECT_FALSE(cpu >= 112 && cpu <= 139) << cpu;
    EXPECT_TRUE(cpu < 52 || (cpu >= 104 && cpu < 156)) << cpu;
  }
}

TEST(Plan, TcpxBindingsOnOtherMachinesAreDisjointAndSocketLocal) {
  Topology topo = LoadFixture("dgx-h100-ib.xml");  // 56 cores per socket
  NodePlacement placement = PlaceNode(topo, true);
  EXPECT_EQ(placement.tx_bindings.substr(0, placement.tx_bindings.find(';')), "ibp26s0:8-22,120-134");
  EXPECT_EQ(placement.rx_bindings.substr(0, placement.rx_bindings.find(';')), "ibp26s0:23-37,135-149");
  for (const GpuPlacement& gpu : placement.gpus) {
    for (int cpu : gpu.cpus) {
      EXPECT_TRUE(std::find(placement.reserved_cpus.begin(), placement.reserved_cpus.end(), cpu) ==
                  placement.reserved_cpus.end()) << cpu;
    }
  }
}

TEST(Plan, A3MegaTaskNicFirstAndEnforcedValues) {
  Topology topo = LoadFixture("a3mega.xml");
  EnvPlan plan = Plan(topo, ProfileId::kA3Mega, {5});
  auto env = EnvOf(plan);
  EXPECT_EQ(env["NCCL_FASTRAK_IFNAME"], "enp135s0,enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp141s0,enp142s0");
  EXPECT_EQ(env["NCCL_FASTRAK_CTRL_DEV"], "enp0s12");
  EXPECT_EQ(env["NCCL_TUNER_CONFIG_PATH"], "/var/lib/tcpxo/lib64/a3plus_tuner_config.textproto");
  EXPECT_EQ(plan.nics, (std::vector<std::string>{"enp135s0"}));
  EXPECT_EQ(FormatCpuList(plan.cpus), "65-77,169-181");
  int enforced = 0;
  for (const EnvVar& var : plan.env) enforced += var.enforced ? 1 : 0;
  EXPECT_EQ(enforced, 3);  // NCCL_CROSS_NIC, NCCL_PROTO, NCCL_MIN_NCHANNELS
  // Without the plugin installed, the plan says so.
  bool warned = false;
  for (const auto& note : plan.notes) warned |= note.starts_with("warning: no libnccl-net.so");
  EXPECT_TRUE(warned);
}

TEST(Plan, TaskWithTwoGpus) {
  Topology topo = LoadFixture("a3mega.xml");
  EnvPlan plan = Plan(topo, ProfileId::kA3Mega, {3, 1});
  EXPECT_EQ(plan.nics, (std::vector<std::string>{"enp14s0", "enp7s0"}));
  EXPECT_EQ(FormatCpuList(plan.cpus), "13-25,39-51,117-129,143-155");
  EXPECT_TRUE(EnvOf(plan)["NCCL_FASTRAK_IFNAME"].starts_with("enp14s0,enp7s0,enp6s0"));
}

TEST(Plan, DevicesNumberedFromZeroUnderConstrainDevices) {
  std::string note;
  // --gpus-per-task=1, two tasks, step GPUs 0,1: each task sees "0"; task 1 has the step's second GPU.
  EXPECT_EQ(TaskNodeGpus({0}, {{0, 1}, {0, 1}}, 1, 2, &note), (std::vector<int>{1}));
  EXPECT_EQ(note, "CUDA_VISIBLE_DEVICES=0 is node GPU 1 (SLURM_STEP_GPUS=0,1; Slurm numbers devices from 0 under "
                  "ConstrainDevices)");
  note.clear();
  EXPECT_EQ(TaskNodeGpus({0}, {{0, 1}, {0, 1}}, 0, 2, &note), (std::vector<int>{0}));
  EXPECT_EQ(note, "");
  // --gpus-per-task=4 on GPUs 4-7 and 0-3 of a step with all eight.
  std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(TaskNodeGpus({0, 1, 2, 3}, {all, all}, 1, 2, nullptr), (std::vector<int>{4, 5, 6, 7}));
  // A step on GPUs 3,4 sees 0,1; its task alone uses both, two tasks one each.
  EXPECT_EQ(TaskNodeGpus({0, 1}, {{0, 1}, {3, 4}}, 0, 1, nullptr), (std::vector<int>{3, 4}));
  EXPECT_EQ(TaskNodeGpus({0, 1}, {{0, 1}, {3, 4}}, 1, 2, nullptr), (std::vector<int>{4}));
  // Without ConstrainDevices the numbers are the node's already.
  EXPECT_EQ(TaskNodeGpus({1}, {{0, 1}, {0, 1}}, 1, 2, nullptr), (std::vector<int>{1}));
  EXPECT_EQ(TaskNodeGpus({4}, {{3, 4}, {3, 4}}, 1, 2, nullptr), (std::vector<int>{4}));
  EXPECT_EQ(TaskNodeGpus({3, 4}, {{3, 4}, {3, 4}}, 0, 1, nullptr), (std::vector<int>{3, 4}));
  // No GPUs from Slurm (CUDA_VISIBLE_DEVICES set by hand): as TaskGpus.
  EXPECT_EQ(TaskNodeGpus({2, 5}, {{2, 5}, {}}, 1, 2, nullptr), (std::vector<int>{5}));
}

TEST(Plan, MoreTasksThanGpus) {
  // 16 tasks on a node whose tasks all see GPUs 0-7: task i uses GPU i % 8; a task alone uses all it sees.
  std::vector<int> visible = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(TaskGpus(visible, 9, 16), (std::vector<int>{1}));
  EXPECT_EQ(TaskGpus(visible, 15, 16), (std::vector<int>{7}));
  EXPECT_EQ(TaskGpus(visible, 0, 1), visible);
  EXPECT_EQ(TaskGpus({3}, 5, 16), (std::vector<int>{3}));
  EXPECT_TRUE(TaskGpus({}, 5, 16).empty());
  Topology topo = LoadFixture("a3mega.xml");
  EXPECT_EQ(Plan(topo, ProfileId::kA3Mega, TaskGpus(visible, 9, 16)).cpus,
            Plan(topo, ProfileId::kA3Mega, TaskGpus(visible, 1, 16)).cpus);
  // A task without a GPU gets the node-wide variables and no CPU binding.
  EnvPlan cpu_task = Plan(topo, ProfileId::kA3Mega, {});
  EXPECT_TRUE(cpu_task.cpus.empty());
  EXPECT_EQ(EnvOf(cpu_task)["NCCL_FASTRAK_IFNAME"].substr(0, 14), "enp6s0,enp7s0,");
}

TEST(Plan, GpuMissingFromTheTopologyIsANoteNotAnError) {
  Topology topo = LoadFixture("a3high.xml");
  EnvPlan plan = Plan(topo, ProfileId::kA3High, {9});
  EXPECT_TRUE(plan.cpus.empty());
  EXPECT_TRUE(plan.nics.empty());
  bool noted = false;
  for (const auto& note : plan.notes) noted |= note.starts_with("GPU 9 is not in the topology of this node (8 GPUs)");
  EXPECT_TRUE(noted);
  EXPECT_EQ(EnvOf(plan)["NCCL_SOCKET_IFNAME"], "eth0");
}

TEST(Plan, GenericUsesTheClosestHcaOrNic) {
  Topology dgx = LoadFixture("dgx-h100-ib.xml");
  auto env = EnvOf(Plan(dgx, ProfileId::kGeneric, {1}));
  EXPECT_EQ(env["NCCL_IB_HCA"], "=mlx5_1:1");
  EXPECT_EQ(env.count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(env.count("NCCL_FASTRAK_IFNAME"), 0u);
  Topology mega = LoadFixture("a3mega.xml");
  auto eth = EnvOf(Plan(mega, ProfileId::kGeneric, {4}));
  EXPECT_EQ(eth["NCCL_SOCKET_IFNAME"], "enp134s0");
  EXPECT_EQ(eth.count("NCCL_IB_HCA"), 0u);
}

std::vector<std::string> NicNames(const Topology& topo, const std::vector<size_t>& nics) {
  std::vector<std::string> names;
  for (size_t n : nics) names.push_back(topo.nics[n].ib_device.empty() ? topo.nics[n].name : topo.nics[n].ib_device);
  return names;
}

// NCCL reads NCCL_IB_HCA=mlx5_1 as a prefix, which on a node with twelve HCAs also takes mlx5_10 and mlx5_11;
// the plan names exact devices and their active ports.
TEST(Plan, TwelveHcasGetExactNamesWithPorts) {
  Topology dgx = LoadFixture("dgx-h100-12hca.xml");
  const auto all = NicNames(dgx, [&] {
    std::vector<size_t> every(dgx.nics.size());
    for (size_t i = 0; i < every.size(); ++i) every[i] = i;
    return every;
  }());
  ASSERT_NE(std::find(all.begin(), all.end(), "mlx5_10"), all.end());
  ASSERT_NE(std::find(all.begin(), all.end(), "mlx5_11"), all.end());
  EXPECT_EQ(EnvOf(Plan(dgx, ProfileId::kGeneric, {1}))["NCCL_IB_HCA"], "=mlx5_1:1");
  EXPECT_EQ(EnvOf(Plan(dgx, ProfileId::kGeneric, {7}))["NCCL_IB_HCA"], "=mlx5_7:1");
  // A task with two GPUs gets both HCAs, each exact.
  EXPECT_EQ(EnvOf(Plan(dgx, ProfileId::kGeneric, {0, 1}))["NCCL_IB_HCA"], "=mlx5_0:1,mlx5_1:1");
  // Storage HCAs and the onboard port stay out of the data NICs.
  NodePlacement placement = PlaceNode(dgx, false);
  EXPECT_EQ(NicNames(dgx, placement.data_nics),
            (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"}));
}

// Without a PCIe switch shared with the GPUs every NIC used to be a data NIC: the onboard 1 GbE port came first in
// PCI order and the ConnectX's Ethernet function beside its InfiniBand one. Now the GPU path takes the
// InfiniBand function, and slow onboard ports are host NICs.
TEST(Plan, InfiniBandFunctionOverEthernetAndNoOnboardPorts) {
  Topology flat = LoadFixture("flat-dual-port.xml");
  NodePlacement placement = PlaceNode(flat, false);
  EXPECT_EQ(NicNames(flat, placement.data_nics), (std::vector<std::string>{"mlx5_1", "mlx5_2"}));
  EXPECT_EQ(NicNames(flat, placement.host_nics), (std::vector<std::string>{"eno1", "eno2", "mlx5_0"}));
  auto gpu0 = EnvOf(Plan(flat, ProfileId::kGeneric, {0}));
  EXPECT_EQ(gpu0["NCCL_IB_HCA"], "=mlx5_1:1");
  EXPECT_EQ(gpu0.count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(EnvOf(Plan(flat, ProfileId::kGeneric, {3}))["NCCL_IB_HCA"], "=mlx5_2:1");
  // Where every NIC is slow, none is left out: the rule compares NICs with each other.
  Topology slow = flat;
  for (Nic& nic : slow.nics) nic.link_gbps = 0.5;
  EXPECT_EQ(PlaceNode(slow, false).data_nics.size(), 4u);  // all but the Ethernet function
}

TEST(Plan, NoneChangesNothing) {
  EnvPlan plan = Plan(LoadFixture("a3mega.xml"), ProfileId::kNone, {0});
  EXPECT_TRUE(plan.env.empty());
  EXPECT_TRUE(plan.cpus.empty());
}

TEST(Plan, AutoFollowsTheInstalledPlugin) {
  Topology mega = LoadFixture("a3mega.xml");
  auto tcpxo = [](const std::string& path) { return path.starts_with("/var/lib/tcpxo/lib64"); };
  EXPECT_EQ(Plan(mega, ProfileId::kAuto, {0}, tcpxo).profile, ProfileId::kA3Mega);
  EXPECT_EQ(Plan(mega, ProfileId::kAuto, {0}).profile, ProfileId::kGeneric);
  Topology high = LoadFixture("a3high.xml");
  auto tcpx = [](const std::string& path) { return path.starts_with("/usr/local/tcpx/lib64"); };
  EnvPlan plan = Plan(high, ProfileId::kAuto, {0}, tcpx);
  EXPECT_EQ(plan.profile, ProfileId::kA3High);
  EXPECT_EQ(EnvOf(plan)["LD_LIBRARY_PATH"], "/usr/local/tcpx/lib64");
  EXPECT_EQ(Plan(high, ProfileId::kAuto, {0}, tcpxo).profile, ProfileId::kGeneric);  // wrong plugin for A3 High
  EXPECT_EQ(Plan(LoadFixture("dgx-h100-ib.xml"), ProfileId::kAuto, {0}).profile, ProfileId::kGeneric);
  EnvPlan cpu = Plan(LoadFixture("cpu-only.xml"), ProfileId::kAuto, {});
  EXPECT_EQ(cpu.profile, ProfileId::kNone);
  // auto's choice of none is visible to the job, and nothing else is set or pinned.
  EXPECT_EQ(EnvOf(cpu), (std::map<std::string, std::string>{{"SRUNWAY_NETWORK_PROFILE", "none"}}));
  EXPECT_TRUE(cpu.cpus.empty());
  // The admin's plugin_path replaces the usual places.
  auto custom = [](const std::string& path) { return path == "/opt/fastrak/libnccl-net.so"; };
  PlanRequest request;
  request.task_gpus = {0};
  request.plugin_dir = "/opt/fastrak";
  request.exists = custom;
  EXPECT_EQ(MakePlan(mega, request).profile, ProfileId::kA3Mega);
}

TEST(Plan, CpuOnlyNodeWithGenericSetsNoNicVariables) {
  EnvPlan plan = Plan(LoadFixture("cpu-only.xml"), ProfileId::kGeneric, {});
  auto env = EnvOf(plan);
  EXPECT_EQ(env.count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(env["SRUNWAY_NETWORK_PROFILE"], "generic");
  EXPECT_TRUE(plan.cpus.empty());
}

}  // namespace
}  // namespace srunway::topology
