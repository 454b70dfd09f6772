// libFuzzer target: the SPANK plugin's plugstack arguments, user option values and CUDA_VISIBLE_DEVICES parser.
#include <cstdint>
#include <string>
#include <vector>

#include "topology/plugin_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace srunway::topology;
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  auto config = ParsePluginArgs(args);
  (void)ChooseProfile(config.ok() ? *config : PluginConfig{}, text);
  (void)ParseGpuAffinity(text);
  (void)ParseVisibleDevices(text);
  (void)ParseCpuList(text, "fuzz");
  EnvPlan plan;
  plan.env.push_back(EnvVar{"NCCL_SOCKET_IFNAME", text, VarMode::kSet, false});
  (void)DecideEnv(plan, [&](const std::string&) { return std::optional<std::string>(text); }, {});
  return 0;
}
