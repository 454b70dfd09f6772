// Cluster Toolkit blueprints, offline: load a blueprint and its deployment file, validate them (every problem as
// file:line:column, the toolkit's offline validators with its skip and validation_level rules), and expand them
// (deployment variables merged, $(vars.x) resolved, defaults filled in) into a stable, idempotent YAML text.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::blueprint {

struct Diagnostic {
  std::string file;
  int line = 0;    // 1-based; 0 when the problem has no place (a missing deployment variable, say)
  int column = 0;  // 1-based
  std::string message;
  bool warning = false;
};
// "file:line:column: message", with "warning: " before the message for warnings.
std::string FormatDiagnostic(const Diagnostic& diagnostic);

// One parsed YAML file.
struct Document {
  std::string file;
  YAML::Node root;
};

struct Module {
  std::string id, source, kind;  // kind: terraform (the default) or packer
  std::vector<std::string> use;  // a single id or a list, as written
  YAML::Node node;               // the module's map, for marks and settings
  size_t group = 0;              // index of its deployment group
};

struct Blueprint {
  Document blueprint;
  std::optional<Document> deployment;
  YAML::Node vars;  // the blueprint's vars, then the deployment file's, then --set overrides
  std::vector<std::string> groups;
  std::vector<Module> modules;  // in file order
  const Module* Find(std::string_view id) const;
  YAML::Node Var(std::string_view name) const;  // undefined when there is no such variable
};

// Limits far beyond any real blueprint, so that a broken or hostile one gets a clear error instead of exhausting
// the stack, memory or time. A YAML document nests at most kMaxNesting levels and holds at most kMaxValues values
// (keys, values and containers) once its aliases are expanded, which can multiply: ten aliases of a list of ten
// aliases of ... A value resolved through deployment variables, which nest and multiply the same way (and double
// strings: "$(vars.b)$(vars.b)"), nests at most kMaxResolvedNesting levels (room for where settings sit: an
// expansion reads back within kMaxNesting) and holds at most kMaxValues values and kMaxResolvedBytes bytes of
// text; a valid blueprint holds at most kMaxValues / 2 values with all of them resolved (room for what expansion
// adds: an expansion reads back within kMaxValues), and kMaxResolvedBytes of resolved text.
inline constexpr int kMaxNesting = 64;
inline constexpr int kMaxResolvedNesting = 32;
inline constexpr size_t kMaxValues = 20000;
inline constexpr size_t kMaxResolvedBytes = 1 << 20;

// Reads and parses FILE (and DEPLOYMENT when given); only an unreadable file or malformed YAML (InvalidArgument,
// "file:line:column: message") fails. Problems of the deployment file's shape go to `diagnostics`; Validate finds
// the blueprint's. `sets` are name=value overrides of deployment variables (values parsed as YAML).
common::StatusOr<Blueprint> Load(const std::string& file, const std::optional<std::string>& deployment,
                                 const std::vector<std::pair<std::string, std::string>>& sets,
                                 std::vector<Diagnostic>& diagnostics);
// The same from text, for tests and the fuzzer.
common::StatusOr<Blueprint> LoadText(const std::string& file, const std::string& text);

struct ValidatorResult {
  std::string name;
  std::string outcome;  // "passed", "failed", "skipped (offline)", "skipped (skip: true)", "not run (validation_level 0)"
};

// Every check, every problem. Validator failures are errors at validation_level 2 (the default), warnings at 1,
// and not reported at 0.
std::vector<Diagnostic> Validate(const Blueprint& blueprint, std::vector<ValidatorResult>* validators = nullptr);

// The fully resolved blueprint as YAML. Expanding the result again gives the same text.
std::string Expand(const Blueprint& blueprint);

// Expressions in a string: the text inside each unescaped $(...) ("vars.zone", "network.subnetwork_self_link",
// "flatten([vars.a, vars.b])"). An unterminated one is reported through `error`.
std::vector<std::string> FindExpressions(std::string_view text, std::string* error = nullptr);
// The references an expression makes: ("vars", "zone"), ("network", "subnetwork_self_link").
std::vector<std::pair<std::string, std::string>> FindReferences(std::string_view expression);

// A value that Slurm's configuration files take as one word (KEY=VALUE, among others on the line): empty when
// `value` is one, else what keeps it from being one ("holds a space").
std::string NotOneWord(std::string_view value);

// map[key] without inserting or throwing: an undefined node when `map` is not a map or has no such key.
YAML::Node Lookup(const YAML::Node& map, std::string_view key);

// What a resolved value holds.
struct ResolvedSize {
  size_t values = 0;        // keys, values and containers, and those of variables resolved only to find that they
                            // cannot be spliced into a string
  size_t bytes = 0;         // of its scalars (keys included)
  bool too_large = false;   // past kMaxResolvedNesting, kMaxValues or kMaxResolvedBytes
};
// A setting's value through the deployment variables: $(vars.x) resolved (recursively), anything else as is. A
// value too large to resolve is returned as written (Validate reports it). `size`, when given, says how large.
YAML::Node Resolve(const Blueprint& blueprint, const YAML::Node& value, ResolvedSize* size = nullptr);

}  // namespace srunway::blueprint
