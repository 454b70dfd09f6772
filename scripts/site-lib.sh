# Sourced by scripts/install-site.sh and scripts/package-deb.sh: the Slurm release a build is for, and a build of
# srunway against a given Slurm's headers. Each function prints one line and exits on failure, through die().

# slurm_headers_for [DIR]: the Slurm include directory (DIR/slurm/spank.h): DIR itself, else the include
# directory beside the running slurmd's (or scontrol's) prefix, else pkg-config's slurm, else /usr/include.
slurm_headers_for() {
  local given=${1:-} tool prefix candidate
  if [[ -n $given ]]; then
    [[ -f $given/slurm/spank.h ]] || die "--slurm-include $given: no slurm/spank.h there"
    echo "$given"
    return
  fi
  tool=$(command -v slurmd || command -v scontrol || true)
  prefix=$([[ -n $tool ]] && dirname "$(dirname "$(readlink -f "$tool")")" || echo /usr)
  for candidate in "$prefix/include" "$(pkg-config --variable=includedir slurm 2>/dev/null || true)" /usr/include; do
    [[ -n $candidate && -f $candidate/slurm/spank.h ]] && { echo "$candidate"; return; }
  done
  die "no Slurm headers (slurm/spank.h) in $prefix/include, pkg-config's slurm or /usr/include: install the cluster's Slurm headers, or pass --slurm-include DIR"
}

# slurm_release_of DIR: "22.05.8" from DIR/slurm/slurm_version.h's SLURM_VERSION_NUMBER.
slurm_release_of() {
  local header="$1/slurm/slurm_version.h" number
  [[ -f $header ]] || die "$header: no such file (is $1 Slurm's include directory?)"
  number=$(awk '$1 == "#define" && $2 == "SLURM_VERSION_NUMBER" {print $3}' "$header")
  [[ $number =~ ^0x[0-9a-fA-F]+$ ]] || die "$header: no SLURM_VERSION_NUMBER"
  printf '%d.%02d.%d\n' $(((number >> 16) & 255)) $(((number >> 8) & 255)) $((number & 255))
}

# running_slurm_release: "22.05.8" from `slurmd -V` (or scontrol's); empty where no Slurm is installed.
running_slurm_release() {
  local tool
  tool=$(command -v slurmd || command -v scontrol || true)
  [[ -n $tool ]] && "$tool" -V 2>/dev/null | awk '{print $2}'
  return 0
}

# major_minor RELEASE: "22.05" of "22.05.8".
major_minor() { local a b; IFS=. read -r a b _ <<<"$1"; printf '%d.%02d\n' "$((10#$a))" "$((10#$b))"; }

# use_cuda_toolkit MODE (auto|enabled|disabled, as -Dcuda): puts the CUDA toolkit's bin directory on PATH when
# nvcc is not on it (CUDA images keep it off PATH, and meson looks for nvcc only there): $CUDA_HOME's where set,
# else /usr/local/cuda's; sets cuda_home to the toolkit of the nvcc found (empty where none). With enabled, no nvcc
# is an error (a GPU node's srunway-train would train on CPUs only), and so are no cuda.h and nccl.h (its GPUs
# exchange gradients through the launcher's NCCL backend, built from those headers).
use_cuda_toolkit() {
  local mode=$1 home=${CUDA_HOME:-/usr/local/cuda}
  cuda_home=""
  case $mode in
    auto | enabled | disabled) ;;
    *) die "--cuda $mode: give auto, enabled or disabled" ;;
  esac
  [[ $mode == disabled ]] && return 0
  if ! command -v nvcc >/dev/null && [[ -x $home/bin/nvcc ]]; then
    PATH=$home/bin:$PATH
    export PATH
  fi
  if command -v nvcc >/dev/null; then
    cuda_home=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  elif [[ $mode == enabled ]]; then
    die "--cuda enabled: no nvcc on PATH or in $home/bin: install the CUDA toolkit (12.0 or newer), or set CUDA_HOME to it"
  fi
  [[ $mode == enabled ]] || return 0
  [[ -f $cuda_home/include/cuda.h ]] || die "--cuda enabled: no cuda.h in $cuda_home/include (the toolkit of $(command -v nvcc))"
  [[ -f $cuda_home/include/nccl.h || -f /usr/include/nccl.h ]] ||
    die "--cuda enabled: no nccl.h in $cuda_home/include or /usr/include: srunway-train's GPUs exchange gradients through NCCL; install NCCL's headers (libnccl-dev from NVIDIA's CUDA repository)"
  return 0
}

# require_meson: meson 1.0 or newer on PATH.
require_meson() {
  local version
  version=$(meson --version 2>/dev/null || true)
  [[ -n $version ]] || die "no meson on PATH: srunway needs meson 1.0 or newer (python3 -m pip install 'meson>=1.0' ninja)"
  [[ $(printf '%s\n1.0.0\n' "$version" | sort -V | head -n 1) == 1.0.0 ]] ||
    die "meson $version is older than 1.0, which srunway needs: python3 -m pip install 'meson>=1.0' ninja (Ubuntu 22.04 ships 0.61)"
}

# build_srunway SOURCE BUILD_DIR PLUGIN_ONLY LOG MESON_OPTIONS...: configures (or reconfigures) BUILD_DIR and
# builds everything, or with PLUGIN_ONLY=1 the SPANK plugin, its topology helper and srunway-topo only.
build_srunway() {
  local source=$1 build=$2 plugin_only=$3 log=$4
  shift 4
  if [[ -f $build/build.ninja ]]; then
    meson configure "$build" "$@" >"$log" 2>&1 || { tail -n 20 "$log" >&2; die "meson configure failed (log: $log)"; }
  else
    meson setup "$build" "$source" "$@" >"$log" 2>&1 || { tail -n 20 "$log" >&2; die "meson setup failed (log: $log)"; }
  fi
  local targets=()
  # srunway-topo too: it checks --plugin-args as the plugin will.
  ((plugin_only)) && targets=(spank/srunway.so topology/srunway-topo-helper topology/srunway-topo)
  ninja -C "$build" "${targets[@]}" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "the build failed (log: $log)"; }
  [[ -f $build/spank/srunway.so ]] || die "the build made no SPANK plugin: are the Slurm headers usable? (log: $log)"
}

# install_srunway BUILD_DIR PLUGIN_ONLY LOG: meson install (honours DESTDIR); prints the installed paths (under
# DESTDIR when set), one per line.
install_srunway() {
  local build=$1 plugin_only=$2 log=$3 tags=()
  ((plugin_only)) && tags=(--tags plugin)
  meson install -C "$build" --no-rebuild "${tags[@]}" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "meson install failed (log: $log)"; }
  meson introspect "$build" --installed | python3 -c '
import json, os, sys
plugin_only, destdir = sys.argv[1] == "1", os.environ.get("DESTDIR", "")
for path in sorted(json.load(sys.stdin).values()):
    path = destdir + path if destdir else path
    if os.path.exists(path) and (not plugin_only or os.path.basename(path) in ("srunway.so", "srunway-topo-helper",
                                                                             "srunway-topo")):
        print(path)' "$plugin_only"
}
