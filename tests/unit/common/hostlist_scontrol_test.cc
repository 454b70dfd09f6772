// Differential test: our hostlist expansion and compression against the real `scontrol show hostnames|hostlist`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/hostlist.h"
#include "common/subprocess.h"


namespace srunway::common {
namespace {

using Hosts = std::vector<std::string>;

// Runs scontrol with a minimal slurm.conf (it parses hostlists locally but insists on a configuration).
class Scontrol : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("SRUNWAY_SCONTROL");
    if (path == nullptr) return;
    scontrol_ = path;
    conf_ = std::filesystem::temp_directory_path() / ("srunway-hostlist-" + std::to_string(getpid()) + ".conf");
    std::ofstream(conf_) << "ClusterName=hostlist-test\nSlurmctldHost=localhost\n";
    setenv("SLURM_CONF", conf_.c_str(), 1);
  }
  static void TearDownTestSuite() {
    if (!conf_.empty()) std::filesystem::remove(conf_);
  }
  void SetUp() override {
    if (scontrol_.empty()) GTEST_SKIP() << "SRUNWAY_SCONTROL is not set";
  }

  // What `scontrol show <what> <argument>` printed (stderr too, when asked), without the trailing newline.
  static std::string Show(const char* what, const std::string& argument, bool with_stderr = false) {
    auto result = RunCommand({scontrol_, "show", what, argument}, with_stderr);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    std::string out = result.ok() ? result->output : "";
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  static Hosts ScontrolHostnames(const std::string& hostlist) {
    Hosts hosts;
    std::string out = Show("hostnames", hostlist);
    size_t start = 0;
    while (start < out.size()) {
      size_t end = out.find('\n', start);
      if (end == std::string::npos) end = out.size();
      hosts.push_back(out.substr(start, end - start));
      start = end + 1;
    }
    return hosts;
  }

  static std::string Join(const Hosts& hosts) {
    std::string joined;
    for (const auto& host : hosts) joined += (joined.empty() ? "" : ",") + host;
    return joined;
  }

  static inline std::string scontrol_;
  static inline std::filesystem::path conf_;
};

TEST_F(Scontrol, ExpansionMatches) {
  for (const char* text :
       {"gpu-a[01-03,07],login1", "n1,n3,n2", "r[1-2]-n[1-2]", "n[1-010]", "n[8-10]", "n[08-10]", "n1,n01,n2",
        "a,b,a", "n[01-3],n4", "x[0-1]y[2-3]", "node", "n[0]", "n[1-2] m[3]", "n[1-2],,m3", "123", "0[1-2]",
        "[1-2]", "n[1-2,4-5]", "n[1,2-3,2]", "n[1-2]abc[3-4]", "a[1-2]b[1-2]c[1-2]", "a[1-2]b[3-4]c[5-6]d[7-8]", "n0-1", "n[1-300]"}) {
    auto ours = ExpandHostlist(text);
    ASSERT_TRUE(ours.ok()) << text << ": " << ours.status().ToString();
    EXPECT_EQ(*ours, ScontrolHostnames(text)) << text;
  }
}

TEST_F(Scontrol, MalformedIsRejectedByBoth) {
  for (const char* text : {"n[3-1]", "n[a]", "n[1,,2]", "n[-1]", "n[1--2]", "n[]", "n[1-3]-ib", "x[1]y",
                           "n[[1-2]]", "n[0-65536]", "n[1-2]m"}) {
    EXPECT_FALSE(ExpandHostlist(text).ok()) << text;
    EXPECT_NE(Show("hostnames", text, true).find("Invalid hostlist"), std::string::npos) << text;
  }
}

// Random host sets: several prefixes, zero-padded and plain numbers, runs, repeats and names without digits.
Hosts RandomHosts(std::mt19937& rng) {
  static const char* kPrefixes[] = {"n", "gpu-a", "r1n", "", "x0y", "node-", "login"};
  std::uniform_int_distribution<int> count_dist(1, 14), prefix_dist(0, 6), width_dist(1, 3), number_dist(0, 120),
      kind_dist(0, 9), run_dist(1, 6);
  Hosts hosts;
  int count = count_dist(rng);
  while (static_cast<int>(hosts.size()) < count) {
    int kind = kind_dist(rng);
    if (kind == 0) {
      hosts.push_back(kind_dist(rng) < 5 ? "head" : "login");
    } else if (kind == 1 && !hosts.empty()) {
      hosts.push_back(hosts[std::uniform_int_distribution<size_t>(0, hosts.size() - 1)(rng)]);
    } else {
      std::string prefix = kPrefixes[prefix_dist(rng)];
      int width = width_dist(rng);
      int first = number_dist(rng);
      int run = kind < 6 ? run_dist(rng) : 1;
      for (int n = first; n < first + run; ++n) hosts.push_back(prefix + fmt::format("{:0{}}", n, width));
    }
  }
  return hosts;
}

TEST_F(Scontrol, RandomCompressionAndExpansionMatch) {
  const unsigned seed = 20261123;
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) {
    Hosts hosts = RandomHosts(rng);
    std::string joined = Join(hosts);
    std::string ours = CompressHostlist(hosts);
    ASSERT_EQ(ours, Show("hostlist", joined)) << "seed " << seed << " case " << i << ": " << joined;
    auto expanded = ExpandHostlist(ours);
    ASSERT_TRUE(expanded.ok()) << ours;
    EXPECT_EQ(*expanded, hosts) << ours;
    EXPECT_EQ(ScontrolHostnames(ours), hosts) << ours;
  }
}

}  // namespace
}  // namespace srunway::common
