// libFuzzer target: hwloc XML topologies, malformed ones included, load (as the SPANK plugin does, in a helper
// process) or fail cleanly, and any topology that loads gives a plan for every profile.
#include <cstdint>
#include <string_view>

#include "topology/plan.h"
#include "topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace srunway::topology;
  std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto topology = LoadIsolated([&] { return LoadTopologyXmlText(xml); }, "fuzz input", 10000);
  if (!topology.ok()) return 0;
  auto never = [](const std::string&) { return false; };
  for (ProfileId id : {ProfileId::kAuto, ProfileId::kA3Mega, ProfileId::kA3High, ProfileId::kGeneric}) {
    std::vector<int> gpus;
    if (!topology->gpus.empty()) gpus.push_back(topology->gpus.back().index);
    PlanRequest request;
    request.profile = id;
    request.task_gpus = gpus;
    request.exists = never;
    (void)MakePlan(*topology, request);
  }
  return 0;
}
