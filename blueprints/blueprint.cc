// Cluster Toolkit blueprints, offline: loading, validation and expansion. See blueprint.h.
#include "blueprints/blueprint.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>
#include <span>
#include <tuple>

#include "blueprints/catalog.h"
#include "common/fs.h"
#include "common/parse.h"

namespace srunway::blueprint {
namespace {

using common::Status;
using common::StatusOr;

constexpr std::string_view kTopLevelKeys[] = {
    "blueprint_name",  "ghpc_version",        "validators",          "validation_level",
    "vars",            "deployment_groups",   "terraform_backend_defaults", "terraform_providers",
    "toolkit_modules_url", "toolkit_modules_version"};
constexpr std::string_view kGroupKeys[] = {"group", "terraform_backend", "terraform_providers", "modules"};
constexpr std::string_view kModuleKeys[] = {"id", "source", "kind", "use", "outputs", "settings"};
constexpr std::string_view kDeploymentKeys[] = {"vars", "terraform_backend_defaults"};
// Validators the toolkit runs against Google Cloud; offline they are reported as skipped.
constexpr std::string_view kCloudValidators[] = {"test_project_exists", "test_apis_enabled", "test_region_exists",
                                                 "test_zone_exists",    "test_zone_in_region", "test_reservation_exists",
                                                 "test_machine_type_in_zone"};
constexpr std::string_view kOfflineValidators[] = {"test_module_not_used", "test_deployment_variable_not_used"};

bool Contains(std::span<const std::string_view> list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::string Join(std::span<const std::string_view> list) {
  std::string out;
  for (std::string_view item : list) out += (out.empty() ? "" : ", ") + std::string(item);
  return out;
}

bool IsWord(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Group names and module ids, ^\w(-*\w)*$: word characters with dashes between them.
bool IsName(const std::string& name) {
  if (name.empty() || !IsWord(name.front()) || !IsWord(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsWord(c) || c == '-'; });
}

// A YAML 1.2 core-schema number: decimal (with fraction and exponent), 0x hex or 0o octal, with a sign.
bool IsNumber(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  auto all = [](std::string_view t, auto pred) { return !t.empty() && std::all_of(t.begin(), t.end(), pred); };
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (s.starts_with("0x")) return all(s.substr(2), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
  if (s.starts_with("0o")) return all(s.substr(2), [](char c) { return c >= '0' && c <= '7'; });
  std::string_view mantissa = s, exponent;
  if (size_t e = s.find_first_of("eE"); e != std::string_view::npos) {
    mantissa = s.substr(0, e);
    exponent = s.substr(e + 1);
    if (!exponent.empty() && (exponent[0] == '-' || exponent[0] == '+')) exponent.remove_prefix(1);
    if (!all(exponent, digit)) return false;
  }
  size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return all(mantissa, digit);
  std::string_view whole = mantissa.substr(0, dot), fraction = mantissa.substr(dot + 1);
  return (whole.empty() || all(whole, digit)) && all(fraction, digit);
}

// "vars.NAME" alone (spaces around allowed): NAME, else empty.
std::string PlainVar(std::string_view expression) {
  while (!expression.empty() && std::isspace(static_cast<unsigned char>(expression.front()))) expression.remove_prefix(1);
  while (!expression.empty() && std::isspace(static_cast<unsigned char>(expression.back()))) expression.remove_suffix(1);
  if (!expression.starts_with("vars.")) return "";
  std::string_view name = expression.substr(5);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || name[0] == '-') return "";
  for (char c : name) {
    if (!IsWord(c) && c != '-') return "";
  }
  return std::string(name);
}

// A value that is one variable and nothing else ("$(vars.NAME)"): NAME, else empty. It takes the variable's value,
// whatever its type.
std::string WholeVar(const std::string& text, const std::vector<std::string>& expressions) {
  const bool whole = expressions.size() == 1 && text.starts_with("$(") && text.ends_with(")") &&
                     text.size() == expressions[0].size() + 3;
  return whole ? PlainVar(expressions[0]) : "";
}

bool Has(const YAML::Node& map, std::string_view key) { return Lookup(map, key).IsDefined(); }

enum class ScalarType { kString, kNumber, kBool, kNull };

// YAML 1.2 core schema, as the toolkit reads it: quoted scalars are strings.
ScalarType TypeOf(const YAML::Node& node) {
  if (node.Tag() == "!") return ScalarType::kString;
  const std::string& s = node.Scalar();
  if (s == "true" || s == "false" || s == "True" || s == "False" || s == "TRUE" || s == "FALSE") return ScalarType::kBool;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return ScalarType::kNull;
  return IsNumber(s) ? ScalarType::kNumber : ScalarType::kString;
}

std::string_view TypeName(const YAML::Node& node) {
  if (node.IsMap()) return "map";
  if (node.IsSequence()) return "list";
  if (node.IsNull()) return "null";
  switch (TypeOf(node)) {
    case ScalarType::kString: return "string";
    case ScalarType::kNumber: return "number";
    case ScalarType::kBool: return "bool";
    case ScalarType::kNull: return "null";
  }
  return "?";
}

class Reporter {
 public:
  explicit Reporter(std::vector<Diagnostic>& out) : out_(out) {}
  void At(const std::string& file, const YAML::Node& node, std::string message, bool warning = false) {
    const YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
    At(file, mark, std::move(message), warning);
  }
  void At(const std::string& file, const YAML::Mark& mark, std::string message, bool warning = false) {
    const bool known = !mark.is_null();
    out_.push_back({file, known ? mark.line + 1 : 0, known ? mark.column + 1 : 0, std::move(message), warning});
  }

 private:
  std::vector<Diagnostic>& out_;
};

// Keys of a map that are not in `known`, and keys given twice.
void CheckKeys(Reporter& report, const std::string& file, const YAML::Node& map, std::span<const std::string_view> known,
               std::string_view where) {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsSequence() || it->first.IsMap()) continue;  // CheckKeysAreNames says so
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
    if (!seen.insert(key).second) report.At(file, it->first, fmt::format("{} key '{}' given twice", where, key));
    if (!Contains(known, key)) {
      report.At(file, it->first, fmt::format("unknown {} key '{}' (expected one of: {})", where, key, Join(known)));
    }
  }
}

// Calls `visit` on every scalar under `node`.
void ForEachScalar(const YAML::Node& node, const std::function<void(const YAML::Node&)>& visit) {
  if (node.IsScalar()) {
    visit(node);
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) ForEachScalar(item, visit);
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) ForEachScalar(it->second, visit);
  }
}

