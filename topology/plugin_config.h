// What the SPANK plugin reads from the admin (plugstack.conf arguments) and the user (srun options), and how
// a plan meets the task's existing environment. Kept here so it is tested without slurmstepd.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "topology/plan.h"
#include "topology/profiles.h"

namespace srunway::topology {

struct PluginConfig {
  ProfileId default_profile = ProfileId::kAuto;  // default_profile=
  bool allow_user_profile = true;                // allow_user_profile=yes|no
  std::string topology_xml;                      // topology_xml=/abs/path.xml; empty: the live machine
  std::string plugin_path;                       // plugin_path=/abs/dir of the NCCL network plugin
  std::set<std::string> forced;                  // force=NCCL_PROTO,NCCL_ALGO: users may not override these
  bool nccl_topo_file = false;                   // nccl_topo_file=yes: write an NCCL_TOPO_FILE per step and node
  std::string tmpdir = "/tmp";                   // tmpdir=/abs/dir: where that file goes (a fresh 0700 directory)
  std::string topo_helper;                       // topo_helper=/abs/srunway-topo-helper; empty: the installed one
};

// Arguments as they stand after the plugin's path in plugstack.conf; unknown keys and bad values are errors
// naming the argument.
common::StatusOr<PluginConfig> ParsePluginArgs(std::span<const std::string> args);

enum class GpuAffinity { kClosest, kNone };
common::StatusOr<GpuAffinity> ParseGpuAffinity(std::string_view value);

// The profile a step gets: the user's (--network-profile) when given and allowed, else the admin's default.
common::StatusOr<ProfileId> ChooseProfile(const PluginConfig& config, const std::optional<std::string>& user_choice);

// CUDA_VISIBLE_DEVICES as node GPU indices; UUIDs and MIG names cannot be placed and are an error.
common::StatusOr<std::vector<int>> ParseVisibleDevices(std::string_view value);

struct EnvDecision {
  enum class Action { kSet, kKeepUser, kOverrideUser };
  std::string name;
  std::string value;       // what the task gets
  Action action = Action::kSet;
  std::string user_value;  // what the user had, for kKeepUser and kOverrideUser
};

using GetEnvFn = std::function<std::optional<std::string>(const std::string& name)>;

// A variable the user set is kept, unless the profile enforces it or the admin forces it; search paths are
// prepended to (once). Every value is checked: no NUL or newline reaches a task's environment.
common::StatusOr<std::vector<EnvDecision>> DecideEnv(const EnvPlan& plan, const GetEnvFn& get,
                                                     const std::set<std::string>& forced);

}  // namespace srunway::topology
