// srunway-blueprint: Cluster Toolkit blueprints offline. validate, expand, render the Slurm configuration, start
// and stop the local cluster (up/down), and print or run the toolkit's commands for Google Cloud (deploy).
// Exit codes: 0 done; 1 the blueprint has errors, or a step failed; 2 bad command line or unreadable file.
#include <CLI/CLI.hpp>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "blueprints/blueprint.h"
#include "blueprints/render.h"
#include "common/cli.h"
#include "common/env.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/subprocess.h"

namespace {

using namespace srunway;
using namespace srunway::blueprint;

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 1;
constexpr int kExitUsage = 2;

#ifndef SRUNWAY_LOCAL_DAEMONS
#define SRUNWAY_LOCAL_DAEMONS "blueprints/local/daemons.sh"
#endif

int Error(const std::string& message, int code) {
  fmt::print(stderr, "srunway-blueprint: {}\n", message);
  return code;
}

struct Input {
  std::string file;
  std::string deployment;
  std::vector<std::string> sets;
};

void AddInput(CLI::App* command, Input& in) {
  command->add_option("file", in.file, "the blueprint (YAML)")->required();
  command->add_option("-d,--deployment", in.deployment, "deployment file: vars and terraform_backend_defaults");
  command->add_option("--set", in.sets, "NAME=VALUE: a deployment variable, over the blueprint's and the deployment "
                                        "file's (repeatable)");
}

// Loads and validates; prints every diagnostic. Returns the blueprint only when it has no errors.
std::optional<Blueprint> LoadValid(const Input& in, int& code, std::vector<ValidatorResult>* validators = nullptr) {
  std::vector<std::pair<std::string, std::string>> sets;
  for (const std::string& set : in.sets) {
    size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0) {
      code = Error(fmt::format("--set {}: expected NAME=VALUE", set), kExitUsage);
      return std::nullopt;
    }
    sets.push_back({set.substr(0, eq), set.substr(eq + 1)});
  }
  std::vector<Diagnostic> diagnostics;
  auto bp = Load(in.file, in.deployment.empty() ? std::nullopt : std::optional(in.deployment), sets, diagnostics);
  if (!bp.ok()) {
    // Malformed YAML is the blueprint's fault (exit 1, at its place); a missing file is the command line's.
    if (bp.status().code() == common::StatusCode::kInvalidArgument) {
      fmt::print(stderr, "{}\n", bp.status().message());  // file:line:column, as every diagnostic
      code = kExitInvalid;
    } else {
      code = Error(bp.status().message(), kExitUsage);
    }
    return std::nullopt;
  }
  std::vector<Diagnostic> found = Validate(*bp, validators);
  diagnostics.insert(diagnostics.end(), found.begin(), found.end());
  int errors = 0;
  for (const Diagnostic& d : diagnostics) {
    fmt::print(stderr, "{}\n", FormatDiagnostic(d));
    errors += !d.warning;
  }
  if (errors > 0) {
    fmt::print(stderr, "srunway-blueprint: {}: {} error{}\n", in.file, errors, errors == 1 ? "" : "s");
    code = kExitInvalid;
    return std::nullopt;
  }
  code = kExitOk;
  return std::move(*bp);
}

// `flag`, where the user named the directory, leads the error line ("--out DIR: create DIR: ...").
int WriteFiles(const std::map<std::string, std::string>& files, const std::filesystem::path& dir,
               std::string_view flag = "") {
  auto written = common::WriteFilesAtomic(dir, files);
  if (written.ok()) return kExitOk;
  return Error(flag.empty() ? written.message() : fmt::format("{} {}: {}", flag, dir.string(), written.message()),
               kExitInvalid);
}

// The local cluster's directories and fake GPUs (character devices 195:N, which gres.conf accepts).
int PrepareLocal(const LocalCluster& local) {
  std::error_code ec;
  for (const char* sub : {"etc", "log", "run", "ctld", "spool"}) {
    std::filesystem::create_directories(std::filesystem::path(local.state_dir) / sub, ec);
    if (ec) return Error(fmt::format("cannot create {}/{}: {}", local.state_dir, sub, ec.message()), kExitInvalid);
  }
  for (const std::string& node : local.nodes) {
    const std::filesystem::path dev = std::filesystem::path(local.state_dir) / "dev" / node;
    std::filesystem::create_directories(dev, ec);
    std::filesystem::create_directories(std::filesystem::path(local.state_dir) / "nodes" / node / "spool" / "pmixtmp", ec);
    if (ec) return Error(fmt::format("cannot create the directories of {}: {}", node, ec.message()), kExitInvalid);
    for (int i = 0; i < local.gpus_per_node; ++i) {
      const std::string path = (dev / fmt::format("nvidia{}", i)).string();
      struct stat st{};
      if (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) continue;
      if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(195, static_cast<unsigned>(i))) != 0) {
        return Error(fmt::format("mknod {}: {} (up must run as root)", path, std::strerror(errno)), kExitInvalid);
      }
    }
  }
  return kExitOk;
}

