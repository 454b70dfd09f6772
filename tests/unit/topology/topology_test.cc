// Tests for reading topologies from hwloc XML: GPUs, NICs, NUMA nodes, switches; and CPU lists.
#include "topology/topology.h"

#include <gtest/gtest.h>

#include <map>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/fs.h"
#include "tests/unit/temp_dir.h"
#include "tests/unit/topology/fixture.h"

namespace srunway::topology {
namespace {

TEST(Topology, A3Mega) {
  Topology topo = LoadFixture("a3mega.xml");
  ASSERT_EQ(topo.gpus.size(), 8u);
  ASSERT_EQ(topo.nics.size(), 9u);
  ASSERT_EQ(topo.numa_nodes.size(), 2u);
  EXPECT_EQ(topo.gpus[0].pci, "0000:04:00.0");
  EXPECT_EQ(topo.gpus[7].pci, "0000:8b:00.0");
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(topo.gpus[i].index, i);
    EXPECT_EQ(topo.gpus[i].numa, i / 4);
    EXPECT_EQ(topo.gpus[i].package, i / 4);
    EXPECT_NE(topo.gpus[i].switch_id, 0u);
  }
  EXPECT_EQ(topo.gpus[0].switch_id, topo.gpus[1].switch_id);
  EXPECT_NE(topo.gpus[1].switch_id, topo.gpus[2].switch_id);
  EXPECT_EQ(topo.nics[0].name, "enp0s12");
  EXPECT_EQ(topo.nics[0].switch_id, 0u);  // on the host bridge
  EXPECT_EQ(topo.nics[0].vendor_id, 0x1ae0);
  EXPECT_EQ(topo.nics[1].name, "enp6s0");
  EXPECT_EQ(topo.nics[1].switch_id, topo.gpus[0].switch_id);
  // Socket 0 is cores 0-51 with their hyperthreads 104-155.
  const NumaNode* numa0 = topo.FindNuma(0);
  ASSERT_NE(numa0, nullptr);
  ASSERT_EQ(numa0->cores.size(), 52u);
  EXPECT_EQ(numa0->cores.front(), (std::vector<int>{0, 104}));
  EXPECT_EQ(numa0->cores.back(), (std::vector<int>{51, 155}));
  EXPECT_EQ(topo.AllPus().size(), 208u);
}

TEST(Topology, DgxIndicesFromCudaDevicesAndInfiniBand) {
  Topology topo = LoadFixture("dgx-h100-ib.xml");
  ASSERT_EQ(topo.gpus.size(), 8u);
  EXPECT_EQ(topo.gpus[0].pci, "0000:18:00.0");
  EXPECT_EQ(topo.gpus[7].index, 7);
  int hcas = 0;
  for (const Nic& nic : topo.nics) hcas += nic.ib_device.empty() ? 0 : 1;
  EXPECT_EQ(hcas, 8);
  EXPECT_EQ(topo.nics[1].ib_device, "mlx5_0");
  EXPECT_EQ(topo.nics[1].class_id, 0x0207);
  EXPECT_EQ(topo.FindNuma(1)->cores.size(), 56u);
}

// Link speed and port state are what the data-NIC rule and NCCL_IB_HCA's ports are decided by.
TEST(Topology, NicLinkSpeedsAndActivePorts) {
  Topology topo = LoadFixture("dgx-h100-12hca.xml");
  std::map<std::string, const Nic*> by_name;
  for (const Nic& nic : topo.nics) by_name[nic.ib_device.empty() ? nic.name : nic.ib_device] = &nic;
  ASSERT_EQ(by_name.size(), 13u);  // twelve HCAs and the onboard port
  EXPECT_DOUBLE_EQ(by_name["eno1"]->link_gbps, 0.5);
  EXPECT_NEAR(by_name["mlx5_0"]->link_gbps, 31.5077, 1e-3);
  EXPECT_EQ(by_name["mlx5_0"]->active_ports, (std::vector<int>{1}));
  EXPECT_EQ(by_name["mlx5_9"]->active_ports, (std::vector<int>{1}));  // port 2 is down
  EXPECT_TRUE(by_name["eno1"]->active_ports.empty());
  auto round = TopologyFromAnswer(TopologyAnswer(topo).dump());
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->nics[0].link_gbps, topo.nics[0].link_gbps);
  EXPECT_EQ(round->nics[1].active_ports, topo.nics[1].active_ports);
}

