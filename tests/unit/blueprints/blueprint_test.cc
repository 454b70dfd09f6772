// srunway-blueprint's library: expressions and references, every check with its file:line:column, the toolkit's
// validator rules (implicit, explicit, skip, validation_level), deployment files, and expansion.
#include "blueprints/blueprint.h"

#include <gtest/gtest.h>

#include <fstream>

#include "blueprints/render.h"
#include "tests/unit/temp_dir.h"

namespace srunway::blueprint {
namespace {

using Refs = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> Check(const std::string& text) {
  auto bp = LoadText("bp.yaml", text);
  if (!bp.ok()) return {bp.status().message()};
  std::vector<std::string> lines;
  for (const Diagnostic& d : Validate(*bp)) lines.push_back(FormatDiagnostic(d));
  return lines;
}

constexpr char kGood[] = R"(blueprint_name: good
vars:
  deployment_name: good
  nodes: node[1-2]
deployment_groups:
- group: cluster
  modules:
  - id: nodes
    source: srunway/local/nodeset
    settings:
      nodes: $(vars.nodes)
      gpus: 8
  - id: debug
    source: srunway/local/partition
    use: nodes
    settings:
      partition_name: debug
)";

TEST(Expressions, FoundWhereTheToolkitFindsThem) {
  EXPECT_EQ(FindExpressions("$(vars.zone)"), std::vector<std::string>{"vars.zone"});
  EXPECT_EQ(FindExpressions("a-$(vars.name)-b $(net.subnetwork_self_link)"),
            (std::vector<std::string>{"vars.name", "net.subnetwork_self_link"}));
  // Functions and nesting, a ")" inside a string literal.
  EXPECT_EQ(FindExpressions("$(flatten([vars.a, (vars.b)]))"), std::vector<std::string>{"flatten([vars.a, (vars.b)])"});
  EXPECT_EQ(FindExpressions(R"x($(vars.x == ")" ? 1 : 2))x"), std::vector<std::string>{R"x(vars.x == ")" ? 1 : 2)x"});
  // Shell variables and escaped $( are not expressions.
  EXPECT_TRUE(FindExpressions("echo ${HOME} $PATH \\$(date)").empty());
  std::string error;
  EXPECT_TRUE(FindExpressions("$(vars.zone", &error).empty());
  EXPECT_EQ(error, "unterminated expression '$(vars.zone'");
}

TEST(Expressions, References) {
  EXPECT_EQ(FindReferences("vars.zone"), (Refs{{"vars", "zone"}}));
  EXPECT_EQ(FindReferences("flatten([vars.a, data-bucket.network_storage])"),
            (Refs{{"vars", "a"}, {"data-bucket", "network_storage"}}));
  EXPECT_EQ(FindReferences(R"(vars.p == "vars.not_a_ref" ? net.ids[0] : 1.5)"), (Refs{{"vars", "p"}, {"net", "ids"}}));
}

TEST(Validate, AGoodBlueprintHasNoFindings) { EXPECT_TRUE(Check(kGood).empty()); }

