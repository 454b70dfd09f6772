// Rendering a blueprint's Slurm configuration; see render.h.
#include "blueprints/render.h"

#include <fmt/format.h>

#include <cctype>

#include "blueprints/catalog.h"
#include "common/hostlist.h"
#include "blueprints/blueprint.h"
#include "common/parse.h"

namespace srunway::blueprint {
namespace {

// Where slurm-gcp's images keep Slurm's configuration, and where the image stage's site install puts the plugin.
constexpr std::string_view kClusterSlurmEtc = "/etc/slurm";
constexpr std::string_view kImagePluginPath = "/usr/local/lib/x86_64-linux-gnu/slurm/srunway.so";

using common::StatusOr;

constexpr int64_t kMaxPort = 65535;

// Machine types of the A3 family and the small ones the blueprints use: vCPUs, GPUs and memory in MB.
struct MachineType {
  std::string_view name;
  int cpus, gpus, memory_mb;
};
constexpr MachineType kMachineTypes[] = {
    {"a3-megagpu-8g", 208, 8, 1'916'928}, {"a3-highgpu-8g", 208, 8, 1'916'928}, {"n2-standard-2", 2, 0, 8'192},
    {"n2-standard-8", 8, 0, 32'768},      {"c2-standard-4", 4, 0, 16'384},      {"c2-standard-8", 8, 0, 32'768}};

bool EndsWith(const std::string& source, std::string_view module) { return ModulePath(source).ends_with(module); }

YAML::Node Setting(const Blueprint& bp, const Module& m, std::string_view name) {
  YAML::Node value = Lookup(Lookup(m.node, "settings"), name);
  return value.IsDefined() ? Resolve(bp, value) : value;
}

std::string Text(const Blueprint& bp, const Module& m, std::string_view name, std::string fallback) {
  YAML::Node value = Setting(bp, m, name);
  return value.IsScalar() ? value.Scalar() : fallback;
}

// A setting that Slurm's configuration takes as one word (a value resolved from variables here, or through --set,
// is checked again: validation leaves some for deploy time).
StatusOr<std::string> Word(const Blueprint& bp, const Module& m, std::string_view name, std::string fallback) {
  std::string value = Text(bp, m, name, std::move(fallback));
  if (std::string wrong = NotOneWord(value); !wrong.empty()) {
    return common::InvalidArgument("module '{}': setting {} goes into Slurm's configuration as one word, and {:?} {}",
                                   m.id, name, value, wrong);
  }
  return value;
}

// A whole number in [low, high] (slurm.conf takes nothing else: Sockets=0 or a port past 65535 rendered, and
// slurmctld refused the file).
StatusOr<int64_t> Number(const Blueprint& bp, const Module& m, std::string_view name, int64_t fallback, int64_t low,
                         int64_t high = int64_t{1} << 30) {
  YAML::Node value = Setting(bp, m, name);
  if (!value.IsDefined() || value.IsNull()) return fallback;
  if (!value.IsScalar()) return common::InvalidArgument("module '{}': setting {} must be a number", m.id, name);
  if (!FindExpressions(value.Scalar()).empty()) {
    return common::InvalidArgument("module '{}': setting {} is '{}', known only when Terraform evaluates it; give a "
                                   "number to render offline", m.id, name, value.Scalar());
  }
  return common::ParseInt(value.Scalar(), fmt::format("module '{}': setting {}", m.id, name), low, high);
}

bool Flag(const Blueprint& bp, const Module& m, std::string_view name) {
  YAML::Node value = Setting(bp, m, name);
  return value.IsScalar() && (value.Scalar() == "true" || value.Scalar() == "True");
}

// Letters and digits only, lower case: slurm-gcp's form of cluster and nodeset names.
std::string Compact(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// A map setting (node_conf, partition_conf) as " KEY=VALUE" words for its slurm.conf line.
StatusOr<std::string> Conf(const Blueprint& bp, const Module& m, std::string_view name) {
  std::string out;
  YAML::Node map = Setting(bp, m, name);
  if (!map.IsMap()) return out;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->second.IsScalar()) continue;
    for (const std::string& word : {it->first.Scalar(), it->second.Scalar()}) {
      if (std::string wrong = NotOneWord(word); !wrong.empty()) {
        return common::InvalidArgument("module '{}': {} goes into slurm.conf as {:?}={:?}, and {:?} {}", m.id, name,
                                       it->first.Scalar(), it->second.Scalar(), word, wrong);
      }
    }
    out += fmt::format(" {}={}", it->first.Scalar(), it->second.Scalar());
  }
  return out;
}

// The local controller's task_plugin setting: task/none (the default), or slurm-gcp's task/affinity,task/cgroup
// (either alone too). task/cgroup brings proctrack/cgroup and slurm-gcp's cgroup.conf (into `files`).
StatusOr<std::string> LocalTaskPlugins(const Blueprint& bp, const Module& controller,
                                       std::map<std::string, std::string>& files) {
  const std::string plugins = Text(bp, controller, "task_plugin", "task/none");
  bool affinity = false, cgroup = false;
  for (std::string_view name : common::Split(plugins, ',')) {
    if (name == "task/affinity") {
      affinity = true;
    } else if (name == "task/cgroup") {
      cgroup = true;
    } else if (name != "task/none" || plugins != "task/none") {
      return common::InvalidArgument("task_plugin of module '{}' is '{}': use task/none, or task/affinity and/or "
                                     "task/cgroup (comma-separated)", controller.id, plugins);
    }
  }
  if (!affinity && !cgroup) {
    return std::string(
        "# Not slurm-gcp's task/affinity,task/cgroup: with more CPUs declared per node than the machine has\n"
        "# (config_overrides), task/affinity binds every task to CPU 0 and cannot lay out --cpu-bind=cores;\n"
        "# blueprints/local/slurm-gcp.yaml declares the real CPUs and uses them (README).\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n");
  }
  std::string conf = fmt::format("# slurm-gcp's task plugins; the nodes must declare no more CPUs than the machine has.\n"
                                 "ProctrackType=proctrack/{}\nTaskPlugin={}\n", cgroup ? "cgroup" : "linuxproc", plugins);
  if (cgroup) {
    // slurm-gcp's cgroup.conf, except memory: local nodes declare no RealMemory, so a job would be held to 1 MB.
    files["cgroup.conf"] =
        "# cgroup.conf rendered by srunway-blueprint: slurm-gcp's, without ConstrainRAMSpace (local nodes declare\n"
        "# no RealMemory, so every job would be limited to Slurm's 1 MB default)\n"
        "CgroupAutomount=no\nConstrainCores=yes\nConstrainRAMSpace=no\nConstrainSwapSpace=no\nConstrainDevices=yes\n";
  }
  return conf;
}

struct Nodeset {
  const Module* module;
  std::string hostlist;
  std::vector<std::string> hosts;
  int gpus = 0;
  std::string line;  // the NodeName= line
};

}  // namespace

StatusOr<LocalCluster> LocalClusterOf(const Blueprint& bp) {
  LocalCluster local;
  const Module* controller = nullptr;
  for (const Module& m : bp.modules) {
    if (EndsWith(m.source, "srunway/local/controller")) controller = &m;
  }
  if (controller == nullptr) return common::NotFound("no srunway/local/controller module: not a local blueprint");
  SRUNWAY_ASSIGN_OR_RETURN(local.state_dir, Word(bp, *controller, "state_dir", "/var/tmp/srunway-cluster"));
  SRUNWAY_ASSIGN_OR_RETURN(int64_t port, Number(bp, *controller, "port_base", 6817, 1, kMaxPort));
  local.port_base = static_cast<int>(port);
  for (const Module& m : bp.modules) {
    if (!EndsWith(m.source, "srunway/local/nodeset")) continue;
    SRUNWAY_ASSIGN_OR_RETURN(const std::string nodes, Word(bp, m, "nodes", ""));
    SRUNWAY_ASSIGN_OR_RETURN(auto hosts, common::ExpandHostlist(nodes));
    local.nodes.insert(local.nodes.end(), hosts.begin(), hosts.end());
    SRUNWAY_ASSIGN_OR_RETURN(int64_t gpus, Number(bp, m, "gpus", 0, 0));
    local.gpus_per_node = static_cast<int>(gpus);
  }
  if (local.nodes.empty()) return common::InvalidArgument("the local blueprint has no srunway/local/nodeset with nodes");
  return local;
}

StatusOr<std::map<std::string, std::string>> RenderSlurm(const Blueprint& bp) {
  auto local = LocalClusterOf(bp);
  // NotFound: no local controller, a Google Cloud blueprint. A local one with a bad setting is that error, never
  // rendered as a cloud cluster instead.
  if (!local.ok() && local.status().code() != common::StatusCode::kNotFound) return local.status();
  const bool is_local = local.ok();
  const Module* controller = nullptr;
  for (const Module& m : bp.modules) {
    if (EndsWith(m.source, "srunway/local/controller") || EndsWith(m.source, "schedmd-slurm-gcp-v6-controller")) controller = &m;
  }
  if (controller == nullptr) {
    return common::InvalidArgument("no controller module (srunway/local/controller or schedmd-slurm-gcp-v6-controller)");
  }
  YAML::Node deployment = Resolve(bp, bp.Var("deployment_name"));
  YAML::Node cluster_var = Resolve(bp, bp.Var("slurm_cluster_name"));
  const std::string cluster = cluster_var.IsScalar() ? cluster_var.Scalar()
                              : Compact(deployment.IsScalar() ? deployment.Scalar() : "cluster").substr(0, 10);
  if (std::string wrong = NotOneWord(cluster); !wrong.empty()) {
    return common::InvalidArgument("vars.slurm_cluster_name goes into Slurm's configuration as one word, and {:?} {}",
                                   cluster, wrong);
  }
  std::string host = cluster + "-controller", node_address, cluster_name = cluster;
  if (is_local) {
    SRUNWAY_ASSIGN_OR_RETURN(host, Word(bp, *controller, "host", "localhost"));
    // Local nodes all listen at the controller's address (on ports of their own).
    SRUNWAY_ASSIGN_OR_RETURN(node_address, Word(bp, *controller, "address", "127.0.0.1"));
    SRUNWAY_ASSIGN_OR_RETURN(cluster_name, Word(bp, *controller, "cluster_name", cluster));
  }
  const std::string etc = is_local ? local->state_dir + "/etc" : std::string(kClusterSlurmEtc);

  // Nodesets, by module id.
  std::map<std::string, Nodeset> nodesets;
  int next_port = is_local ? local->port_base + 1 : 0;
  for (const Module& m : bp.modules) {
    Nodeset set{&m, "", {}, 0, ""};
    if (EndsWith(m.source, "srunway/local/nodeset")) {
      SRUNWAY_ASSIGN_OR_RETURN(set.hostlist, Word(bp, m, "nodes", ""));
      SRUNWAY_ASSIGN_OR_RETURN(set.hosts, common::ExpandHostlist(set.hostlist));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t sockets, Number(bp, m, "sockets", 1, 1));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t cores, Number(bp, m, "cores_per_socket", 1, 1));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t threads, Number(bp, m, "threads_per_core", 1, 1));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t gpus, Number(bp, m, "gpus", 0, 0));
      set.gpus = static_cast<int>(gpus);
      const int first = next_port;
      next_port += static_cast<int>(set.hosts.size());
      set.line = fmt::format("NodeName={} NodeHostname={} NodeAddr={} Port={}-{} Sockets={} CoresPerSocket={} "
                             "ThreadsPerCore={} CPUs={}{} State=UNKNOWN",
                             set.hostlist, host, node_address, first, next_port - 1,
                             sockets, cores, threads, sockets * cores * threads,
                             gpus > 0 ? fmt::format(" Gres=gpu:{}", gpus) : "");
    } else if (EndsWith(m.source, "schedmd-slurm-gcp-v6-nodeset")) {
      SRUNWAY_ASSIGN_OR_RETURN(int64_t fixed, Number(bp, m, "node_count_static", 0, 0));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t dynamic, Number(bp, m, "node_count_dynamic_max", 0, 0));
      if (fixed + dynamic == 0) continue;
      const std::string name = Compact(Text(bp, m, "name", m.id));
      set.hostlist = fmt::format("{}-{}-[0-{}]", cluster, name, fixed + dynamic - 1);
      SRUNWAY_ASSIGN_OR_RETURN(set.hosts, common::ExpandHostlist(set.hostlist));
      const std::string type = Text(bp, m, "machine_type", "");
      std::string resources;
      for (const MachineType& t : kMachineTypes) {
        if (t.name != type) continue;
        set.gpus = t.gpus;
        resources = fmt::format(" CPUs={} RealMemory={}{}", t.cpus, t.memory_mb * 95 / 100,
                                t.gpus > 0 ? fmt::format(" Gres=gpu:{}", t.gpus) : "");
      }
      SRUNWAY_ASSIGN_OR_RETURN(const std::string node_conf, Conf(bp, m, "node_conf"));
      set.line = fmt::format("NodeName={}{}{} State={}", set.hostlist, resources, node_conf,
                             dynamic > 0 ? "CLOUD" : "UNKNOWN");
    } else {
      continue;
    }
    nodesets.emplace(m.id, std::move(set));
  }
  if (is_local && next_port - 1 > kMaxPort) {
    return common::InvalidArgument("module '{}': port_base {} leaves no room for the nodes' ports ({}-{}: past {})",
                                   controller->id, local->port_base, local->port_base + 1, next_port - 1, kMaxPort);
  }
  if (nodesets.empty()) return common::InvalidArgument("no nodeset module with nodes (srunway/local/nodeset or schedmd-slurm-gcp-v6-nodeset)");

  std::map<std::string, std::string> files;
  std::string partitions;
  for (const Module& m : bp.modules) {
    if (!EndsWith(m.source, "srunway/local/partition") && !EndsWith(m.source, "schedmd-slurm-gcp-v6-partition")) continue;
    std::vector<std::string> hosts;
    for (const std::string& id : m.use) {
      auto it = nodesets.find(id);
      if (it != nodesets.end()) hosts.insert(hosts.end(), it->second.hosts.begin(), it->second.hosts.end());
    }
    if (hosts.empty()) return common::InvalidArgument("partition module '{}' uses no nodeset with nodes", m.id);
    SRUNWAY_ASSIGN_OR_RETURN(const std::string name, Word(bp, m, "partition_name", m.id));
    SRUNWAY_ASSIGN_OR_RETURN(const std::string max_time, Word(bp, m, "max_time", "INFINITE"));
    SRUNWAY_ASSIGN_OR_RETURN(const std::string partition_conf, Conf(bp, m, "partition_conf"));
    partitions += fmt::format("PartitionName={} Nodes={} Default={} MaxTime={} State=UP{}{}\n", name,
                              common::CompressHostlist(hosts), Flag(bp, m, "is_default") ? "YES" : "NO", max_time,
                              Flag(bp, m, "exclusive") ? " OverSubscribe=EXCLUSIVE" : "", partition_conf);
  }
  if (partitions.empty()) return common::InvalidArgument("no partition module");

  std::string conf = fmt::format("# slurm.conf rendered by srunway-blueprint from {}\nClusterName={}\nSlurmctldHost={}\n",
                                 bp.blueprint.file, cluster_name, host);
  if (is_local) {
    const std::string& s = local->state_dir;
    conf += fmt::format(
        "SlurmctldPort={}\nSlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nAuthInfo=socket={}/munge/munge.socket\n"
        "CredType=cred/munge\nStateSaveLocation={}/ctld\nSlurmdSpoolDir={}/spool\nSlurmctldPidFile={}/run/slurmctld.pid\n"
        "SlurmdPidFile={}/run/slurmd-%n.pid\nSlurmctldLogFile={}/log/slurmctld.log\nSlurmdLogFile={}/log/slurmd-%n.log\n"
        "SlurmctldDebug=info\nSlurmdDebug=info\nTaskProlog={}/etc/task-prolog.sh\nSlurmdParameters=config_overrides\n"
        "ReturnToService=2\nSlurmdTimeout=60\nMessageTimeout=20\nKillWait=5\nInactiveLimit=0\n"
        "AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nJobAcctGatherType=jobacct_gather/none\n",
        local->port_base, s, s, s, s, s, s, s, s);
    SRUNWAY_ASSIGN_OR_RETURN(std::string task, LocalTaskPlugins(bp, *controller, files));
    conf += task;
    if (Flag(bp, *controller, "external_prolog_epilog")) {
      // slurm-gcp's layout: one program as Prolog and Epilog that runs the scripts of adm/slurm/prolog_slurmd.d and
      // partition-NAME-prolog_slurmd.d (epilog_slurmd.d for the epilog); daemons.sh installs it into etc.
      conf += fmt::format("# slurm-gcp's external prolog/epilog: scripts in {0}/adm/slurm/[partition-NAME-]{{prolog,epilog}}"
                          "_slurmd.d\nProlog={0}/etc/slurm-mux.sh\nEpilog={0}/etc/slurm-mux.sh\n", s);
    }
    // As slurm-gcp: prologs run when the job is allocated; with cgroups, an extern step holds its processes.
    const bool external = Flag(bp, *controller, "external_prolog_epilog");
    const bool contain = task.find("proctrack/cgroup") != std::string::npos;
    if (external || contain) {
      conf += fmt::format("PrologFlags={}\n", external && contain ? "Alloc,Contain" : external ? "Alloc" : "Contain");
    }
  } else {
    conf += "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup,task/affinity\nReturnToService=2\n"
            "PrologFlags=Alloc,Contain\n";
  }
  conf += fmt::format("PlugStackConfig={}/plugstack.conf\nMpiDefault=pmix\nGresTypes=gpu\nSelectType=select/cons_tres\n"
                      "SelectTypeParameters=CR_Core\nSchedulerType=sched/backfill\n", etc);
  for (const auto& [id, set] : nodesets) conf += set.line + "\n";
  conf += partitions;
  files["slurm.conf"] = conf;

  std::string gres = "# gres.conf rendered by srunway-blueprint: the GPUs of every node\n";
  for (const auto& [id, set] : nodesets) {
    if (set.gpus == 0) continue;
    if (is_local) {  // fake character devices per node, made by srunway-blueprint up
      for (const std::string& node : set.hosts) {
        gres += fmt::format("NodeName={} Name=gpu File={}/dev/{}/nvidia[0-{}]\n", node, local->state_dir, node, set.gpus - 1);
      }
    } else {
      gres += fmt::format("NodeName={} Name=gpu File=/dev/nvidia[0-{}]\n", set.hostlist, set.gpus - 1);
    }
  }
  files["gres.conf"] = gres;

  // The SPANK plugin with the deployment's network profile (vars.srunway_profile), or what the controller says.
  std::string plugstack = is_local ? Text(bp, *controller, "plugstack", "") : "";
  if (!is_local) {
    // The network profile of the SPANK plugin follows the GPU machines: TCPXO on A3 Mega, TCPX on A3 High.
    std::string profile = "auto";
    for (const auto& [id, set] : nodesets) {
      const std::string type = Text(bp, *set.module, "machine_type", "");
      if (type == "a3-megagpu-8g") profile = "a3mega";
      if (type == "a3-highgpu-8g") profile = "a3high";
    }
    // What scripts/install-site.sh --prefix /usr/local writes in the image stage: meson puts the plugin under
    // lib/<multiarch> on Ubuntu (tests/unit/blueprints/blueprint_cli.sh compares with meson's install list).
    files["plugstack.conf.d/srunway.conf"] = fmt::format(
        "# srunway's SPANK plugin, installed in the image by scripts/install-site.sh --prefix /usr/local\n"
        "required {} default_profile={}\n", kImagePluginPath, profile);
    plugstack = fmt::format("include {}/plugstack.conf.d/*.conf", etc);
  }
  files["plugstack.conf"] = "# plugstack.conf rendered by srunway-blueprint: SPANK plugins loaded into every job step\n" +
                            (plugstack.empty() ? "# (no plugins configured)" : plugstack) + "\n";
  // Local: Slurm 22.05's tree fence, which its default "mixed" uses for fences without data (barriers), does not
  // hold between two slurmd on one host: ranks of one node pass a barrier before the other node's arrive (see
  // tests/slurm/barrier_order.sh; MPI_Init then let messages reach ranks not yet ready for them). The ring fence
  // holds there. Real clusters keep Slurm's defaults.
  files["mpi.conf"] = is_local ? fmt::format("# mpi.conf rendered by srunway-blueprint: PMIx client files in each node's "
                                             "own spool directory; the ring fence, which holds between nodes on one "
                                             "host\nPMIxCliTmpDirBase={}/spool/pmixtmp\nPMIxCollFence=ring\n",
                                             local->state_dir)
                               : "# mpi.conf rendered by srunway-blueprint: Slurm's PMIx defaults\n";
  if (is_local) {
    // Appended to this machine's /etc/hosts inside each node's mount namespace (daemons.sh), so that job steps
    // resolve the node names, as a real cluster's DNS lets them.
    std::vector<std::string> names;
    for (const auto& [id, set] : nodesets) names.insert(names.end(), set.hosts.begin(), set.hosts.end());
    files["nodes.hosts"] = fmt::format("# nodes.hosts rendered by srunway-blueprint: every node at its NodeAddr\n{} {}\n",
                                       node_address, fmt::join(names, " "));
  }
  return files;
}

}  // namespace srunway::blueprint