// Calls visit(node, level) on `root` and everything under it, keys included and aliases expanded, until visit
// returns false; `level` is where `root` sits. A list of what is left, not recursion: the limits it serves guard
// against a stack overflow.
template <typename Visit>
void Walk(const YAML::Node& root, int level, Visit visit) {
  std::vector<std::pair<YAML::Node, int>> left = {{root, level}};
  while (!left.empty()) {
    const auto [node, at] = std::move(left.back());
    left.pop_back();
    if (!node.IsDefined()) continue;
    if (!visit(node, at)) return;
    if (node.IsSequence()) {
      for (const YAML::Node& item : node) left.emplace_back(item, at + 1);
    } else if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        left.emplace_back(it->first, at + 1);
        left.emplace_back(it->second, at + 1);
      }
    }
  }
}

// What `node` holds (its keys and containers counted, aliases expanded), counted until its values pass `cap`.
ResolvedSize SizeOf(const YAML::Node& node, size_t cap) {
  ResolvedSize size;
  Walk(node, 0, [&](const YAML::Node& value, int) {
    if (value.IsScalar()) size.bytes += value.Scalar().size();
    return ++size.values <= cap;
  });
  return size;
}

// A document within kMaxNesting and kMaxValues; `level` is where `root` sits (1 for a whole document).
Status CheckShape(const std::string& file, const YAML::Node& root, int level) {
  Status status;
  size_t values = 0;
  Walk(root, level, [&](const YAML::Node& node, int at) {
    const YAML::Mark mark = node.Mark();
    if (at > kMaxNesting) {
      status = common::InvalidArgument("{}:{}:{}: nested more than {} levels deep", file, mark.line + 1,
                                       mark.column + 1, kMaxNesting);
    } else if (++values > kMaxValues) {
      status = common::InvalidArgument("{}:{}:{}: the document holds more than {} values once its YAML aliases are "
                                       "expanded", file, mark.line + 1, mark.column + 1, kMaxValues);
    }
    return status.ok();
  });
  return status;
}

// Keys that are lists or maps anywhere in a document: every lookup reads a key as its name, so one was skipped
// (a variable) or became '' (a module setting, expanded as such).
void CheckKeysAreNames(Reporter& report, const Document& document) {
  Walk(document.root, 1, [&](const YAML::Node& node, int) {
    if (!node.IsMap()) return true;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsSequence() || it->first.IsMap()) {
        report.At(document.file, it->first,
                  fmt::format("a key must be a name, not a {}", it->first.IsMap() ? "map" : "list"));
      }
    }
    return true;
  });
}

StatusOr<Document> Parse(const std::string& file, const std::string& text) {
  Document document{file, {}};
  try {
    document.root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& error) {  // yaml-cpp says "bad file"
    return common::InvalidArgument("{}:{}:{}: nested more than {} levels deep", file, error.mark.line + 1,
                                   error.mark.column + 1, kMaxNesting);
  } catch (const YAML::ParserException& error) {
    return common::InvalidArgument("{}:{}:{}: {}", file, error.mark.line + 1,
                                   error.mark.column + 1, common::Printable(error.msg, 200));
  }
  SRUNWAY_RETURN_IF_ERROR(CheckShape(file, document.root, 1));
  return document;
}

// Builds the model from a parsed blueprint, as far as its shape allows; Validate reports what is wrong with it.
Blueprint Build(Document document) {
  Blueprint bp;
  bp.blueprint = std::move(document);
  const YAML::Node& root = bp.blueprint.root;
  bp.vars = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) return bp;  // Validate says so
  YAML::Node vars = Lookup(root, "vars");
  if (vars.IsMap()) {
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      if (it->first.IsScalar()) bp.vars[it->first.Scalar()] = it->second;
    }
  }
  YAML::Node groups = Lookup(root, "deployment_groups");
  if (!groups.IsSequence()) return bp;
  for (const YAML::Node& group : groups) {
    const size_t index = bp.groups.size();
    YAML::Node name = Lookup(group, "group");
    bp.groups.push_back(name.IsScalar() ? name.Scalar() : "");
    YAML::Node modules = Lookup(group, "modules");
    if (!modules.IsSequence()) continue;
    for (const YAML::Node& node : modules) {
      Module module;
      module.node = node;
      module.group = index;
      if (YAML::Node id = Lookup(node, "id"); id.IsScalar()) module.id = id.Scalar();
      if (YAML::Node source = Lookup(node, "source"); source.IsScalar()) module.source = source.Scalar();
      YAML::Node kind = Lookup(node, "kind");
      module.kind = kind.IsScalar() ? kind.Scalar() : "terraform";
      YAML::Node use = Lookup(node, "use");
      if (use.IsScalar()) module.use.push_back(use.Scalar());
      if (use.IsSequence()) {
        for (const YAML::Node& item : use) module.use.push_back(item.IsScalar() ? item.Scalar() : "");
      }
      bp.modules.push_back(std::move(module));
    }
  }
  return bp;
}

