// srunway-topo: prints a node's GPU -> NIC, NUMA and CPU map and a task's environment plan for a profile.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "common/cli.h"
#include "common/json.h"
#include "common/log.h"
#include "topology/plan.h"
#include "topology/plugin_config.h"
#include "topology/topology.h"

namespace {

using namespace srunway;

constexpr int kExitOk = 0;
constexpr int kExitTopology = 1;
constexpr int kExitUsage = 2;
constexpr int kTopologyTimeoutMs = 30000;

std::string NicNames(const topology::Topology& topo, const std::vector<size_t>& nics) {
  std::string names;
  for (size_t n : nics) names += (names.empty() ? "" : ",") + topo.nics[n].name;
  return names.empty() ? "-" : names;
}

void PrintText(const topology::Topology& topo, const topology::NodePlacement& placement,
               const topology::EnvPlan& plan, int local_rank) {
  common::Print("topology: {}: {} GPUs, {} NICs, {} NUMA nodes\n", topo.source, topo.gpus.size(), topo.nics.size(),
                topo.numa_nodes.size());
  common::Print("{:<4} {:<13} {:>4}  {:<18} {:<12} {}\n", "GPU", "PCI", "NUMA", "NICs", "NIC via", "CPUs");
  for (size_t g = 0; g < topo.gpus.size(); ++g) {
    const auto& gpu = topo.gpus[g];
    const auto& place = placement.gpus[g];
    common::Print("{:<4} {:<13} {:>4}  {:<18} {:<12} {}\n", gpu.index, gpu.pci, gpu.numa, NicNames(topo, place.nics),
                  place.nic_locality, place.cpus.empty() ? "-" : topology::FormatCpuList(place.cpus));
  }
  common::Print("data NICs: {}\nhost NICs: {}\n", NicNames(topo, placement.data_nics),
                NicNames(topo, placement.host_nics));
  common::Print("\nprofile {} for local rank {} (GPUs {}):\n", topology::ProfileName(plan.profile), local_rank,
                plan.gpus.empty() ? "none" : fmt::format("{}", fmt::join(plan.gpus, ",")));
  for (const auto& var : plan.env) {
    common::Print("  export {}={}{}{}\n", var.name, var.value,
                  var.mode == topology::VarMode::kPrepend ? ":$" + var.name : "", var.enforced ? "   # enforced" : "");
  }
  common::Print("  CPU binding: {}\n", plan.cpus.empty() ? "none" : topology::FormatCpuList(plan.cpus));
  for (const auto& note : plan.notes) common::Print("  note: {}\n", note);
}

common::Json ToJson(const topology::Topology& topo, const topology::NodePlacement& placement,
                    const topology::EnvPlan& plan, int local_rank) {
  common::Json gpus = common::Json::array();
  for (size_t g = 0; g < topo.gpus.size(); ++g) {
    common::Json nics = common::Json::array();
    for (size_t n : placement.gpus[g].nics) nics.push_back(topo.nics[n].name);
    gpus.push_back({{"index", topo.gpus[g].index}, {"pci", topo.gpus[g].pci}, {"numa", topo.gpus[g].numa},
                    {"nics", nics}, {"nic_locality", placement.gpus[g].nic_locality},
                    {"cpus", topology::FormatCpuList(placement.gpus[g].cpus)}});
  }
  common::Json nics = common::Json::array();
  for (size_t n = 0; n < topo.nics.size(); ++n) {
    const auto& nic = topo.nics[n];
    bool data = std::find(placement.data_nics.begin(), placement.data_nics.end(), n) != placement.data_nics.end();
    nics.push_back({{"name", nic.name}, {"ib_device", nic.ib_device}, {"pci", nic.pci}, {"numa", nic.numa},
                    {"role", data ? "data" : "host"}});
  }
  common::Json env = common::Json::object();
  common::Json enforced = common::Json::array();
  for (const auto& var : plan.env) {
    env[var.name] = var.mode == topology::VarMode::kPrepend ? var.value + ":$" + var.name : var.value;
    if (var.enforced) enforced.push_back(var.name);
  }
  return {{"source", topo.source}, {"gpus", gpus}, {"nics", nics},
          {"profile", topology::ProfileName(plan.profile)}, {"local_rank", local_rank}, {"task_gpus", plan.gpus},
          {"task_nics", plan.nics}, {"cpus", topology::FormatCpuList(plan.cpus)}, {"env", env},
          {"enforced", enforced}, {"notes", plan.notes}};
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("srunway-topo");
  common::ExitIfStdoutLost(1);
  CLI::App app{"Print a node's GPU -> NIC, NUMA and CPU map and a task's environment plan."};
  common::SetUpProgram(app, "srunway-topo");
  std::string xml, profile_name = "auto", gpus_text, plugin_path, plugin_args;
  int local_rank = 0, local_tasks = 0;
  bool json = false;
  app.add_option("--xml", xml, "hwloc XML file instead of the live machine")->check(CLI::ExistingFile);
  app.add_option("--profile", profile_name, "auto, a3mega, a3high, generic or none")->capture_default_str();
  app.add_option("--local-rank", local_rank, "the task's local rank")->capture_default_str()->check(common::NonNegative());
  app.add_option("--local-tasks", local_tasks, "tasks on the node (default: one per GPU)")->check(common::Positive());
  app.add_option("--gpus", gpus_text, "the GPUs the task sees, as in CUDA_VISIBLE_DEVICES ('' for none; default: all)");
  app.add_option("--plugin-path", plugin_path, "directory of the NCCL network plugin");
  app.add_option("--plugin-args", plugin_args,
                 "the SPANK plugin's plugstack.conf arguments ('default_profile=a3mega plugin_path=/dir ...'): "
                 "checked as the plugin checks them and planned with (--profile then acts as srun's "
                 "--network-profile)");
  app.add_flag("--json", json, "print JSON for scripts");
  common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? kExitOk : kExitUsage;
  }

