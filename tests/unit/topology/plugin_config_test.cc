// Tests for plugstack arguments, user options and how a plan meets the task's environment.
#include "topology/plugin_config.h"

#include <gtest/gtest.h>

#include <map>

namespace srunway::topology {
namespace {

using Args = std::vector<std::string>;

TEST(PluginArgs, Defaults) {
  auto config = ParsePluginArgs(Args{});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->default_profile, ProfileId::kAuto);
  EXPECT_TRUE(config->allow_user_profile);
  EXPECT_TRUE(config->topology_xml.empty());
}

TEST(PluginArgs, AllKeys) {
  auto config = ParsePluginArgs(Args{"default_profile=a3mega", "allow_user_profile=no", "topology_xml=/etc/node.xml",
                                     "plugin_path=/var/lib/tcpxo/lib64", "force=NCCL_PROTO,NCCL_ALGO",
                                     "nccl_topo_file=yes", "tmpdir=/local/tmp",
                                     "topo_helper=/opt/srunway/libexec/srunway/srunway-topo-helper"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->default_profile, ProfileId::kA3Mega);
  EXPECT_FALSE(config->allow_user_profile);
  EXPECT_EQ(config->topology_xml, "/etc/node.xml");
  EXPECT_EQ(config->plugin_path, "/var/lib/tcpxo/lib64");
  EXPECT_EQ(config->forced, (std::set<std::string>{"NCCL_ALGO", "NCCL_PROTO"}));
  EXPECT_TRUE(config->nccl_topo_file);
  EXPECT_EQ(config->tmpdir, "/local/tmp");
  EXPECT_EQ(config->topo_helper, "/opt/srunway/libexec/srunway/srunway-topo-helper");
  EXPECT_FALSE(ParsePluginArgs(Args{"topo_helper=srunway-topo-helper"}).ok());
  EXPECT_FALSE(ParsePluginArgs(Args{"tmpdir=tmp"}).ok());
  EXPECT_FALSE(ParsePluginArgs(Args{"nccl_topo_file=sometimes"}).ok());
}

TEST(PluginArgs, BadArgumentsNameThemselves) {
  const std::pair<Args, const char*> cases[] = {
      {{"default_profile=fast"}, "unknown network profile 'fast'"},
      {{"allow_user_profile=maybe"}, "allow_user_profile='maybe' is not yes or no"},
      {{"topology_xml=relative.xml"}, "topology_xml='relative.xml' must be an absolute path"},
      {{"plugin_path="}, "plugin_path='' must be an absolute path"},
      {{"force=NCCL-PROTO"}, "'NCCL-PROTO' is not a valid environment variable name"},
      {{"colour=blue"}, "unknown plugstack argument 'colour'"},
      {{"default_profile"}, "plugstack argument 'default_profile' is not key=value"},
  };
  for (const auto& [args, message] : cases) {
    auto config = ParsePluginArgs(args);
    ASSERT_FALSE(config.ok()) << args[0];
    EXPECT_NE(config.status().message().find(message), std::string::npos) << config.status().message();
  }
}

TEST(UserOptions, ProfileChoiceAndAdminLock) {
  PluginConfig open;
  EXPECT_EQ(*ChooseProfile(open, std::nullopt), ProfileId::kAuto);
  EXPECT_EQ(*ChooseProfile(open, "none"), ProfileId::kNone);
  EXPECT_FALSE(ChooseProfile(open, "a3ultra").ok());
  PluginConfig locked;
  locked.default_profile = ProfileId::kA3Mega;
  locked.allow_user_profile = false;
  auto refused = ChooseProfile(locked, "none");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), common::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status().message(),
            "--network-profile=none refused: the administrator fixed the profile to a3mega (allow_user_profile=no)");
  EXPECT_EQ(*ChooseProfile(locked, "a3mega"), ProfileId::kA3Mega);  // asking for the fixed one is fine
  EXPECT_EQ(*ParseGpuAffinity("none"), GpuAffinity::kNone);
  EXPECT_FALSE(ParseGpuAffinity("nearest").ok());
}