// Deployment file: only vars and terraform_backend_defaults; its vars override the blueprint's.
void MergeDeployment(Blueprint& bp, Reporter& report) {
  const Document& dep = *bp.deployment;
  if (!dep.root.IsMap()) {
    report.At(dep.file, dep.root, "a deployment file is a YAML map with vars (and terraform_backend_defaults)");
    return;
  }
  CheckKeys(report, dep.file, dep.root, kDeploymentKeys, "deployment file");
  YAML::Node vars = Lookup(dep.root, "vars");
  if (vars.IsDefined() && !vars.IsMap()) report.At(dep.file, vars, "vars must be a map");
  if (vars.IsMap()) {
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      if (it->first.IsScalar()) bp.vars[it->first.Scalar()] = it->second;
    }
  }
}

// Every $(...) in `node`: where expressions are allowed, each reference must name a variable or a module; where
// they are not, any expression is an error.
void CheckExpressions(const Blueprint& bp, Reporter& report, const std::string& file, const YAML::Node& node,
                      bool allowed, std::string_view where) {
  ForEachScalar(node, [&](const YAML::Node& scalar) {
    std::string error;
    std::vector<std::string> expressions = FindExpressions(scalar.Scalar(), &error);
    if (!error.empty()) report.At(file, scalar, error);
    if (expressions.empty()) return;
    if (!allowed) {
      report.At(file, scalar, fmt::format("expressions are only allowed in vars, settings and terraform_backend, "
                                          "not in {}", where));
      return;
    }
    for (const std::string& expression : expressions) {
      for (const auto& [head, tail] : FindReferences(expression)) {
        if (head == "vars") {
          if (!Has(bp.vars, tail)) report.At(file, scalar, fmt::format("$(vars.{}): no deployment variable '{}'", tail, tail));
        } else if (bp.Find(head) == nullptr) {
          report.At(file, scalar, fmt::format("$({}.{}): no module with id '{}'", head, tail, head));
        }
      }
    }
  });
}

// The document whose terraform_backend_defaults apply: the deployment file's when it has them, else the
// blueprint's.
const Document& BackendDefaultsSource(const Blueprint& bp) {
  return bp.deployment && Has(bp.deployment->root, "terraform_backend_defaults") ? *bp.deployment : bp.blueprint;
}

// What Expand resolves (vars, backends, settings) must resolve within the limits (Resolve keeps it as written
// otherwise), and the blueprint with all of it resolved must hold at most kMaxValues / 2 values, so that its
// expansion reads back, and kMaxResolvedBytes of text. After the first error nothing more is resolved: the work
// stays bounded.
class ExpandedSize {
 public:
  explicit ExpandedSize(const Blueprint& bp) : bp_(bp) {
    values_ = SizeOf(bp.blueprint.root, kMaxValues).values;
    if (bp.deployment) values_ += SizeOf(bp.deployment->root, kMaxValues).values;
  }

  // `place` is where an error points (the value, or the key it sits under).
  void Add(Reporter& report, const std::string& file, const YAML::Node& value, const YAML::Node& place,
           std::string_view what) {
    if (failed_ || !value.IsDefined()) return;
    ResolvedSize size;
    Resolve(bp_, value, &size);
    values_ += size.values;
    bytes_ += size.bytes;
    failed_ = size.too_large || values_ > kMaxValues / 2 || bytes_ > kMaxResolvedBytes;
    if (size.too_large) {
      std::string past = fmt::format("nest deeper than {} levels", kMaxResolvedNesting);
      if (size.values > kMaxValues) past = fmt::format("hold more than {} values", kMaxValues);
      if (size.bytes > kMaxResolvedBytes) past = fmt::format("hold more than {} bytes of text", kMaxResolvedBytes);
      report.At(file, place, fmt::format("{}, with deployment variables resolved, {}", what, past));
    } else if (failed_) {
      const std::string past = bytes_ > kMaxResolvedBytes ? fmt::format("{} bytes of text", kMaxResolvedBytes)
                                                          : fmt::format("{} values", kMaxValues / 2);
      report.At(file, place,
                fmt::format("{}: with deployment variables resolved, the blueprint holds more than {} by here", what,
                            past));
    }
  }

 private:
  const Blueprint& bp_;
  size_t values_ = 0, bytes_ = 0;
  bool failed_ = false;
};

// The settings whose type srunway knows (from its module catalogue) must have that type.
// A setting that is one deployment variable ($(vars.x)) is checked with the variable's value.
void CheckSettingTypes(const Blueprint& bp, Reporter& report, const std::string& file, const Module& module) {
  const ModuleInfo* info = FindModule(module.source);
  YAML::Node settings = Lookup(module.node, "settings");
  if (info == nullptr || !settings.IsMap()) return;
  for (auto it = settings.begin(); it != settings.end(); ++it) {
    auto expected = info->setting_types.find(it->first.Scalar());
    if (expected == info->setting_types.end()) continue;
    const YAML::Node written = it->second;  // a copy: yaml-cpp's iterator hands out a temporary pair
    const std::vector<std::string> expressions =
        written.IsScalar() ? FindExpressions(written.Scalar()) : std::vector<std::string>{};
    // Initialised, never assigned: assigning one yaml-cpp node to another writes through into the blueprint.
    const YAML::Node value =
        expressions.empty() ? written : Lookup(bp.vars, WholeVar(written.Scalar(), expressions));
    std::string through;  // ": $(vars.x) is 'abc'" where the value is one variable's
    if (!expressions.empty()) {
      // Anything else, a variable made of expressions itself, a list or map whose parts may be expressions, and
      // null (the module's default) are left for deploy time.
      if (!value.IsScalar() || !FindExpressions(value.Scalar()).empty()) continue;
      through = fmt::format(": {} is '{}'", written.Scalar(), value.Scalar());
    }
    if (value.IsNull()) continue;  // null asks for the module's default
    std::string_view got = TypeName(value);
    if (expected->second == "word" && (got == "string" || got == "number")) {
      // Written into slurm.conf as KEY=VALUE: a space, a line break or a '#' there breaks the file.
      if (std::string wrong = NotOneWord(value.Scalar()); !wrong.empty()) {
        const std::string from = expressions.empty() ? "" : fmt::format(" (from {})", written.Scalar());
        report.At(file, written, fmt::format("setting '{}' of module '{}' ({}) goes into Slurm's configuration as one "
                                             "word, and {:?}{} {}", it->first.Scalar(), module.id, module.source,
                                             value.Scalar(), from, wrong));
      }
      continue;
    }
    if (got != expected->second) {
      report.At(file, written, fmt::format("setting '{}' of module '{}' ({}) must be a {}, not a {}{}",
                                           it->first.Scalar(), module.id, module.source, expected->second, got,
                                           through));
    }
  }
}