TEST(Validate, EveryProblemWithItsPlace) {
  EXPECT_EQ(Check("blueprint_name: x\nvars:\n  deployment_name: x\ndeployment_groups:\n- group: g\n  modules:\n"
                  "  - id: a\n    source: srunway/local/nodeset\n    use: [a, b]\n    settings:\n      gpus: [1]\n"
                  "      nodes: $(c.out)\n"),
            (std::vector<std::string>{
                "bp.yaml:9:10: module 'a' uses itself",
                "bp.yaml:9:10: module 'a' uses 'b', which is not a module of this blueprint",
                "bp.yaml:11:13: setting 'gpus' of module 'a' (srunway/local/nodeset) must be a number, not a list",
                "bp.yaml:12:14: $(c.out): no module with id 'c'"}));
  // A use of a later group; group names; a packer group with two modules.
  EXPECT_EQ(Check("blueprint_name: x\nvars:\n  deployment_name: x\ndeployment_groups:\n- group: one\n  modules:\n"
                  "  - id: a\n    source: s\n    use: b\n- group: two words\n  modules:\n  - id: b\n    source: s\n"
                  "    kind: packer\n  - id: c\n    source: s\n"),
            (std::vector<std::string>{"bp.yaml:9:10: module 'a' uses 'b' of a later deployment group (two words)",
                                      "bp.yaml:10:10: group name 'two words' must match ^\\w(-*\\w)*$",
                                      "bp.yaml:12:3: a group with a packer module must hold exactly that one module, not 2"}));
  EXPECT_EQ(Check("- not a map\n"),
            std::vector<std::string>{"bp.yaml:1:1: a blueprint is a YAML map with blueprint_name, vars and deployment_groups"});
  EXPECT_EQ(Check("blueprint_name: x\nvars: {deployment_name: x}\ndeployment_groups:\n- group: g\n  modules:\n"
                  "  - id: a\n    source: s\n    settings: {x: 1}\n    colour: red\n"),
            std::vector<std::string>{"bp.yaml:9:5: unknown module key 'colour' (expected one of: id, source, kind, use, "
                                     "outputs, settings)"});
}

// A list or map as a key: a variable so named was skipped, a module setting became '' (and was expanded as such).
TEST(Validate, KeysAreNames) {
  EXPECT_EQ(Check("blueprint_name: x\nvars:\n  deployment_name: x\n  [a, b]: 1\ndeployment_groups:\n- group: g\n"
                  "  modules:\n  - id: a\n    source: s\n    settings:\n      {k: v}: 1\n"),
            (std::vector<std::string>{"bp.yaml:4:3: a key must be a name, not a list",
                                      "bp.yaml:11:7: a key must be a name, not a map"}));
}

TEST(Validate, ValidatorsSkipAndLevel) {
  const std::string unused = std::string(kGood) + "";
  std::string with_unused = kGood;
  with_unused.insert(with_unused.find("  nodes: node"), "  spare: 1\n");
  EXPECT_EQ(Check(with_unused),
            std::vector<std::string>{"bp.yaml:4:10: test_deployment_variable_not_used: deployment variable 'spare' is not used"});
  EXPECT_EQ(Check("validation_level: 1\n" + with_unused),
            std::vector<std::string>{"bp.yaml:5:10: warning: test_deployment_variable_not_used: deployment variable 'spare' is not used"});
  EXPECT_TRUE(Check("validation_level: 0\n" + with_unused).empty());
  EXPECT_TRUE(Check("validators:\n- validator: test_deployment_variable_not_used\n  skip: true\n" + with_unused).empty());
  // Listing validators runs only those.
  auto bp = LoadText("bp.yaml", "validators:\n- validator: test_module_not_used\n- validator: test_zone_exists\n" + with_unused);
  ASSERT_TRUE(bp.ok());
  std::vector<ValidatorResult> results;
  EXPECT_TRUE(Validate(*bp, &results).empty());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].outcome, "passed");
  EXPECT_EQ(results[1].outcome, "skipped (offline)");
  EXPECT_EQ(Check("validators:\n- validator: test_everything\n" + std::string(kGood)),
            std::vector<std::string>{"bp.yaml:2:14: unknown validator 'test_everything'"});
}

// The toolkit passes a deployment variable to each module with an input of that name that its settings leave
// unset, without $(vars.x); gcluster accepts such a blueprint, and so must validate.
TEST(Validate, ImplicitWiringUsesAVariable) {
  std::string wired = kGood;
  wired.insert(wired.find("  nodes: node"), "  sockets: 2\n");  // srunway/local/nodeset has a sockets input
  EXPECT_TRUE(Check(wired).empty());
  std::string explicit_setting = kGood;  // the module sets gpus itself, so a variable gpus reaches nothing
  explicit_setting.insert(explicit_setting.find("  nodes: node"), "  gpus: 4\n");
  EXPECT_EQ(Check(explicit_setting),
            std::vector<std::string>{"bp.yaml:4:9: test_deployment_variable_not_used: deployment variable 'gpus' is not used"});
  // A module outside the catalogue may have any input.
  std::string unknown = kGood;
  unknown.insert(unknown.find("  nodes: node"), "  spare: 1\n");
  EXPECT_EQ(Check(unknown).size(), 1u);
  unknown += "  - id: mine\n    source: ./modules/mine\n";
  EXPECT_TRUE(Check(unknown).empty());
}

