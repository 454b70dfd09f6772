// Tests for the NCCL topology file: its structure on the A3 Mega fixture, and writing and removing it safely.
#include "topology/nccl_topo.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/fs.h"
#include "topology/plan.h"
#include "tests/unit/topology/fixture.h"

namespace srunway::topology {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(NcclTopo, A3MegaSwitchesHoldTheirGpusAndNics) {
  std::string xml = NcclTopologyXml(LoadFixture("a3mega.xml"));
  EXPECT_TRUE(xml.starts_with("<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"")) << xml;
  EXPECT_EQ(Count(xml, "<cpu numaid="), 2u);
  EXPECT_EQ(Count(xml, "class=\"0x060400\">"), 4u);      // four switches
  EXPECT_EQ(Count(xml, "class=\"0x030200\"/>"), 8u);     // eight GPUs
  EXPECT_EQ(Count(xml, "class=\"0x020000\"/>"), 9u);     // eight GPU NICs and the host NIC
  // GPU 0 and its NIC inside the first switch, the host NIC straight under socket 0.
  EXPECT_NE(xml.find("    <pci busid=\"0000:01:00.0\" class=\"0x060400\">\n"
                     "      <pci busid=\"0000:04:00.0\" class=\"0x030200\"/>\n"
                     "      <pci busid=\"0000:05:00.0\" class=\"0x030200\"/>\n"
                     "      <pci busid=\"0000:06:00.0\" class=\"0x020000\"/>\n"),
            std::string::npos) << xml;
  EXPECT_NE(xml.find("    <pci busid=\"0000:00:0c.0\" class=\"0x020000\"/>\n"), std::string::npos);
  EXPECT_EQ(Count(xml, "<pci "), Count(xml, "/>") + Count(xml, "</pci>"));  // every element closed
}

TEST(NcclTopo, CpuMask) {
  EXPECT_EQ(CpuMaskHex({0, 1, 2, 3}), "0000000f");
  EXPECT_EQ(CpuMaskHex({32, 63}), "80000001,00000000");
  EXPECT_EQ(CpuMaskHex({}), "00000000");
  Topology mega = LoadFixture("a3mega.xml");
  std::vector<int> numa0;
  for (const auto& core : mega.FindNuma(0)->cores) numa0.insert(numa0.end(), core.begin(), core.end());
  // PUs 0-51 and 104-155.
  EXPECT_EQ(CpuMaskHex(numa0), "0fffffff,ffffff00,00000000,000fffff,ffffffff");
}

TEST(NcclTopo, WriteAndRemove) {
  std::string parent = (std::filesystem::temp_directory_path() / "srunway-topo-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(parent.data()), nullptr);
  Topology topo = LoadFixture("a3high.xml");
  auto path = WriteNcclTopologyFile(topo, parent, getuid(), getgid());
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*common::ReadFile(*path), NcclTopologyXml(topo));
  struct stat info;
  ASSERT_EQ(stat(std::filesystem::path(*path).parent_path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  RemoveNcclTopologyFile(*path, getuid() + 1);  // someone else's: left alone
  EXPECT_TRUE(std::filesystem::exists(*path));
  RemoveNcclTopologyFile(*path, getuid());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(*path).parent_path()));
  EXPECT_FALSE(WriteNcclTopologyFile(topo, parent + "/missing", getuid(), getgid()).ok());
  std::filesystem::remove_all(parent);
}

TEST(NcclTopo, PlanExportsIt) {
  PlanRequest request;
  request.profile = ProfileId::kA3Mega;
  request.task_gpus = {0};
  request.exists = [](const std::string&) { return false; };
  request.nccl_topo_file = "/tmp/srunway-nccl-topo.x/nccl_topo.xml";
  EnvPlan plan = MakePlan(LoadFixture("a3mega.xml"), request);
  bool found = false;
  for (const EnvVar& var : plan.env) {
    found |= var.name == "NCCL_TOPO_FILE" && var.value == "/tmp/srunway-nccl-topo.x/nccl_topo.xml";
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace srunway::topology