// test_module_not_used: every module in a `use` list gives the using module at least one input. Known only for
// modules in srunway's catalogue; others pass.
std::vector<std::pair<const Module*, std::string>> ModulesNotUsed(const Blueprint& bp) {
  std::vector<std::pair<const Module*, std::string>> failures;
  for (const Module& module : bp.modules) {
    const ModuleInfo* user = FindModule(module.source);
    for (const std::string& id : module.use) {
      const Module* used = bp.Find(id);
      const ModuleInfo* provider = used != nullptr && used != &module ? FindModule(used->source) : nullptr;
      if (user == nullptr || provider == nullptr) continue;
      bool any = false;
      for (const std::string& output : provider->outputs) any |= user->inputs.contains(output);
      if (!any) failures.push_back({&module, id});
    }
  }
  return failures;
}

// test_deployment_variable_not_used: every deployment variable is referenced, or reaches a module the way the
// toolkit wires it without $(vars.x): a module with an input of its name that its settings leave unset (so
// project_id, region, zone, deployment_name and labels reach most modules). A module outside srunway's catalogue
// may have any input, so with one in the blueprint no variable is called unused.
std::vector<std::string> VariablesNotUsed(const Blueprint& bp) {
  std::set<std::string> used = {"project_id", "region", "zone", "deployment_name", "labels"};
  auto collect = [&](const YAML::Node& node) {
    ForEachScalar(node, [&](const YAML::Node& scalar) {
      for (const std::string& expression : FindExpressions(scalar.Scalar())) {
        for (const auto& [head, tail] : FindReferences(expression)) {
          if (head == "vars") used.insert(tail);
        }
      }
    });
  };
  collect(bp.vars);
  collect(Lookup(bp.blueprint.root, "deployment_groups"));
  collect(Lookup(bp.blueprint.root, "terraform_backend_defaults"));
  collect(Lookup(bp.blueprint.root, "validators"));
  if (bp.deployment) collect(Lookup(bp.deployment->root, "terraform_backend_defaults"));
  for (const Module& module : bp.modules) {
    const ModuleInfo* info = FindModule(module.source);
    if (info == nullptr) return {};
    const YAML::Node settings = Lookup(module.node, "settings");
    auto wire = [&](const std::string& input) {
      if (!Has(settings, input)) used.insert(input);
    };
    for (const std::string& input : info->inputs) wire(input);
    for (const auto& [setting, type] : info->setting_types) wire(setting);
  }
  std::vector<std::string> unused;
  for (auto it = bp.vars.begin(); it != bp.vars.end(); ++it) {
    if (!used.contains(it->first.Scalar())) unused.push_back(it->first.Scalar());
  }
  return unused;
}

}  // namespace

std::string FormatDiagnostic(const Diagnostic& d) {
  return fmt::format("{}:{}:{}: {}{}", d.file, d.line, d.column, d.warning ? "warning: " : "", d.message);
}

std::string NotOneWord(std::string_view value) {
  if (value.empty()) return "is empty";
  for (char c : value) {
    if (c == '\n' || c == '\r') return "holds a line break";
    if (std::isspace(static_cast<unsigned char>(c))) return "holds a space";
    if (c == '#') return "holds '#' (where a comment begins)";
    if (c == '=' || c == '"' || c == '\'') return fmt::format("holds '{}'", c);
  }
  return "";
}