// A deployment file with a value left blank says to fill it in, in that file.
TEST(Deployment, EmptyRequiredValuesSayFillItIn) {
  testing::TempDir dir("blueprint-test");
  const std::string bp_path = dir.path() / "bp.yaml", dep_path = dir.path() / "dep.yaml";
  std::ofstream(bp_path) << kGood;
  std::ofstream(dep_path) << "vars:\n  deployment_name:\n  project_id:\n";
  std::vector<Diagnostic> diagnostics;
  auto bp = Load(bp_path, dep_path, {}, diagnostics);
  ASSERT_TRUE(bp.ok()) << bp.status().ToString();
  std::vector<std::string> lines;
  for (const Diagnostic& d : Validate(*bp)) lines.push_back(FormatDiagnostic(d));
  EXPECT_EQ(lines, (std::vector<std::string>{
                       dep_path + ":2:3: vars.deployment_name is empty: fill it in (a name for this deployment, "
                                  "unique in the project, e.g. a3mega-srunway)",
                       dep_path + ":3:3: vars.project_id is empty: fill it in"}));
}

TEST(Validate, ModuleNotUsedFromTheCatalogue) {
  // A partition takes the nodeset's output; a nodeset takes nothing from a partition.
  std::string text = kGood;
  text.replace(text.find("    use: nodes\n"), 15, "");
  text.replace(text.find("      gpus: 8\n"), 14, "      gpus: 8\n    use: debug_two\n");
  text += "  - id: debug_two\n    source: srunway/local/partition\n    use: nodes\n";
  EXPECT_EQ(Check(text), (std::vector<std::string>{
                             "bp.yaml:13:10: test_module_not_used: module 'nodes' uses 'debug_two' but takes none of its outputs"}));
}

TEST(Deployment, OverridesAndOnlyVars) {
  testing::TempDir dir("blueprint-test");
  const std::string bp_path = dir.path() / "bp.yaml", dep_path = dir.path() / "dep.yaml";
  std::ofstream(bp_path) << kGood;
  std::ofstream(dep_path) << "vars:\n  nodes: gpu[1-4]\nmodules: []\n";
  std::vector<Diagnostic> diagnostics;
  auto bp = Load(bp_path, dep_path, {{"deployment_name", "mine"}}, diagnostics);
  ASSERT_TRUE(bp.ok()) << bp.status().ToString();
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(FormatDiagnostic(diagnostics[0]),
            dep_path + ":3:1: unknown deployment file key 'modules' (expected one of: vars, terraform_backend_defaults)");
  const std::string expanded = Expand(*bp);
  EXPECT_NE(expanded.find("deployment_name: mine"), std::string::npos) << expanded;
  EXPECT_NE(expanded.find("nodes: gpu[1-4]"), std::string::npos) << expanded;
  EXPECT_NE(expanded.find("use: [nodes]"), std::string::npos) << expanded;
  // Expanding the expansion changes nothing, and it still validates.
  auto again = LoadText("expanded.yaml", expanded);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(Validate(*again).empty());
  EXPECT_EQ(Expand(*again), expanded);
  EXPECT_FALSE(Load(dir.path() / "missing.yaml", std::nullopt, {}, diagnostics).ok());
}

