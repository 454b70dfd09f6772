// Network profiles as data: for each, the NCCL and plugin variables it sets and how it places NICs and cores.
// Values are those Google publishes for A3 Mega (nccl-env-profile.sh, 2025) and A3 High (GPUDirect-TCPX
// recipes); see shared facts in the project's design notes and README.
#include "topology/profiles.h"

#include <array>

namespace srunway::topology {
namespace {

constexpr ProfileVar kA3MegaVars[] = {
    {"LD_LIBRARY_PATH", "{plugin_dir}", VarMode::kPrepend},
    {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
    {"NCCL_FASTRAK_IFNAME", "{gpu_nics}"},
    {"NCCL_FASTRAK_CTRL_DEV", "{host_nic}"},
    {"NCCL_SOCKET_IFNAME", "{host_nic}"},
    {"NCCL_CROSS_NIC", "0", VarMode::kSet, true},
    {"NCCL_PROTO", "Simple,LL128", VarMode::kSet, true},
    {"NCCL_MIN_NCHANNELS", "4", VarMode::kSet, true},
    {"NCCL_NVLSTREE_MAX_CHUNKSIZE", "131072"},
    {"NCCL_P2P_NET_CHUNKSIZE", "524288"},
    {"NCCL_P2P_PCI_CHUNKSIZE", "524288"},
    {"NCCL_P2P_NVL_CHUNKSIZE", "1048576"},
    {"NCCL_BUFFSIZE", "8388608"},
    {"NCCL_FASTRAK_NUM_FLOWS", "2"},
    {"NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL", "0"},
    {"NCCL_FASTRAK_USE_SNAP", "1"},
    {"NCCL_FASTRAK_USE_LLCM", "1"},
    {"NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING", "0"},
    {"NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS", "600000"},
    {"NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "/dev/aperture_devices"},
    {"NCCL_NET_GDR_LEVEL", "PIX"},
    {"NCCL_TUNER_PLUGIN", "libnccl-tuner.so"},
    {"NCCL_TUNER_CONFIG_PATH", "{plugin_dir}/a3plus_tuner_config.textproto"},
    {"NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE", "{plugin_dir}/a3plus_guest_config.textproto"},
};

constexpr ProfileVar kA3HighVars[] = {
    {"LD_LIBRARY_PATH", "{plugin_dir}", VarMode::kPrepend},
    {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
    {"NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "{gpu_nics}"},
    {"NCCL_GPUDIRECTTCPX_CTRL_DEV", "{host_nic}"},
    {"NCCL_SOCKET_IFNAME", "{host_nic}"},
    {"NCCL_GPUDIRECTTCPX_TX_BINDINGS", "{tx_bindings}"},
    {"NCCL_GPUDIRECTTCPX_RX_BINDINGS", "{rx_bindings}"},
    {"NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX", "/run/tcpx"},
    {"NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS", "50000"},
    {"NCCL_GPUDIRECTTCPX_FORCE_ACK", "0"},
    {"NCCL_CROSS_NIC", "0"},
    {"NCCL_ALGO", "Ring"},
    {"NCCL_PROTO", "Simple"},
    {"NCCL_NSOCKS_PERTHREAD", "4"},
    {"NCCL_SOCKET_NTHREADS", "1"},
    {"NCCL_MIN_NCHANNELS", "8"},
    {"NCCL_MAX_NCHANNELS", "8"},
    {"NCCL_DYNAMIC_CHUNK_SIZE", "524288"},
    {"NCCL_P2P_NET_CHUNKSIZE", "524288"},
    {"NCCL_P2P_PCI_CHUNKSIZE", "524288"},
    {"NCCL_P2P_NVL_CHUNKSIZE", "1048576"},
    {"NCCL_BUFFSIZE", "4194304"},
    {"NCCL_NET_GDR_LEVEL", "PIX"},
    {"NCCL_P2P_PXN_LEVEL", "0"},
};

constexpr ProfileVar kGenericVars[] = {
    {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
    {"NCCL_IB_HCA", "={task_hcas}"},  // "=": exact device names (NCCL reads a bare name as a prefix)
    {"NCCL_SOCKET_IFNAME", "{task_nics}"},
};

constexpr std::string_view kTcpxoDirs[] = {"/var/lib/tcpxo/lib64", "/usr/local/tcpxo/lib64"};
constexpr std::string_view kTcpxDirs[] = {"/var/lib/tcpx/lib64", "/usr/local/tcpx/lib64"};

constexpr std::array kProfiles = {
    Profile{ProfileId::kAuto, "auto", "pick a3mega, a3high or generic from the node's NICs and installed plugins",
            {}, "", false, {}},
    Profile{ProfileId::kA3Mega, "a3mega", "A3 Mega: GPUDirect-TCPXO (FasTrak), one NIC per GPU", kTcpxoDirs,
            "libnccl-net.so", false, kA3MegaVars},
    Profile{ProfileId::kA3High, "a3high", "A3 High: GPUDirect-TCPX, one NIC per two GPUs", kTcpxDirs,
            "libnccl-net.so", true, kA3HighVars},
    Profile{ProfileId::kGeneric, "generic", "InfiniBand/RoCE/Ethernet: the NICs closest to the task's GPUs", {},
            "", false, kGenericVars},
    Profile{ProfileId::kNone, "none", "change nothing", {}, "", false, {}},
};

}  // namespace

std::span<const Profile> AllProfiles() { return kProfiles; }

const Profile& GetProfile(ProfileId id) {
  for (const Profile& profile : kProfiles) {
    if (profile.id == id) return profile;
  }
  return kProfiles.back();
}

common::StatusOr<ProfileId> ParseProfile(std::string_view name) {
  for (const Profile& profile : kProfiles) {
    if (profile.name == name) return profile.id;
  }
  return common::InvalidArgument("unknown network profile '{}' (expected auto, a3mega, a3high, generic or none)",
                                 name);
}

std::string_view ProfileName(ProfileId id) { return GetProfile(id).name; }

}  // namespace srunway::topology