TEST(UserOptions, VisibleDevices) {
  EXPECT_EQ(*ParseVisibleDevices("0,3,7"), (std::vector<int>{0, 3, 7}));
  EXPECT_TRUE(ParseVisibleDevices("")->empty());
  EXPECT_TRUE(ParseVisibleDevices("NoDevFiles")->empty());
  auto uuid = ParseVisibleDevices("GPU-8f4e1c2a-0000");
  ASSERT_FALSE(uuid.ok());
  EXPECT_NE(uuid.status().message().find("UUIDs and MIG devices cannot be placed"), std::string::npos);
  EXPECT_FALSE(ParseVisibleDevices("0,,1").ok());
}

EnvPlan SamplePlan() {
  EnvPlan plan;
  plan.env = {{"LD_LIBRARY_PATH", "/var/lib/tcpxo/lib64", VarMode::kPrepend, false},
              {"NCCL_SOCKET_IFNAME", "enp0s12", VarMode::kSet, false},
              {"NCCL_PROTO", "Simple,LL128", VarMode::kSet, true},
              {"NCCL_BUFFSIZE", "8388608", VarMode::kSet, false},
              {"NCCL_ALGO", "Ring", VarMode::kSet, false}};
  return plan;
}

TEST(DecideEnv, KeepsUserValuesUnlessEnforcedOrForced) {
  std::map<std::string, std::string> user = {{"LD_LIBRARY_PATH", "/usr/lib"},
                                             {"NCCL_SOCKET_IFNAME", "eth9"},
                                             {"NCCL_PROTO", "LL"},
                                             {"NCCL_ALGO", "Tree"}};
  auto get = [&](const std::string& name) -> std::optional<std::string> {
    auto it = user.find(name);
    return it == user.end() ? std::nullopt : std::optional(it->second);
  };
  auto decisions = DecideEnv(SamplePlan(), get, {"NCCL_ALGO"});
  ASSERT_TRUE(decisions.ok());
  std::map<std::string, EnvDecision> by_name;
  for (const auto& d : *decisions) by_name[d.name] = d;
  EXPECT_EQ(by_name["LD_LIBRARY_PATH"].value, "/var/lib/tcpxo/lib64:/usr/lib");
  EXPECT_EQ(by_name["NCCL_SOCKET_IFNAME"].action, EnvDecision::Action::kKeepUser);
  EXPECT_EQ(by_name["NCCL_SOCKET_IFNAME"].value, "eth9");
  EXPECT_EQ(by_name["NCCL_PROTO"].action, EnvDecision::Action::kOverrideUser);
  EXPECT_EQ(by_name["NCCL_PROTO"].value, "Simple,LL128");
  EXPECT_EQ(by_name["NCCL_PROTO"].user_value, "LL");
  EXPECT_EQ(by_name["NCCL_ALGO"].action, EnvDecision::Action::kOverrideUser);  // forced by the admin
  EXPECT_EQ(by_name["NCCL_BUFFSIZE"].action, EnvDecision::Action::kSet);
}

TEST(DecideEnv, PrependsOnceAndRejectsNewlines) {
  auto already = [](const std::string& name) -> std::optional<std::string> {
    if (name == "LD_LIBRARY_PATH") return "/var/lib/tcpxo/lib64:/usr/lib";
    return std::nullopt;
  };
  auto decisions = DecideEnv(SamplePlan(), already, {});
  ASSERT_TRUE(decisions.ok());
  for (const auto& d : *decisions) EXPECT_NE(d.name, "LD_LIBRARY_PATH");

  EnvPlan bad;
  bad.env = {{"NCCL_SOCKET_IFNAME", "eth0\nLD_PRELOAD=/tmp/x.so", VarMode::kSet, false}};
  auto rejected = DecideEnv(bad, [](const std::string&) { return std::nullopt; }, {});
  EXPECT_FALSE(rejected.ok());
  auto user_newline = [](const std::string&) -> std::optional<std::string> { return "a\nb"; };
  EXPECT_FALSE(DecideEnv(SamplePlan(), user_newline, {}).ok());
}

}  // namespace
}  // namespace srunway::topology