TEST(Expand, KeepsTypesEscapesAndTerraformExpressions) {
  auto bp = LoadText("bp.yaml", "blueprint_name: x\nvars:\n  deployment_name: x\n  port: '8080'\n  n: 3\ndeployment_groups:\n"
                     "- group: g\n  modules:\n  - id: a\n    source: srunway/local/partition\n    settings:\n      p: $(vars.port)\n"
                     "      n: $(vars.n)\n      s: n=$(vars.n)\n      t: '$(vars.n > 2 ? b.x : 0)'\n      e: \\$(date)\n"
                     "  - id: b\n    source: srunway/local/partition\n");
  ASSERT_TRUE(bp.ok());
  const std::string out = Expand(*bp);
  EXPECT_NE(out.find("p: \"8080\""), std::string::npos) << out;  // still a string
  EXPECT_NE(out.find("n: 3"), std::string::npos) << out;
  EXPECT_NE(out.find("s: n=3"), std::string::npos) << out;
  EXPECT_NE(out.find("$(vars.n > 2 ? b.x : 0)"), std::string::npos) << out;
  EXPECT_NE(out.find("e: \\$(date)"), std::string::npos) << out;
  EXPECT_NE(out.find("  n: 3\n"), std::string::npos) << out;  // kept: still referenced by t
  EXPECT_EQ(out.find("port:"), std::string::npos) << out;     // inlined everywhere: dropped
  // A module outside the catalogue may take port as an input by name: then it stays.
  auto unknown = LoadText("bp.yaml", "blueprint_name: x\nvars:\n  deployment_name: x\n  port: '8080'\n"
                          "deployment_groups:\n- group: g\n  modules:\n  - id: a\n    source: ./mine\n"
                          "    settings:\n      p: $(vars.port)\n");
  ASSERT_TRUE(unknown.ok());
  EXPECT_NE(Expand(*unknown).find("  port: \"8080\"\n"), std::string::npos) << Expand(*unknown);
}

// A variable that only a dropped variable uses is dropped too, so that expanding the expansion changes nothing
// (the fuzzer found a blueprint whose second expansion lost a variable the first had kept).
TEST(Expand, DropsVariablesOnlyDroppedOnesUse) {
  auto bp = LoadText("bp.yaml",
                     "blueprint_name: x\nvars:\n  deployment_name: x\n  n: 3\n  flag: '$(vars.n > 2 ? 1 : 0)'\n"
                     "deployment_groups:\n- group: g\n  modules:\n  - id: a\n    source: srunway/local/partition\n");
  ASSERT_TRUE(bp.ok());
  const std::string out = Expand(*bp);
  EXPECT_EQ(out.find("flag:"), std::string::npos) << out;     // used by nothing
  EXPECT_EQ(out.find("  n: 3\n"), std::string::npos) << out;  // used by flag alone
  auto again = LoadText("expanded.yaml", out);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Expand(*again), out);
}