  // Without --plugin-args, --profile is the profile itself; with them, it is what a user asks of the plugin.
  topology::PluginConfig config;
  std::optional<std::string> user_profile;
  if (app.count("--plugin-args") > 0) {
    // Split on white space, as Slurm splits a plugstack.conf line into the plugin's argv.
    std::vector<std::string> words;
    std::istringstream stream(plugin_args);
    for (std::string word; stream >> word;) words.push_back(word);
    auto parsed = topology::ParsePluginArgs(words);
    if (!parsed.ok()) {
      common::LogError("--plugin-args: {}", parsed.status().message());
      return kExitUsage;
    }
    config = *parsed;
    if (app.count("--profile") > 0) user_profile = profile_name;
    if (xml.empty()) xml = config.topology_xml;
    if (plugin_path.empty()) plugin_path = config.plugin_path;
  } else {
    user_profile = profile_name;
  }
  auto profile = topology::ChooseProfile(config, user_profile);
  if (!profile.ok()) {
    common::LogError("{}", profile.status().message());
    return kExitUsage;
  }
  // In a helper process: a file that crashes hwloc is an error line here too, not a crash. The helper beside this
  // program (a build tree) wins over the installed one.
  std::error_code ec;
  const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "srunway-topo-helper";
  const std::string helper = !ec && std::filesystem::exists(beside, ec) ? beside.string()
                                                                        : topology::DefaultTopologyHelper();
  auto topo = topology::LoadTopologyIsolated(xml, kTopologyTimeoutMs, helper);
  if (!topo.ok()) {
    common::LogError("{}", topo.status().message());
    return kExitTopology;
  }
  std::vector<int> visible;
  if (app.count("--gpus") == 0) {
    for (const auto& gpu : topo->gpus) visible.push_back(gpu.index);
  } else {
    auto parsed = topology::ParseVisibleDevices(gpus_text);
    if (!parsed.ok()) {
      common::LogError("--gpus: {}", parsed.status().message());
      return kExitUsage;
    }
    visible = *parsed;
  }
  const bool tasks_given = local_tasks > 0;  // 0: not given (a given 0 is refused above)
  if (!tasks_given) local_tasks = std::max<int>(1, static_cast<int>(topo->gpus.size()));
  if (local_rank >= local_tasks) {
    common::LogError("--local-rank {} is not below the node's {} task{} ({})", local_rank, local_tasks,
                     local_tasks == 1 ? "" : "s",
                     tasks_given ? "--local-tasks" : "one per GPU; --local-tasks sets another count");
    return kExitUsage;
  }
  topology::PlanRequest request;
  request.profile = *profile;
  request.task_gpus = topology::TaskGpus(visible, local_rank, local_tasks);
  request.plugin_dir = plugin_path;
  topology::EnvPlan plan = topology::MakePlan(*topo, request);
  topology::NodePlacement placement = topology::PlaceNode(*topo, topology::GetProfile(plan.profile).reserves_nic_cores);
  if (json) {
    common::Print("{}\n", ToJson(*topo, placement, plan, local_rank).dump(2));
  } else {
    PrintText(*topo, placement, plan, local_rank);
  }
  return kExitOk;
}
