// Loads the hwloc XML fixtures of tests/fixtures/topology for the topology tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "topology/topology.h"

namespace srunway::topology {

inline std::string FixturePath(const std::string& name) {
  const char* dir = std::getenv("SRUNWAY_FIXTURES");
  return std::string(dir != nullptr ? dir : "tests/fixtures/topology") + "/" + name;
}

inline Topology LoadFixture(const std::string& name) {
  auto topology = LoadTopologyXmlFile(FixturePath(name));
  EXPECT_TRUE(topology.ok()) << name << ": " << topology.status().ToString();
  return topology.ok() ? *topology : Topology{};
}

}  // namespace srunway::topology