TEST(Render, LocalClusterFiles) {
  std::vector<Diagnostic> diagnostics;
  std::string text = kGood;
  text += "  - id: controller\n    source: srunway/local/controller\n    use: debug\n    settings:\n"
          "      state_dir: /st\n      port_base: 7000\n      host: h\n";
  auto bp = LoadText("bp.yaml", text);
  ASSERT_TRUE(bp.ok());
  auto files = RenderSlurm(*bp);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  const std::string& conf = files->at("slurm.conf");
  EXPECT_NE(conf.find("NodeName=node[1-2] NodeHostname=h NodeAddr=127.0.0.1 Port=7001-7002 Sockets=1 CoresPerSocket=1 "
                      "ThreadsPerCore=1 CPUs=1 Gres=gpu:8 State=UNKNOWN\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("PartitionName=debug Nodes=node[1-2] Default=NO MaxTime=INFINITE State=UP\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("MpiDefault=pmix\n"), std::string::npos);
  EXPECT_NE(conf.find("PlugStackConfig=/st/etc/plugstack.conf\n"), std::string::npos);
  EXPECT_NE(files->at("gres.conf").find("NodeName=node2 Name=gpu File=/st/dev/node2/nvidia[0-7]\n"), std::string::npos);
  EXPECT_EQ(files->at("mpi.conf").substr(files->at("mpi.conf").find('\n') + 1),
            "PMIxCliTmpDirBase=/st/spool/pmixtmp\nPMIxCollFence=ring\n");
  EXPECT_EQ(files->at("nodes.hosts").substr(files->at("nodes.hosts").find('\n') + 1), "127.0.0.1 node1 node2\n");
  EXPECT_NE(conf.find("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"), std::string::npos) << conf;
  EXPECT_EQ(conf.find("\nProlog="), std::string::npos) << conf;
  EXPECT_EQ(conf.find("PrologFlags"), std::string::npos) << conf;
  EXPECT_FALSE(files->contains("cgroup.conf"));
  auto local = LocalClusterOf(*bp);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->nodes, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(local->port_base, 7000);
}

// Numbers slurm.conf cannot take: a port past 65535 (or nodes' ports past it), no sockets or cores. They rendered
// (a local blueprint whose settings failed was even rendered as a Google Cloud cluster: "NodeAddr= Port=0-1").
TEST(Render, LocalNumbersOutOfRangeAreRefused) {
  auto render = [](const std::string& controller, const std::string& from, const std::string& to) {
    std::string text = kGood;
    text.replace(text.find(from), from.size(), to);
    text += "  - id: controller\n    source: srunway/local/controller\n    use: debug\n    settings:\n"
            "      state_dir: /st\n" + controller;
    auto bp = LoadText("bp.yaml", text);
    EXPECT_TRUE(bp.ok());
    auto files = RenderSlurm(*bp);
    return files.ok() ? files->at("slurm.conf") : files.status().message();
  };
  EXPECT_NE(render("      port_base: 65533\n", "gpus: 8", "gpus: 8").find("Port=65534-65535 "), std::string::npos);
  EXPECT_EQ(render("      port_base: 65534\n", "gpus: 8", "gpus: 8"),
            "module 'controller': port_base 65534 leaves no room for the nodes' ports (65535-65536: past 65535)");
  EXPECT_EQ(render("      port_base: 70000\n", "gpus: 8", "gpus: 8"),
            "module 'controller': setting port_base=70000 is out of range [1, 65535]");
  EXPECT_EQ(render("      port_base: 0\n", "gpus: 8", "gpus: 8"),
            "module 'controller': setting port_base=0 is out of range [1, 65535]");
  EXPECT_EQ(render("", "gpus: 8", "gpus: 8\n      sockets: 0"),
            "module 'nodes': setting sockets=0 is out of range [1, 1073741824]");
  EXPECT_EQ(render("", "gpus: 8", "gpus: -1"), "module 'nodes': setting gpus=-1 is out of range [0, 1073741824]");
}

// blueprints/local/slurm-gcp.yaml's settings: slurm-gcp's task plugins, cgroup.conf and prolog/epilog layout.
TEST(Render, LocalClusterLikeSlurmGcp) {
  auto render = [](const std::string& settings) {
    std::string text = kGood;
    text += "  - id: controller\n    source: srunway/local/controller\n    use: debug\n    settings:\n"
            "      state_dir: /st\n" + settings;
    auto bp = LoadText("bp.yaml", text);
    EXPECT_TRUE(bp.ok());
    return RenderSlurm(*bp);
  };
  auto files = render("      task_plugin: task/affinity,task/cgroup\n      external_prolog_epilog: true\n");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  const std::string& conf = files->at("slurm.conf");
  EXPECT_NE(conf.find("ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n"), std::string::npos) << conf;
  EXPECT_NE(conf.find("Prolog=/st/etc/slurm-mux.sh\nEpilog=/st/etc/slurm-mux.sh\nPrologFlags=Alloc,Contain\n"),
            std::string::npos) << conf;
  EXPECT_NE(files->at("cgroup.conf").find("ConstrainCores=yes\nConstrainRAMSpace=no\nConstrainSwapSpace=no\n"
                                          "ConstrainDevices=yes\n"), std::string::npos);
  files = render("      task_plugin: task/affinity\n");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_NE(files->at("slurm.conf").find("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/affinity\n"),
            std::string::npos) << files->at("slurm.conf");
  EXPECT_EQ(files->at("slurm.conf").find("PrologFlags"), std::string::npos);
  for (const char* bad : {"task/affinty", "task/none,task/affinity", ""}) {
    files = render(fmt::format("      task_plugin: '{}'\n", bad));
    ASSERT_FALSE(files.ok()) << bad;
    EXPECT_EQ(files.status().message(), fmt::format("task_plugin of module 'controller' is '{}': use task/none, or "
                                                    "task/affinity and/or task/cgroup (comma-separated)", bad));
  }
}

// Values that slurm.conf takes as one word: a space, a line break, a '#' in them broke the file (a partition named
// "debug\nNodeName=evil" added a line) and the blueprint was called valid. Validation names the place; what it
// leaves for later (a value made of several expressions) is refused when rendered.
TEST(Validate, SlurmConfigurationValuesAreOneWord) {
  EXPECT_EQ(NotOneWord("node[1-2]"), "");
  EXPECT_EQ(NotOneWord("de bug"), "holds a space");
  EXPECT_EQ(NotOneWord("a\tb"), "holds a space");
  EXPECT_EQ(NotOneWord("debug\nNodeName=evil"), "holds a line break");
  EXPECT_EQ(NotOneWord("x#y"), "holds '#' (where a comment begins)");
  EXPECT_EQ(NotOneWord("a=b"), "holds '='");
  EXPECT_EQ(NotOneWord(""), "is empty");
  std::string text = kGood;
  text.replace(text.find("partition_name: debug"), 21, "partition_name: \"debug\\nNodeName=evil\"");
  EXPECT_EQ(Check(text), std::vector<std::string>{
      "bp.yaml:17:23: setting 'partition_name' of module 'debug' (srunway/local/partition) goes into Slurm's "
      "configuration as one word, and \"debug\\nNodeName=evil\" holds a line break"});
  text = kGood;
  text.replace(text.find("nodes: node[1-2]"), 16, "nodes: node1 node2");
  EXPECT_EQ(Check(text), std::vector<std::string>{
      "bp.yaml:11:14: setting 'nodes' of module 'nodes' (srunway/local/nodeset) goes into Slurm's configuration as "
      "one word, and \"node1 node2\" (from $(vars.nodes)) holds a space"});

  auto render = [](const std::string& partition_settings) {
    std::string text = kGood;
    text += partition_settings + "  - id: controller\n    source: srunway/local/controller\n    use: debug\n";
    auto bp = LoadText("bp.yaml", text);
    EXPECT_TRUE(bp.ok());
    return RenderSlurm(*bp);
  };
  ASSERT_TRUE(render("").ok());
  auto files = render("      max_time: $(vars.deployment_name) 1\n");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().message(), "module 'debug': setting max_time goes into Slurm's configuration as one word, "
                                      "and \"good 1\" holds a space");
  files = render("      partition_conf:\n        MaxNodes: 4 # four\n        Hidden: 'YES #'\n");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().message(), "module 'debug': partition_conf goes into slurm.conf as \"Hidden\"=\"YES #\", "
                                      "and \"YES #\" holds a space");
}

