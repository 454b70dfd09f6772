// srunway-topo-helper [XML]: loads the live machine's topology (or an hwloc XML file) with hwloc and prints it as
// JSON on stdout for LoadTopologyIsolated, which starts it with posix_spawn so that a crash or a hang of hwloc on
// a corrupt file ends this process, not the SPANK plugin's slurmstepd. Exit 0 whenever it printed an answer.
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "topology/topology.h"

int main(int argc, char** argv) {
  // A crash in hwloc is reported by the caller in one line; a core file would only fill the node's disk.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  if (argc > 2) {
    std::fprintf(stderr, "usage: srunway-topo-helper [XML]\n");
    return 2;
  }
  using namespace srunway::topology;
  auto topology = argc == 2 ? LoadTopologyXmlFile(argv[1]) : LoadLiveTopology();
  const std::string answer = TopologyAnswer(topology).dump();
  return std::fwrite(answer.data(), 1, answer.size(), stdout) == answer.size() && std::fflush(stdout) == 0 ? 0 : 3;
}