YAML::Node Lookup(const YAML::Node& map, std::string_view key) {
  if (!map.IsDefined() || !map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

YAML::Node Blueprint::Var(std::string_view name) const { return Lookup(vars, name); }

const Module* Blueprint::Find(std::string_view id) const {
  for (const Module& module : modules) {
    if (module.id == id) return &module;
  }
  return nullptr;
}

StatusOr<Blueprint> LoadText(const std::string& file, const std::string& text) {
  SRUNWAY_ASSIGN_OR_RETURN(Document document, Parse(file, text));
  return Build(std::move(document));
}

StatusOr<Blueprint> Load(const std::string& file, const std::optional<std::string>& deployment,
                         const std::vector<std::pair<std::string, std::string>>& sets,
                         std::vector<Diagnostic>& diagnostics) {
  SRUNWAY_ASSIGN_OR_RETURN(std::string text, common::ReadFile(file));
  SRUNWAY_ASSIGN_OR_RETURN(Blueprint bp, LoadText(file, text));
  Reporter report(diagnostics);
  if (deployment) {
    auto dep_text = common::ReadFile(*deployment);
    if (!dep_text.ok()) return dep_text.status().WithContext("--deployment");
    SRUNWAY_ASSIGN_OR_RETURN(Document dep, Parse(*deployment, *dep_text));
    bp.deployment = std::move(dep);
    MergeDeployment(bp, report);
  }
  for (const auto& [name, value] : sets) {
    YAML::Node parsed;
    try {
      parsed = YAML::Load(value);
    } catch (const YAML::Exception& error) {
      return common::InvalidArgument("--set {}={}: not a YAML value: {}", name, value, error.msg);
    }
    SRUNWAY_RETURN_IF_ERROR(CheckShape(fmt::format("--set {}", name), parsed, 3));  // where vars.NAME's value sits
    bp.vars[name] = parsed;
  }
  return bp;
}

std::vector<std::string> FindExpressions(std::string_view text, std::string* error) {
  std::vector<std::string> found;
  size_t at = 0;
  while ((at = text.find("$(", at)) != std::string_view::npos) {
    if (at > 0 && text[at - 1] == '\\') {  // \$( is a literal "$("
      at += 2;
      continue;
    }
    size_t end = at + 2;
    int depth = 1;
    bool quoted = false;
    for (; end < text.size() && depth > 0; ++end) {
      char c = text[end];
      if (quoted) {
        if (c == '\\') ++end;
        else if (c == '"') quoted = false;
      } else if (c == '"') {
        quoted = true;
      } else if (c == '(') {
        ++depth;
      } else if (c == ')') {
        --depth;
      }
    }
    if (depth > 0) {
      if (error != nullptr) *error = fmt::format("unterminated expression '{}'", text.substr(at, 40));
      break;
    }
    found.emplace_back(text.substr(at + 2, end - 1 - (at + 2)));
    at = end;
  }
  return found;
}

std::vector<std::pair<std::string, std::string>> FindReferences(std::string_view e) {
  std::vector<std::pair<std::string, std::string>> refs;
  auto ident_char = [](char c) { return IsWord(c) || c == '-'; };
  bool quoted = false;
  for (size_t i = 0; i < e.size();) {
    char c = e[i];
    if (quoted) {
      if (c == '\\') ++i;
      else if (c == '"') quoted = false;
      ++i;
      continue;
    }
    if (c == '"') {
      quoted = true;
      ++i;
      continue;
    }
    const bool starts = (std::isalpha(static_cast<unsigned char>(c)) || c == '_') && (i == 0 || (!ident_char(e[i - 1]) && e[i - 1] != '.'));
    if (!starts) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < e.size() && ident_char(e[end])) ++end;
    std::string head(e.substr(i, end - i));
    if (end + 1 < e.size() && e[end] == '.' && (std::isalpha(static_cast<unsigned char>(e[end + 1])) || e[end + 1] == '_')) {
      size_t tail_end = end + 1;
      while (tail_end < e.size() && ident_char(e[tail_end])) ++tail_end;
      refs.push_back({head, std::string(e.substr(end + 1, tail_end - end - 1))});
      end = tail_end;
    }
    i = end;
  }
  return refs;
}

std::vector<Diagnostic> Validate(const Blueprint& bp, std::vector<ValidatorResult>* validators) {
  std::vector<Diagnostic> out;
  Reporter report(out);
  const std::string& file = bp.blueprint.file;
  const YAML::Node& root = bp.blueprint.root;
  if (!root.IsMap()) {
    report.At(file, root, "a blueprint is a YAML map with blueprint_name, vars and deployment_groups");
    return out;
  }
  CheckKeys(report, file, root, kTopLevelKeys, "top-level");
  CheckKeysAreNames(report, bp.blueprint);
  if (bp.deployment) CheckKeysAreNames(report, *bp.deployment);
  YAML::Node name = Lookup(root, "blueprint_name");
  if (!name.IsDefined()) report.At(file, YAML::Mark(), "blueprint_name is required");
  else if (!name.IsScalar() || name.Scalar().empty()) report.At(file, name, "blueprint_name must be a non-empty string");
  CheckExpressions(bp, report, file, name, false, "blueprint_name");

  YAML::Node vars = Lookup(root, "vars");
  if (!vars.IsDefined()) report.At(file, YAML::Mark(), "vars is required (with at least deployment_name)");
  else if (!vars.IsMap()) report.At(file, vars, "vars must be a map");
  // Where a variable's value came from (the deployment file overrides the blueprint), and its key there: a value
  // left blank has no place of its own.
  auto file_of = [&](const std::string& name) -> const std::string& {
    return bp.deployment && Has(Lookup(bp.deployment->root, "vars"), name) ? bp.deployment->file : file;
  };
  auto key_of = [&](const std::string& name) {
    const YAML::Node map = Lookup(file_of(name) == file ? root : bp.deployment->root, "vars");
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == name) return it->first;
    }
    return YAML::Node(YAML::NodeType::Undefined);
  };
  if (!Has(bp.vars, "deployment_name")) {
    report.At(file, vars.IsDefined() ? vars : root, "vars.deployment_name is required (in the blueprint or the deployment file)");
  } else if (YAML::Node dn = Lookup(bp.vars, "deployment_name"); dn.IsNull()) {
    report.At(file_of("deployment_name"), key_of("deployment_name"), "vars.deployment_name is empty: fill it in (a name for this deployment, "
                                              "unique in the project, e.g. a3mega-srunway)");
  } else if (!dn.IsScalar() || TypeOf(dn) != ScalarType::kString) {
    report.At(file_of("deployment_name"), dn, "vars.deployment_name must be a string");
  }
  for (const char* name : {"project_id", "region", "zone"}) {
    if (YAML::Node value = Lookup(bp.vars, name); value.IsDefined() && value.IsNull()) {
      report.At(file_of(name), key_of(name), fmt::format("vars.{} is empty: fill it in", name));
    }
  }
  CheckExpressions(bp, report, file, vars, true, "vars");
  if (bp.deployment) CheckExpressions(bp, report, bp.deployment->file, Lookup(bp.deployment->root, "vars"), true, "vars");
  ExpandedSize expanded(bp);
  expanded.Add(report, file, bp.vars, vars.IsDefined() ? vars : root, "vars");

  int level = 2;
  if (YAML::Node l = Lookup(root, "validation_level"); l.IsDefined()) {
    if (!l.IsScalar() || (l.Scalar() != "0" && l.Scalar() != "1" && l.Scalar() != "2")) {
      report.At(file, l, "validation_level must be 0 (ignore), 1 (warn) or 2 (error)");
    } else {
      level = l.Scalar()[0] - '0';
    }
  }
  for (std::string_view key : {"terraform_backend_defaults", "terraform_providers", "toolkit_modules_url",
                               "toolkit_modules_version", "ghpc_version"}) {
    CheckExpressions(bp, report, file, Lookup(root, key), key == "terraform_backend_defaults", key);
  }
  const Document& backend_in = BackendDefaultsSource(bp);
  const YAML::Node backend = Lookup(backend_in.root, "terraform_backend_defaults");
  expanded.Add(report, backend_in.file, backend, backend, "terraform_backend_defaults");

  // Validators: the listed ones (minus skip: true), or all of them when none is listed.
  std::vector<std::string> run;
  std::vector<ValidatorResult> results;
  YAML::Node listed = Lookup(root, "validators");
  if (listed.IsDefined() && !listed.IsSequence()) report.At(file, listed, "validators must be a list");
  if (listed.IsSequence()) {
    for (const YAML::Node& v : listed) {
      if (!v.IsMap()) {
        report.At(file, v, "a validator is a map with validator, inputs and skip");
        continue;
      }
      CheckKeys(report, file, v, std::array<std::string_view, 3>{"validator", "inputs", "skip"}, "validator");
      YAML::Node which = Lookup(v, "validator");
      if (!which.IsScalar()) {
        report.At(file, v, "validator: the validator's name is required");
        continue;
      }
      const std::string n = which.Scalar();
      if (!Contains(kCloudValidators, n) && !Contains(kOfflineValidators, n)) {
        report.At(file, which, fmt::format("unknown validator '{}'", n));
        continue;
      }
      CheckExpressions(bp, report, file, Lookup(v, "inputs"), true, "validator inputs");
      YAML::Node skip = Lookup(v, "skip");
      if (skip.IsDefined() && (!skip.IsScalar() || TypeOf(skip) != ScalarType::kBool)) {
        report.At(file, skip, "skip must be true or false");
      }
      if (skip.IsScalar() && (skip.Scalar() == "true" || skip.Scalar() == "True" || skip.Scalar() == "TRUE")) {
        results.push_back({n, "skipped (skip: true)"});
      } else {
        run.push_back(n);
      }
    }
  } else {
    for (std::string_view n : kOfflineValidators) run.emplace_back(n);
    for (std::string_view n : kCloudValidators) run.emplace_back(n);
  }

  // Deployment groups and modules.
  YAML::Node groups = Lookup(root, "deployment_groups");
  if (!groups.IsDefined()) report.At(file, YAML::Mark(), "deployment_groups is required");
  else if (!groups.IsSequence() || groups.size() == 0) report.At(file, groups, "deployment_groups must be a non-empty list");
  std::map<std::string, const Module*> ids;
  std::set<std::string> group_names;
  if (groups.IsSequence()) {
    size_t index = 0;
    for (const YAML::Node& group : groups) {
      const size_t g = index++;
      if (!group.IsMap()) {
        report.At(file, group, "a deployment group is a map with group and modules");
        continue;
      }
      CheckKeys(report, file, group, kGroupKeys, "deployment group");
      YAML::Node gname = Lookup(group, "group");
      if (!gname.IsScalar()) {
        report.At(file, group, "group: the deployment group's name is required");
      } else if (!IsName(gname.Scalar())) {
        report.At(file, gname, fmt::format("group name '{}' must match ^\\w(-*\\w)*$", gname.Scalar()));
      } else if (!group_names.insert(gname.Scalar()).second) {
        report.At(file, gname, fmt::format("deployment group '{}' is defined twice", gname.Scalar()));
      }
      CheckExpressions(bp, report, file, Lookup(group, "terraform_backend"), true, "terraform_backend");
      expanded.Add(report, file, Lookup(group, "terraform_backend"), Lookup(group, "terraform_backend"),
                   "terraform_backend");
      YAML::Node modules = Lookup(group, "modules");
      if (!modules.IsSequence() || modules.size() == 0) {
        report.At(file, modules.IsDefined() ? modules : group, "modules must be a non-empty list");
        continue;
      }
      size_t packer = 0;
      for (const Module& module : bp.modules) {
        if (module.group != g) continue;
        const YAML::Node& node = module.node;
        if (!node.IsMap()) {
          report.At(file, node, "a module is a map with id, source and settings");
          continue;
        }
        CheckKeys(report, file, node, kModuleKeys, "module");
        if (!Has(node, "id")) report.At(file, node, "module id is required");
        else if (!IsName(module.id)) report.At(file, Lookup(node, "id"), fmt::format("module id '{}' must match ^\\w(-*\\w)*$", module.id));
        else if (module.id == "vars") report.At(file, Lookup(node, "id"), "'vars' cannot be a module id");
        else if (!ids.emplace(module.id, &module).second) {
          report.At(file, Lookup(node, "id"), fmt::format("module id '{}' is used twice (ids must be unique in the blueprint)", module.id));
        }
        if (!Has(node, "source")) report.At(file, node, fmt::format("module '{}': source is required", module.id));
        else if (!Lookup(node, "source").IsScalar() || module.source.empty()) report.At(file, Lookup(node, "source"), "source must be a string");
        if (module.kind != "terraform" && module.kind != "packer") {
          report.At(file, Lookup(node, "kind"), fmt::format("kind '{}' must be terraform or packer", module.kind));
        }
        packer += module.kind == "packer";
        YAML::Node use = Lookup(node, "use");
        if (use.IsDefined() && !use.IsScalar() && !use.IsSequence()) report.At(file, use, "use must be a module id or a list of them");
        for (const std::string& id : module.use) {
          const Module* used = bp.Find(id);
          if (used == &module) {
            report.At(file, use, fmt::format("module '{}' uses itself", id));
          } else if (used == nullptr) {
            report.At(file, use, fmt::format("module '{}' uses '{}', which is not a module of this blueprint", module.id, id));
          } else if (used->group > g) {
            report.At(file, use, fmt::format("module '{}' uses '{}' of a later deployment group ({})", module.id, id,
                                             bp.groups[used->group]));
          }
        }
        YAML::Node settings = Lookup(node, "settings");
        if (settings.IsDefined() && !settings.IsMap() && !settings.IsNull()) report.At(file, settings, "settings must be a map");
        CheckExpressions(bp, report, file, settings, true, "settings");
        if (!settings.IsNull()) {
          expanded.Add(report, file, settings, settings, fmt::format("module '{}': settings", module.id));
        }
        for (std::string_view key : {"id", "source", "kind", "outputs", "use"}) {
          CheckExpressions(bp, report, file, Lookup(node, key), false, fmt::format("a module's {}", key));
        }
        CheckSettingTypes(bp, report, file, module);
      }
      if (packer > 0 && modules.size() != 1) {
        report.At(file, modules, fmt::format("a group with a packer module must hold exactly that one module, not {}", modules.size()));
      }
    }
  }

  // The toolkit's validators.
  for (const std::string& n : run) {
    if (level == 0) {
      results.push_back({n, "not run (validation_level 0)"});
      continue;
    }
    const bool warn = level == 1;
    if (n == "test_module_not_used") {
      auto failures = ModulesNotUsed(bp);
      for (const auto& [module, id] : failures) {
        report.At(file, Lookup(module->node, "use"), fmt::format("test_module_not_used: module '{}' uses '{}' but takes none of its outputs",
                                                              module->id, id), warn);
      }
      results.push_back({n, failures.empty() ? "passed" : "failed"});
    } else if (n == "test_deployment_variable_not_used") {
      auto unused = VariablesNotUsed(bp);
      for (const std::string& var : unused) {
        YAML::Node where = Lookup(Lookup(root, "vars"), var);
        const std::string& in = where.IsDefined() || !bp.deployment ? file : bp.deployment->file;
        if (!where.IsDefined() && bp.deployment) where = Lookup(Lookup(bp.deployment->root, "vars"), var);
        report.At(in, where, fmt::format("test_deployment_variable_not_used: deployment variable '{}' is not used", var), warn);
      }
      results.push_back({n, unused.empty() ? "passed" : "failed"});
    } else {
      results.push_back({n, "skipped (offline)"});
    }
  }
  if (validators != nullptr) *validators = std::move(results);
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
  });
  return out;
}

