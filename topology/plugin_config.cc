// What the SPANK plugin reads from the admin (plugstack.conf arguments) and the user (srun options), and how
// a plan meets the task's existing environment. Kept here so it is tested without slurmstepd.
#include "topology/plugin_config.h"

#include "common/env.h"
#include "common/parse.h"

namespace srunway::topology {
namespace {

common::Status CheckAbsolutePath(std::string_view key, std::string_view value) {
  if (value.empty() || value.front() != '/' || value.find('\n') != std::string_view::npos) {
    return common::InvalidArgument("plugstack argument {}='{}' must be an absolute path", key,
                                   common::Printable(value));
  }
  return common::Status::Ok();
}

}  // namespace

common::StatusOr<PluginConfig> ParsePluginArgs(std::span<const std::string> args) {
  PluginConfig config;
  for (const std::string& arg : args) {
    size_t equals = arg.find('=');
    if (equals == std::string::npos) {
      return common::InvalidArgument("plugstack argument '{}' is not key=value", common::Printable(arg));
    }
    std::string_view key = std::string_view(arg).substr(0, equals);
    std::string_view value = std::string_view(arg).substr(equals + 1);
    if (key == "default_profile") {
      SRUNWAY_ASSIGN_OR_RETURN(config.default_profile, ParseProfile(value));
    } else if (key == "allow_user_profile") {
      SRUNWAY_ASSIGN_OR_RETURN(config.allow_user_profile, common::ParseBool(value, key));
    } else if (key == "topology_xml") {
      SRUNWAY_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
      config.topology_xml = value;
    } else if (key == "plugin_path") {
      SRUNWAY_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
      config.plugin_path = value;
    } else if (key == "nccl_topo_file") {
      SRUNWAY_ASSIGN_OR_RETURN(config.nccl_topo_file, common::ParseBool(value, key));
    } else if (key == "tmpdir") {
      SRUNWAY_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
      config.tmpdir = value;
    } else if (key == "topo_helper") {
      SRUNWAY_RETURN_IF_ERROR(CheckAbsolutePath(key, value));
      config.topo_helper = value;
    } else if (key == "force") {
      for (std::string_view name : common::Split(value, ',')) {
        if (name.empty()) continue;
        SRUNWAY_RETURN_IF_ERROR(common::ValidateEnvAssignment(name, "").WithContext("plugstack argument force"));
        config.forced.insert(std::string(name));
      }
    } else {
      return common::InvalidArgument(
          "unknown plugstack argument '{}' (expected default_profile, allow_user_profile, topology_xml, plugin_path, "
          "force, nccl_topo_file, tmpdir or topo_helper)", key);
    }
  }
  return config;
}

common::StatusOr<GpuAffinity> ParseGpuAffinity(std::string_view value) {
  if (value == "closest") return GpuAffinity::kClosest;
  if (value == "none") return GpuAffinity::kNone;
  return common::InvalidArgument("--gpu-affinity={} is not closest or none", value);
}

common::StatusOr<ProfileId> ChooseProfile(const PluginConfig& config, const std::optional<std::string>& user_choice) {
  if (!user_choice) return config.default_profile;
  SRUNWAY_ASSIGN_OR_RETURN(ProfileId chosen, ParseProfile(*user_choice));
  if (!config.allow_user_profile && chosen != config.default_profile) {
    return common::MakeStatus(common::StatusCode::kPermissionDenied,
                              "--network-profile={} refused: the administrator fixed the profile to {} "
                              "(allow_user_profile=no)", *user_choice, ProfileName(config.default_profile));
  }
  return chosen;
}

common::StatusOr<std::vector<int>> ParseVisibleDevices(std::string_view value) {
  std::vector<int> devices;
  value = common::Trim(value);
  if (value.empty() || value == "NoDevFiles") return devices;
  for (std::string_view field : common::Split(value, ',')) {
    auto index = common::ParseInt(common::Trim(field), "CUDA_VISIBLE_DEVICES", 0, 1 << 16);
    if (!index.ok()) {
      return common::InvalidArgument("CUDA_VISIBLE_DEVICES='{}': '{}' is not a GPU index (UUIDs and MIG devices "
                                     "cannot be placed)", common::Printable(value), common::Printable(field));
    }
    devices.push_back(static_cast<int>(*index));
  }
  return devices;
}

common::StatusOr<std::vector<EnvDecision>> DecideEnv(const EnvPlan& plan, const GetEnvFn& get,
                                                     const std::set<std::string>& forced) {
  std::vector<EnvDecision> decisions;
  for (const EnvVar& var : plan.env) {
    std::optional<std::string> user = get(var.name);
    EnvDecision decision{var.name, var.value, EnvDecision::Action::kSet, user.value_or("")};
    if (var.mode == VarMode::kPrepend) {
      bool already = user && (*user == var.value || user->starts_with(var.value + ":"));
      if (already) continue;
      if (user && !user->empty()) decision.value = var.value + ":" + *user;
    } else if (user) {
      bool must = var.enforced || forced.contains(var.name);
      if (*user == var.value) continue;
      decision.action = must ? EnvDecision::Action::kOverrideUser : EnvDecision::Action::kKeepUser;
      if (!must) decision.value = *user;
    }
    SRUNWAY_RETURN_IF_ERROR(common::ValidateEnvAssignment(decision.name, decision.value));
    decisions.push_back(std::move(decision));
  }
  return decisions;
}

}  // namespace srunway::topology
