// Node order by physical placement; see placement.h.
#include "topology/placement.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/hostlist.h"
#include "common/parse.h"

namespace srunway::topology {

common::StatusOr<OrderSource> ParseOrderSource(std::string_view name) {
  for (OrderSource s : {OrderSource::kAuto, OrderSource::kMetadata, OrderSource::kSlurm, OrderSource::kNone}) {
    if (OrderSourceName(s) == name) return s;
  }
  return common::InvalidArgument("--topology-order {}: expected auto, metadata, slurm or none", name);
}

std::string_view OrderSourceName(OrderSource source) {
  switch (source) {
    case OrderSource::kAuto: return "auto";
    case OrderSource::kMetadata: return "metadata";
    case OrderSource::kSlurm: return "slurm";
    case OrderSource::kNone: return "none";
  }
  return "none";
}

common::StatusOr<std::map<std::string, std::string>> ParsePhysicalHosts(std::string_view text, std::string_view where) {
  std::map<std::string, std::string> placement;
  int line_number = 0;
  for (std::string_view line : common::Split(text, '\n')) {
    ++line_number;
    line = common::Trim(line);
    if (line.empty() || line.front() == '#') continue;
    size_t space = line.find_first_of(" \t");
    std::string node(line.substr(0, space));
    std::string_view value = space == std::string_view::npos ? "" : common::Trim(line.substr(space));
    if (!value.empty() && value.front() != '/') {
      return common::InvalidArgument("{}:{}: '{}' is not a physical_host path (/CLUSTER/RACK/HOST)", where,
                                     line_number, value);
    }
    if (!value.empty()) placement[node] = std::string(value);
  }
  return placement;
}

common::StatusOr<std::map<std::string, std::string>> ParseSlurmTopology(std::string_view text) {
  // SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=node[1-2]
  // SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]
  std::map<std::string, std::string> parent;           // switch -> its parent switch
  std::map<std::string, std::string> leaf_of;          // node -> leaf switch
  for (std::string_view line : common::Split(text, '\n')) {
    std::string name, nodes, switches;
    for (std::string_view field : common::Split(common::Trim(line), ' ')) {
      size_t eq = field.find('=');
      if (eq == std::string_view::npos) continue;
      std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
      if (key == "SwitchName") name = value;
      if (key == "Nodes") nodes = value;
      if (key == "Switches") switches = value;
    }
    if (name.empty()) continue;
    if (!nodes.empty()) {
      SRUNWAY_ASSIGN_OR_RETURN(auto hosts, common::ExpandHostlist(nodes));
      for (const std::string& host : hosts) leaf_of.emplace(host, name);
    }
    if (!switches.empty()) {
      SRUNWAY_ASSIGN_OR_RETURN(auto children, common::ExpandHostlist(switches));
      for (const std::string& child : children) parent[child] = name;
    }
  }
  std::map<std::string, std::string> placement;
  for (const auto& [node, leaf] : leaf_of) {
    std::vector<std::string> path = {leaf};
    for (auto up = parent.find(leaf); up != parent.end() && path.size() < 64; up = parent.find(up->second)) {
      path.push_back(up->second);
    }
    std::reverse(path.begin(), path.end());
    std::string key;
    for (const std::string& s : path) key += "/" + s;
    placement[node] = key;
  }
  return placement;
}

std::vector<std::string> OrderByPlacement(std::span<const std::string> nodes,
                                          const std::map<std::string, std::string>& placement) {
  std::vector<std::string> order(nodes.begin(), nodes.end());
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    auto pa = placement.find(a), pb = placement.find(b);
    const bool placed_a = pa != placement.end(), placed_b = pb != placement.end();
    if (placed_a != placed_b) return placed_a;  // placed nodes first
    if (placed_a && pa->second != pb->second) return pa->second < pb->second;
    return a < b;
  });
  return order;
}

std::string HostfileFor(std::span<const std::string> order, int tasks_per_node) {
  std::string out;
  for (const std::string& node : order) {
    for (int i = 0; i < tasks_per_node; ++i) out += node + "\n";
  }
  return out;
}

}  // namespace srunway::topology