// The limits (the fuzzer found deployment variables nesting into a stack overflow): YAML nested too deep, aliases
// or variables multiplying past kMaxValues, each refused with its place; a blueprint within them expands to a text
// that reads back.
std::string Nested(int levels, const std::string& inner) {
  return std::string(levels, '[') + inner + std::string(levels, ']');
}

std::string WithVars(const std::string& vars, const std::string& settings) {
  return "blueprint_name: x\nvars:\n  deployment_name: x\n" + vars + "deployment_groups:\n- group: g\n  modules:\n"
         "  - id: a\n    source: ./mine\n    settings:\n" + settings;
}

TEST(Limits, YamlNestedTooDeep) {
  // The root map is level 1, vars 2, a's list 3: 61 lists hold their scalar at level 64, 62 at 65.
  EXPECT_TRUE(LoadText("bp.yaml", "vars:\n  a: " + Nested(61, "1") + "\n").ok());
  auto deep = LoadText("bp.yaml", "vars:\n  a: " + Nested(62, "1") + "\n");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "bp.yaml:2:68: nested more than 64 levels deep");
  // Past yaml-cpp's own guard, the same words (yaml-cpp says "bad file").
  deep = LoadText("bp.yaml", "a: " + Nested(3000, "1") + "\n");
  ASSERT_FALSE(deep.ok());
  EXPECT_TRUE(deep.status().message().ends_with(": nested more than 64 levels deep")) << deep.status().message();
  // A --set value sits at level 3.
  testing::TempDir dir("blueprint-test");
  const std::string bp_path = dir.path() / "bp.yaml";
  std::ofstream(bp_path) << kGood;
  std::vector<Diagnostic> diagnostics;
  auto set = Load(bp_path, std::nullopt, {{"nodes", Nested(62, "1")}}, diagnostics);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(), "--set nodes:1:63: nested more than 64 levels deep");
  EXPECT_TRUE(Load(bp_path, std::nullopt, {{"nodes", Nested(61, "1")}}, diagnostics).ok());
}