YAML::Node Resolve(const Blueprint& bp, const YAML::Node& value, ResolvedSize* size_out) {
  // The variables by name, once: Lookup walks yaml-cpp's map, which made resolving a long list of variables slow.
  std::map<std::string, YAML::Node, std::less<>> vars;
  for (auto it = bp.vars.begin(); it != bp.vars.end(); ++it) {
    if (it->first.IsScalar()) vars.emplace(it->first.Scalar(), it->second);
  }
  auto var_of = [&](std::string_view name) {
    auto found = vars.find(name);
    return found == vars.end() ? YAML::Node(YAML::NodeType::Undefined) : found->second;
  };
  // Past a limit, everything left is skipped and the value kept as written.
  ResolvedSize size;
  auto add = [&](size_t values, size_t bytes) {
    size.values += values;
    size.bytes += bytes;
    size.too_large = size.too_large || size.values > kMaxValues || size.bytes > kMaxResolvedBytes;
    return !size.too_large;
  };
  auto copy = [&](const YAML::Node& node) {  // as written
    const ResolvedSize written = SizeOf(node, kMaxValues);
    return add(written.values, written.bytes) ? YAML::Clone(node) : YAML::Node();
  };
  // depth: variables within variables (a cycle stops at 32); level: nesting in the result.
  std::function<YAML::Node(const YAML::Node&, int, int)> resolve = [&](const YAML::Node& node, int depth,
                                                                       int level) -> YAML::Node {
    if (!node.IsDefined()) return node;
    size.too_large = size.too_large || level > kMaxResolvedNesting;
    if (size.too_large) return YAML::Node();
    if (depth > 32) return copy(node);  // a cycle of variables: left as written, validate reports nothing new
    if (node.IsMap()) {
      YAML::Node out(YAML::NodeType::Map);
      if (!add(1, 0)) return out;
      for (auto it = node.begin(); it != node.end() && add(1, it->first.IsScalar() ? it->first.Scalar().size() : 0);
           ++it) {
        out[it->first] = resolve(it->second, depth, level + 1);
      }
      return out;
    }
    if (node.IsSequence()) {
      YAML::Node out(YAML::NodeType::Sequence);
      if (!add(1, 0)) return out;
      for (const YAML::Node& item : node) out.push_back(resolve(item, depth, level + 1));
      return out;
    }
    if (!node.IsScalar()) return copy(node);
    const std::string& text = node.Scalar();
    std::vector<std::string> expressions = FindExpressions(text);
    if (expressions.empty()) return copy(node);
    if (std::string name = WholeVar(text, expressions); !name.empty()) {
      YAML::Node var = var_of(name);
      return var.IsDefined() ? resolve(var, depth + 1, level) : copy(node);
    }
    // Inside a longer string: scalar variables are interpolated, anything else stays for Terraform. What a
    // variable resolves to is counted even when it is not spliced in: it was resolved.
    std::string out;
    size_t at = 0;
    for (const std::string& expression : expressions) {
      size_t start = text.find("$(" + expression + ")", at);
      out += text.substr(at, start - at);
      YAML::Node var;
      if (std::string name = PlainVar(expression); !name.empty()) var = var_of(name);
      YAML::Node resolved = var.IsDefined() ? resolve(var, depth + 1, level) : YAML::Node();
      if (size.too_large) return YAML::Node();
      out += resolved.IsDefined() && resolved.IsScalar() ? resolved.Scalar() : "$(" + expression + ")";
      at = start + expression.size() + 3;
    }
    out += text.substr(at);
    if (!add(1, out.size())) return YAML::Node();
    YAML::Node result(out);
    result.SetTag("!");
    return result;
  };
  YAML::Node resolved = resolve(value, 0, 0);
  if (size_out != nullptr) *size_out = size;
  return size.too_large ? YAML::Clone(value) : resolved;
}

