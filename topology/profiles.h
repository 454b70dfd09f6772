// Network profiles as data: for each, the NCCL and plugin variables it sets and how it places NICs and cores.
#pragma once

#include <span>
#include <string_view>

#include "common/status.h"

namespace srunway::topology {

enum class ProfileId { kAuto, kA3Mega, kA3High, kGeneric, kNone };

// "auto", "a3mega", "a3high", "generic", "none"; anything else is an InvalidArgument listing these.
common::StatusOr<ProfileId> ParseProfile(std::string_view name);
std::string_view ProfileName(ProfileId id);

enum class VarMode {
  kSet,      // NAME=value
  kPrepend,  // NAME=value:$NAME (a search path)
};

// A value may hold placeholders, filled from the topology and the task's GPUs (see plan.cc):
// {gpu_nics} data NICs, the task's first; {task_nics} the task's Ethernet NICs; {task_hcas} the task's
// InfiniBand devices; {host_nic} the NIC no GPU sits beside; {plugin_dir}; {tx_bindings}/{rx_bindings} TCPX
// per-NIC core sets. A variable whose placeholder has no value on this node is left out.
struct ProfileVar {
  std::string_view name;
  std::string_view value;
  VarMode mode = VarMode::kSet;
  bool enforced = false;  // the vendor's guest-config checker rejects other values: a user may not change it
};

struct Profile {
  ProfileId id;
  std::string_view name;
  std::string_view description;
  // Where the network plugin is looked for when the admin gives no plugin_path=; the first that exists wins.
  std::span<const std::string_view> plugin_dirs;
  // The file whose presence in a plugin directory means the plugin is installed (for auto).
  std::string_view plugin_file;
  // TCPX: per-socket transmit and receive cores, as fractions of a socket's cores (published: skip 8 of 52,
  // then 14 for transmit, 14 for receive). Tasks are pinned to the cores left over.
  bool reserves_nic_cores = false;
  std::span<const ProfileVar> vars;
};

std::span<const Profile> AllProfiles();
const Profile& GetProfile(ProfileId id);

}  // namespace srunway::topology