// yaml-cpp quotes the character it stopped at: a NUL or a control character went into the error line raw.
TEST(Limits, SyntaxErrorsQuoteWhatTheyStoppedAtPrintably) {
  EXPECT_EQ(Check(std::string("a: \"\\\0\"\n", 8)),
            std::vector<std::string>{"bp.yaml:1:7: unknown escape character: \\x00"});
  EXPECT_EQ(Check("a: \"\\\x01\"\n"), std::vector<std::string>{"bp.yaml:1:7: unknown escape character: \\x01"});
}

TEST(Limits, AliasesMultiplying) {
  std::string text = "vars:\n  a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  auto ten_of = [](int i) {
    std::string line = fmt::format("  a{}: &a{} [", i, i);
    for (int j = 0; j < 10; ++j) line += fmt::format("{}*a{}", j > 0 ? ", " : "", i - 1);
    return line + "]\n";
  };
  for (int i = 1; i < 3; ++i) text += ten_of(i);
  EXPECT_TRUE(LoadText("bp.yaml", text).ok());  // a2 holds 10^3 numbers in 111 lists
  text += ten_of(3) + ten_of(4);                // a3 ten times that, a4 a hundred times
  auto bomb = LoadText("bp.yaml", text);
  ASSERT_FALSE(bomb.ok());
  EXPECT_TRUE(bomb.status().message().starts_with("bp.yaml:")) << bomb.status().message();
  EXPECT_TRUE(bomb.status().message().ends_with(": the document holds more than 20000 values once its YAML aliases "
                                                "are expanded")) << bomb.status().message();
}

TEST(Limits, VariablesNestingTooDeep) {
  // Resolved, vars is level 0, a's lists 1-20, b's 21-40.
  std::string text = WithVars("  a: " + Nested(20, "'$(vars.b)'") + "\n  b: " + Nested(20, "1") + "\n",
                              "      s: $(vars.a)\n");
  EXPECT_EQ(Check(text), (std::vector<std::string>{"bp.yaml:3:3: vars, with deployment variables resolved, nest "
                                                   "deeper than 32 levels"}));
  text = WithVars("  a: " + Nested(15, "'$(vars.b)'") + "\n  b: " + Nested(15, "1") + "\n", "      s: $(vars.a)\n");
  EXPECT_TRUE(Check(text).empty());
  auto bp = LoadText("bp.yaml", text);
  ASSERT_TRUE(bp.ok());
  const std::string expanded = Expand(*bp);
  auto again = LoadText("expanded.yaml", expanded);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Expand(*again), expanded);
  YAML::Node s = Lookup(Lookup(again->modules.at(0).node, "settings"), "s");
  for (int level = 0; level < 30 && s.IsSequence(); ++level) s = s[0];
  EXPECT_EQ(s.as<std::string>(), "1");  // thirty lists deep: a's and b's
}