namespace {

// Whether a literal block ("|") reads back as exactly `s`: it keeps one final line break (clip chomping), so `s`
// must end in exactly one; its first line may not start with a space (that would need an indentation indicator);
// and it holds only printable text.
bool LiteralSafe(const std::string& s) {
  if (s.empty() || s.back() != '\n' || (s.size() > 1 && s[s.size() - 2] == '\n') || s.front() == ' ') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\n' || u == '\t' || (u >= 0x20 && u < 0x7f) || u >= 0x80;
  });
}

// The variables an expanded blueprint keeps: those still referenced after $(vars.x) was inlined (inside larger
// expressions that Terraform evaluates) and those that reach modules by name (deployment_name, project_id, ...).
YAML::Node ExpandedVars(const Blueprint& bp) {
  Blueprint inlined = bp;
  inlined.blueprint.root = YAML::Clone(bp.blueprint.root);
  YAML::Node groups = inlined.blueprint.root["deployment_groups"];
  if (groups.IsSequence()) {
    for (YAML::Node group : groups) {
      YAML::Node modules = Lookup(group, "modules");
      if (!modules.IsSequence()) continue;
      for (YAML::Node module : modules) {
        if (Has(module, "settings")) module["settings"] = Resolve(bp, Lookup(module, "settings"));
      }
    }
  }
  inlined.vars = Resolve(bp, bp.vars);
  // A variable that only dropped ones use (an expression left as it was) goes too: drop until none is unused, or
  // expanding the expansion would drop what this one kept.
  for (;;) {
    inlined.blueprint.root["vars"] = inlined.vars;
    const std::vector<std::string> unused = VariablesNotUsed(inlined);
    YAML::Node kept(YAML::NodeType::Map);
    for (auto it = inlined.vars.begin(); it != inlined.vars.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (std::find(unused.begin(), unused.end(), name) == unused.end()) kept[name] = it->second;
    }
    if (kept.size() == inlined.vars.size()) return kept;
    inlined.vars = kept;
  }
}

}  // namespace