// hwloc 2 answers a newer hwloc's XML with EINVAL alone; the error says what the file is instead.
TEST(Topology, XmlFromANewerHwlocSaysSo) {
  auto text = common::ReadFile(FixturePath("cpu-only.xml"));
  ASSERT_TRUE(text.ok());
  std::string newer = *text;
  const size_t at = newer.find("<topology version=\"2.0\">");
  ASSERT_NE(at, std::string::npos);
  newer.replace(at, 26, "<topology version=\"3.0\">");
  auto loaded = LoadTopologyXmlText(newer);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("written by hwloc 3 (topology version 3.0)"), std::string::npos)
      << loaded.status().message();
  EXPECT_NE(loaded.status().message().find("export it again with hwloc 2.x's lstopo"), std::string::npos);
  EXPECT_TRUE(LoadTopologyXmlText(*text).ok());
}

TEST(Topology, CpuOnly) {
  Topology topo = LoadFixture("cpu-only.xml");
  EXPECT_TRUE(topo.gpus.empty());
  ASSERT_EQ(topo.nics.size(), 1u);
  EXPECT_EQ(topo.nics[0].name, "eth0");
  EXPECT_EQ(topo.AllPus(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Topology, BadXmlIsAnErrorNamingTheSource) {
  auto missing = LoadTopologyXmlFile("/nonexistent/srunway.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/srunway.xml"), std::string::npos);
  for (const char* text : {"", "<topology", "not xml at all", "<?xml version=\"1.0\"?><topology version=\"2.0\"></topology>"}) {
    EXPECT_FALSE(LoadTopologyXmlText(text).ok()) << text;
  }
  // A truncated copy of a real fixture.
  auto whole = common::ReadFile(FixturePath("a3high.xml"));
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(LoadTopologyXmlText(whole->substr(0, whole->size() / 2)).ok());
}

TEST(Topology, LiveMachineLoads) {
  auto live = LoadLiveTopology();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_FALSE(live->numa_nodes.empty());
  EXPECT_FALSE(live->AllPus().empty());
}

TEST(CpuList, FormatAndParse) {
  EXPECT_EQ(FormatCpuList({8, 9, 10, 112, 113, 3}), "3,8-10,112-113");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({5, 5, 4}), "4-5");
  EXPECT_EQ(*ParseCpuList("0-3,8", "x"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(*ParseCpuList(" 1 \n", "x"), (std::vector<int>{1}));
  EXPECT_TRUE(ParseCpuList("", "x")->empty());
  for (const char* bad : {"a", "3-1", "1,,2", "-1", "1-", "99999999"}) {
    EXPECT_FALSE(ParseCpuList(bad, "Cpus_allowed_list").ok()) << bad;
  }
}

}  // namespace
}  // namespace srunway::topology