TEST(Limits, VariablesMultiplying) {
  // e0 is ten e1s, each ten e2s, ...: resolved, 10^levels ones in lists.
  auto vars = [](int levels) {
    std::string text;
    for (int i = 0; i < levels; ++i) {
      text += fmt::format("  e{}: [", i);
      for (int j = 0; j < 10; ++j) text += fmt::format("{}'$(vars.e{})'", j > 0 ? ", " : "", i + 1);
      text += "]\n";
    }
    return text + fmt::format("  e{}: 1\n", levels);
  };
  auto settings = [](int n) {
    std::string text;
    for (int i = 0; i < n; ++i) text += fmt::format("      s{}: $(vars.e0)\n", i);
    return text;
  };
  // Three levels: each setting holds 1112 values with its key, vars 1241, the blueprint itself about 60: seven
  // settings stay within kMaxValues / 2, and the expansion reads back.
  auto bp = LoadText("bp.yaml", WithVars(vars(3), settings(7)));
  ASSERT_TRUE(bp.ok());
  for (const Diagnostic& d : Validate(*bp)) ADD_FAILURE() << FormatDiagnostic(d);
  const std::string expanded = Expand(*bp);
  auto again = LoadText("expanded.yaml", expanded);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Expand(*again), expanded);
  // An eighth is past it.
  EXPECT_EQ(Check(WithVars(vars(3), settings(8))),
            (std::vector<std::string>{"bp.yaml:14:7: module 'a': settings: with deployment variables resolved, the "
                                      "blueprint holds more than 10000 values by here"}));
  // Five levels are past kMaxValues in vars alone (resolving stops there).
  EXPECT_EQ(Check(WithVars(vars(5), settings(1))),
            (std::vector<std::string>{"bp.yaml:3:3: vars, with deployment variables resolved, hold more than 20000 "
                                      "values"}));
}

// Strings double: d0 is d1 twice, d1 is d2 twice, ... (the fuzzer's first timeout after the limits above). Every
// string made on the way counts, as every variable resolved does: it is the work that is bounded.
TEST(Limits, StringsDoubling) {
  auto vars = [](int levels, const std::string& last) {
    std::string text;
    for (int i = 0; i < levels; ++i) text += fmt::format("  d{}: $(vars.d{})$(vars.d{})\n", i, i + 1, i + 1);
    return text + fmt::format("  d{}: {}\n", levels, last);
  };
  // 2^8 copies of 32 bytes: 8 KiB, 72 KiB made on the way.
  std::string last;
  for (int i = 0; i < 16; ++i) last += "ab";
  auto bp = LoadText("bp.yaml", WithVars(vars(8, last), "      s: $(vars.d0)\n"));
  ASSERT_TRUE(bp.ok());
  for (const Diagnostic& d : Validate(*bp)) ADD_FAILURE() << FormatDiagnostic(d);
  std::string d0;
  for (int i = 0; i < 1 << 8; ++i) d0 += last;
  EXPECT_TRUE(Resolve(*bp, bp->Var("d0")).Scalar() == d0);  // not EXPECT_EQ: 8 KiB of output if it fails
  // Of 4 KiB: 1 MiB in d0 alone.
  for (int i = 0; i < 7; ++i) last += last;
  EXPECT_EQ(Check(WithVars(vars(8, last), "      s: $(vars.d0)\n")),
            (std::vector<std::string>{"bp.yaml:3:3: vars, with deployment variables resolved, hold more than 1048576 "
                                      "bytes of text"}));
}

}  // namespace
}  // namespace srunway::blueprint