std::string Expand(const Blueprint& bp) {
  const YAML::Node& root = bp.blueprint.root;
  YAML::Emitter emit;
  // Scalars keep their type: a string that would read back as a number or bool is quoted, text of several lines
  // becomes a literal block.
  std::function<void(const YAML::Node&)> write = [&](const YAML::Node& node) {
    if (node.IsMap()) {
      emit << YAML::BeginMap;
      for (auto it = node.begin(); it != node.end(); ++it) {
        emit << YAML::Key << it->first.Scalar() << YAML::Value;
        write(it->second);
      }
      emit << YAML::EndMap;
    } else if (node.IsSequence()) {
      emit << YAML::BeginSeq;
      for (const YAML::Node& item : node) write(item);
      emit << YAML::EndSeq;
    } else if (node.IsNull() || !node.IsDefined()) {
      emit << YAML::Null;
    } else {
      const std::string& s = node.Scalar();
      if (s.find('\n') != std::string::npos && LiteralSafe(s)) {
        emit << YAML::Literal << s;
      } else if (s.find('\n') != std::string::npos) {
        emit << YAML::DoubleQuoted << s;
      } else if (node.Tag() == "!" && (TypeOf(YAML::Node(s)) != ScalarType::kString || s.empty())) {
        emit << YAML::DoubleQuoted << s;
      } else {
        emit << s;
      }
    }
  };
  emit << YAML::BeginMap;
  for (std::string_view key : kTopLevelKeys) {
    YAML::Node value = Lookup(root, key);
    if (key == "vars") value = ExpandedVars(bp);
    if (key == "terraform_backend_defaults") {
      value = Lookup(BackendDefaultsSource(bp).root, key);
      if (value.IsDefined()) value = Resolve(bp, value);
    }
    if (!value.IsDefined()) continue;
    emit << YAML::Key << std::string(key) << YAML::Value;
    if (key != "deployment_groups") {
      write(value);
      continue;
    }
    emit << YAML::BeginSeq;
    size_t g = 0;
    for (const YAML::Node& group : value) {
      emit << YAML::BeginMap;
      for (std::string_view gkey : kGroupKeys) {
        YAML::Node gvalue = Lookup(group, gkey);
        if (!gvalue.IsDefined()) continue;
        emit << YAML::Key << std::string(gkey) << YAML::Value;
        if (gkey != "modules") {
          write(gkey == "terraform_backend" ? Resolve(bp, gvalue) : gvalue);
          continue;
        }
        emit << YAML::BeginSeq;
        for (const Module& module : bp.modules) {
          if (module.group != g) continue;
          emit << YAML::BeginMap;
          emit << YAML::Key << "id" << YAML::Value << module.id;
          emit << YAML::Key << "source" << YAML::Value << module.source;
          emit << YAML::Key << "kind" << YAML::Value << module.kind;
          if (!module.use.empty()) {
            emit << YAML::Key << "use" << YAML::Value << YAML::Flow << YAML::BeginSeq;
            for (const std::string& id : module.use) emit << id;
            emit << YAML::EndSeq;
          }
          if (YAML::Node outputs = Lookup(module.node, "outputs"); outputs.IsDefined()) {
            emit << YAML::Key << "outputs" << YAML::Value;
            write(outputs);
          }
          if (YAML::Node settings = Lookup(module.node, "settings"); settings.IsDefined() && !settings.IsNull()) {
            emit << YAML::Key << "settings" << YAML::Value;
            write(Resolve(bp, settings));
          }
          emit << YAML::EndMap;
        }
        emit << YAML::EndSeq;
      }
      emit << YAML::EndMap;
      ++g;
    }
    emit << YAML::EndSeq;
  }
  emit << YAML::EndMap;
  return std::string(emit.c_str()) + "\n";
}

}  // namespace srunway::blueprint