// Runs the daemon script with the cluster's state directory, ports and nodes in its environment.
int RunDaemons(const LocalCluster& local, const std::string& verb) {
  std::string nodes;
  for (const std::string& node : local.nodes) nodes += (nodes.empty() ? "" : " ") + node;
  ::setenv("SRUNWAY_CLUSTER_DIR", local.state_dir.c_str(), 1);
  ::setenv("SRUNWAY_CLUSTER_PORT_BASE", std::to_string(local.port_base).c_str(), 1);
  ::setenv("SRUNWAY_CLUSTER_NODES", nodes.c_str(), 1);
  const std::string script = common::GetEnvOr("SRUNWAY_LOCAL_DAEMONS", SRUNWAY_LOCAL_DAEMONS);
  std::fflush(stdout);
  ::execl(script.c_str(), script.c_str(), verb.c_str(), static_cast<char*>(nullptr));
  return Error(fmt::format("cannot run {}: {}", script, std::strerror(errno)), kExitInvalid);
}

bool OnPath(const std::string& tool) {
  const std::string path = common::GetEnvOr("PATH", "/usr/bin:/bin");
  size_t at = 0;
  while (at <= path.size()) {
    size_t colon = path.find(':', at);
    std::string dir = path.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    if (!dir.empty() && ::access((dir + "/" + tool).c_str(), X_OK) == 0) return true;
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  return false;
}

// Runs argv (no shell between) with this program's terminal and environment, and waits for it: "" when it exited
// 0, else how it ended.
std::string RunInForeground(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ); rc != 0) {
    return fmt::format("could not be started: {}", std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return fmt::format("could not be waited for: {}", std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return fmt::format("was killed by {}", common::SignalName(WTERMSIG(status)));
  return WEXITSTATUS(status) == 0 ? "" : fmt::format("failed with exit code {}", WEXITSTATUS(status));
}

}  // namespace

int main(int argc, char** argv) {
  common::InitLogging("srunway-blueprint");
  common::ExitIfStdoutLost(1);
  CLI::App app{"Cluster Toolkit blueprints, offline: validate, expand, render Slurm's configuration, start the local "
               "cluster, deploy to Google Cloud with gcluster."};
  common::SetUpProgram(app, "srunway-blueprint");
  app.require_subcommand(1);
  Input in;
  std::string out_dir, target = "slurm", output;
  bool run = false;
  auto* validate = app.add_subcommand("validate", "check the blueprint: every problem as file:line:column");
  AddInput(validate, in);
  auto* expand = app.add_subcommand("expand", "print the fully resolved blueprint (stable: expanding it again changes nothing)");
  AddInput(expand, in);
  expand->add_option("-o,--output", output, "write it to this file instead of standard output");
  auto* render = app.add_subcommand("render", "write slurm.conf, gres.conf, plugstack.conf, mpi.conf (and, for local blueprints, nodes.hosts)");
  AddInput(render, in);
  render->add_option("--target", target, "slurm (the only target)")->check(CLI::IsMember({"slurm"}))->capture_default_str();
  render->add_option("--out", out_dir, "directory for the files")->required();
  auto* up = app.add_subcommand("up", "local target: render into the state directory and start the cluster");
  AddInput(up, in);
  auto* down = app.add_subcommand("down", "local target: stop the cluster");
  AddInput(down, in);
  auto* deploy = app.add_subcommand("deploy", "gcp target: print (or --run) the Cluster Toolkit commands");
  AddInput(deploy, in);
  deploy->add_option("--target", target, "gcp")->check(CLI::IsMember({"gcp"}))->required();
  deploy->add_flag("--run", run, "run the commands instead of printing them");
  app.footer("Example: srunway-blueprint validate blueprints/a3mega/slurm-a3mega-cluster.yaml "
             "-d blueprints/a3mega/deployment-image-cluster.yaml");
  common::RefuseIntegersOutOfRange(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitOk : kExitUsage;
  }

  int code = kExitOk;
  std::vector<ValidatorResult> validators;
  auto bp = LoadValid(in, code, &validators);
  if (!bp) return code;

  if (validate->parsed()) {
    common::Print("{}: valid: {} modules in {} deployment groups\n", in.file, bp->modules.size(), bp->groups.size());
    for (const ValidatorResult& v : validators) common::Print("  {}: {}\n", v.name, v.outcome);
    return kExitOk;
  }
  if (expand->parsed()) {
    const std::string text = Expand(*bp);
    if (output.empty()) {
      common::Print("{}", text);
      return kExitOk;
    }
    auto written = common::WriteFileAtomic(output, text);
    return written.ok() ? kExitOk : Error(fmt::format("--output {}: {}", output, written.message()), kExitInvalid);
  }
  if (render->parsed()) {
    auto files = RenderSlurm(*bp);
    if (!files.ok()) return Error(fmt::format("{}: {}", in.file, files.status().message()), kExitInvalid);
    if (int rc = WriteFiles(*files, out_dir, "--out"); rc != kExitOk) return rc;
    for (const auto& [name, text] : *files) common::Print("{}/{}\n", out_dir, name);
    return kExitOk;
  }
  if (up->parsed() || down->parsed()) {
    auto local = LocalClusterOf(*bp);
    if (!local.ok()) return Error(fmt::format("{}: {}", in.file, local.status().message()), kExitInvalid);
    if (down->parsed()) return RunDaemons(*local, "down");
    if (::geteuid() != 0) return Error("up must run as root (it starts munged and the Slurm daemons)", kExitInvalid);
    auto files = RenderSlurm(*bp);
    if (!files.ok()) return Error(fmt::format("{}: {}", in.file, files.status().message()), kExitInvalid);
    // The controller's task_prolog setting becomes the TaskProlog script.
    for (const Module& m : bp->modules) {
      YAML::Node prolog = Lookup(Lookup(m.node, "settings"), "task_prolog");
      if (prolog.IsDefined() && prolog.IsScalar()) (*files)["task-prolog.sh"] = Resolve(*bp, prolog).Scalar();
    }
    if (!files->contains("task-prolog.sh")) (*files)["task-prolog.sh"] = "#!/bin/sh\n";
    if (int rc = PrepareLocal(*local); rc != kExitOk) return rc;
    const std::filesystem::path etc = std::filesystem::path(local->state_dir) / "etc";
    if (int rc = WriteFiles(*files, etc); rc != kExitOk) return rc;
    ::chmod((etc / "task-prolog.sh").c_str(), 0755);
    return RunDaemons(*local, "up");
  }
  // deploy --target gcp: the toolkit's two steps, with the deployment file, as shell-quoted command lines. The local
  // target's modules are srunway's own, which gcluster does not know.
  if (LocalClusterOf(*bp).ok()) {
    return Error(fmt::format("{}: a local blueprint (module srunway/local/controller), not one for gcp: start it with "
                             "srunway-blueprint up", in.file), kExitInvalid);
  }
  std::vector<std::string> create = {"gcluster", "create", in.file, "--out", "."};
  if (!in.deployment.empty()) create.insert(create.begin() + 2, {"-d", in.deployment});
  for (const std::string& set : in.sets) create.insert(create.end(), {"--vars", set});
  YAML::Node name = Resolve(*bp, bp->Var("deployment_name"));
  const std::vector<std::vector<std::string>> commands = {
      create, {"gcluster", "deploy", name.IsScalar() ? name.Scalar() : "deployment"}};
  std::vector<std::string> lines;
  for (const std::vector<std::string>& command : commands) lines.push_back(common::ShellCommand(command));
  std::vector<std::string> missing;
  for (const char* tool : {"gcluster", "terraform"}) {
    if (!OnPath(tool)) missing.emplace_back(tool);
  }
  if (!run) {
    for (const std::string& line : lines) common::Print("{}\n", line);
    for (const std::string& tool : missing) fmt::print(stderr, "srunway-blueprint: note: {} is not on PATH\n", tool);
    return kExitOk;
  }
  if (!missing.empty()) {
    return Error(fmt::format("deploy --run needs {} on PATH (Cluster Toolkit: https://github.com/GoogleCloudPlatform/cluster-toolkit)",
                             missing.size() == 2 ? "gcluster and terraform" : missing[0]), kExitInvalid);
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    common::Print("+ {}\n", lines[i]);
    std::fflush(stdout);
    if (std::string how = RunInForeground(commands[i]); !how.empty()) {
      return Error(fmt::format("'{}' {}", lines[i], how), kExitInvalid);
    }
  }
  return kExitOk;
}
