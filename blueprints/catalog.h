// What srunway knows of the modules its blueprints use, offline: each module's inputs and outputs (for the
// toolkit's test_module_not_used and automatic use of deployment variables) and the types of its common settings.
// Modules outside the catalogue (local paths, other repositories, newer toolkit modules) are accepted and left
// unchecked.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace srunway::blueprint {

struct ModuleInfo {
  std::set<std::string> inputs;
  std::vector<std::string> outputs;
  // setting -> "string", "number", "bool", "list", "map", or "word": a string or number that Slurm's configuration
  // takes as one word (no space, line break, '#', '=' or quote).
  std::map<std::string, std::string> setting_types;
};

// The toolkit path inside a module source: "?ref=..." and everything up to "//" dropped, no trailing '/'.
std::string_view ModulePath(std::string_view source);

// The module behind `source`: a toolkit path ("modules/network/vpc"), the same inside a remote source
// ("github.com/GoogleCloudPlatform/cluster-toolkit//modules/network/vpc?ref=v1.44.0"), or srunway's own
// ("srunway/local/nodeset"). nullptr when unknown.
const ModuleInfo* FindModule(std::string_view source);

}  // namespace srunway::blueprint