namespace srunway::topology {
namespace {

// The helper program the tests start (the build tree's), named by meson in SRUNWAY_TOPO_HELPER.
std::string Helper() {
  const char* helper = std::getenv("SRUNWAY_TOPO_HELPER");
  return helper != nullptr ? helper : DefaultTopologyHelper();
}

TEST(IsolatedLoad, GivesTheSameTopology) {
  Topology direct = LoadFixture("a3mega.xml");
  auto isolated = LoadTopologyIsolated(FixturePath("a3mega.xml"), 10000, Helper());
  ASSERT_TRUE(isolated.ok()) << isolated.status().ToString();
  ASSERT_EQ(isolated->gpus.size(), direct.gpus.size());
  for (size_t i = 0; i < direct.gpus.size(); ++i) {
    EXPECT_EQ(isolated->gpus[i].pci, direct.gpus[i].pci);
    EXPECT_EQ(isolated->gpus[i].switch_id, direct.gpus[i].switch_id);
  }
  ASSERT_EQ(isolated->nics.size(), direct.nics.size());
  EXPECT_EQ(isolated->nics[3].name, direct.nics[3].name);
  EXPECT_EQ(isolated->FindNuma(1)->cores, direct.FindNuma(1)->cores);
  auto live = LoadTopologyIsolated("", 10000, Helper());
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_FALSE(live->numa_nodes.empty());
}

TEST(IsolatedLoad, AFileThatCrashesHwlocIsAnError) {
  // Found by the topology_xml fuzzer: one missing complete_cpuset makes hwloc 2.9 dereference NULL.
  const std::string path = FixturePath("corrupt-no-complete-cpuset.xml");
  auto topology = LoadTopologyIsolated(path, 10000, Helper());
  ASSERT_FALSE(topology.ok());
  EXPECT_TRUE(topology.status().message().starts_with(path + ": hwloc crashed (signal ")) << topology.status().message();
  auto missing = LoadTopologyIsolated("/nonexistent/node.xml", 10000, Helper());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/node.xml"), std::string::npos);
  auto no_helper = LoadTopologyIsolated("", 10000, "/nonexistent/srunway-topo-helper");
  ASSERT_FALSE(no_helper.ok());
  EXPECT_NE(no_helper.status().message().find("/nonexistent/srunway-topo-helper"), std::string::npos)
      << no_helper.status().message();
}

// A helper that never answers (here a script that sleeps, with a child of its own) is killed at the deadline.
TEST(IsolatedLoad, AHangIsCutOffAtTheDeadline) {
  testing::TempDir temp("srunway-topo-hang");
  const std::string script = (temp.path() / "stuck-helper").string();
  ASSERT_TRUE(common::WriteFileAtomic(script, "#!/bin/sh\nsleep 60 & sleep 60\n").ok());
  ::chmod(script.c_str(), 0755);
  auto stuck = LoadTopologyIsolated("/stuck.xml", 200, script);
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status().code(), common::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stuck.status().message(), "/stuck.xml: hwloc did not finish within 200 ms");
}

// The helper's answer is parsed, never trusted: garbage is an error, not an exception.
TEST(IsolatedLoad, MalformedAnswersAreErrors) {
  for (const char* answer : {"", "[]", "{\"ok\": true}", "{\"ok\": true, \"topology\": {\"source\": 1}}",
                             "{\"ok\": false, \"error\": 3}", "{\"ok\": 1}", "{\"ok\": \"yes\"}"}) {
    EXPECT_FALSE(TopologyFromAnswer(answer).ok()) << answer;
  }
  // Numbers a field's type cannot hold (out of range, or not integers) are refused, not converted.
  common::Json good = TopologyAnswer(LoadFixture("a3mega.xml"));
  for (const auto& [path, value] : std::vector<std::pair<std::string, common::Json>>{
           {"/topology/gpus/0/0", 1e30}, {"/topology/gpus/0/0", 2.5}, {"/topology/nics/0/3", 70000},
           {"/topology/nics/0/4", -1}, {"/topology/numa/0/2/0/0", 4294967296LL}, {"/topology/gpus/0/2", "x"}}) {
    common::Json bad = good;
    bad[common::Json::json_pointer(path)] = value;
    auto parsed = TopologyFromAnswer(bad.dump());
    ASSERT_FALSE(parsed.ok()) << path << " = " << value.dump();
    EXPECT_TRUE(parsed.status().message().starts_with("topology helper sent a malformed answer: "))
        << parsed.status().message();
  }
  auto round = TopologyFromAnswer(TopologyAnswer(LoadFixture("a3mega.xml")).dump());
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->gpus.size(), 8u);
}

// The helper turns core dumps off before hwloc runs: a crash is already reported in one line, and a core of it
// per job step would fill the node's disk. With core dumps on in the caller and the kernel writing plain core
// files into the working directory, the helper's crash on the corrupt fixture must leave none.
TEST(IsolatedLoad, TheHelperDumpsNoCore) {
  auto pattern = common::ReadFile("/proc/sys/kernel/core_pattern");
  if (!pattern.ok() || pattern->starts_with("|") || pattern->find('/') != std::string::npos) {
    GTEST_SKIP() << "core files do not go to the working directory here";
  }
  testing::TempDir temp("srunway-topo-core");
  const auto previous = std::filesystem::current_path();
  std::filesystem::current_path(temp.path());
  const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  rlimit before{};
  ::getrlimit(RLIMIT_CORE, &before);
  ::setrlimit(RLIMIT_CORE, &unlimited);
  auto crashed = LoadTopologyIsolated(FixturePath("corrupt-no-complete-cpuset.xml"), 10000, Helper());
  ::setrlimit(RLIMIT_CORE, &before);
  std::filesystem::current_path(previous);
  ASSERT_FALSE(crashed.ok());
  EXPECT_NE(crashed.status().message().find("hwloc crashed"), std::string::npos) << crashed.status().message();
  for (const auto& entry : std::filesystem::directory_iterator(temp.path())) ADD_FAILURE() << "left " << entry.path();
}

}  // namespace
}  // namespace srunway::topology
