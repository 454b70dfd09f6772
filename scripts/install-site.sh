#!/usr/bin/env bash
# Installs srunway on a cluster node the way a site installs a SPANK plugin: built against the headers of the
# Slurm that runs there (never the distribution's Slurm), installed under a prefix, and added to the plugin stack
# that Slurm reads through a drop-in (PLUGSTACK_DIR/plugstack.conf.d/srunway.conf, included from plugstack.conf),
# as pyxis recommends. Running it again changes nothing; --uninstall takes it all away.
#
# Usage: scripts/install-site.sh [OPTIONS]
#   --prefix DIR          where the programs and the plugin go (default /usr/local)
#   --slurm-include DIR   the running Slurm's headers (DIR/slurm/spank.h); default: the include directory beside
#                         slurmd's prefix, then pkg-config's slurm, then /usr/include
#   --plugstack FILE      the plugstack.conf Slurm reads (default: PlugStackConfig of `scontrol show config`, else
#                         plugstack.conf beside $SLURM_CONF or /etc/slurm/slurm.conf)
#   --plugin-args ARGS    the plugin's arguments in the drop-in (default "default_profile=auto")
#   --plugin-only         build and install only the SPANK plugin and its topology helper
#   --cuda MODE           srunway-train's CUDA kernels: auto (default: where nvcc is on PATH, in $CUDA_HOME/bin or
#                         /usr/local/cuda/bin), enabled (for GPU nodes: no nvcc, or no cuda.h and nccl.h beside
#                         it or in /usr/include, is an error), disabled
#   --build-dir DIR       the meson build directory (default: build-site in the source tree)
#   --no-deps             do not install build packages (they must be there)
#   --uninstall           remove what an earlier run installed under --prefix, and its drop-in
# Needs meson 1.0 or newer (Ubuntu 22.04's is 0.61: python3 -m pip install 'meson>=1.0' ninja) and the running
# Slurm's development headers. Job steps read plugstack.conf when they start: no daemon needs a restart.
set -euo pipefail

readonly kSource=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local slurm_include="" plugstack="" plugin_args="default_profile=auto" plugin_only=0
build_dir="$kSource/build-site" deps=1 uninstall=0 cuda=auto

die() { echo "install-site: $*" >&2; exit 1; }
usage() { echo "install-site: $* (see --help)" >&2; exit 2; }  # a malformed command line
say() { echo "install-site: $*"; }
source "$kSource/scripts/site-lib.sh"

while (($#)); do
  case $1 in
    --prefix | --slurm-include | --plugstack | --plugin-args | --build-dir | --cuda)
      (($# >= 2)) || usage "$1 needs a value"
      case $1 in
        --cuda) cuda=$2 ;;
        --prefix) prefix=$2 ;;
        --slurm-include) slurm_include=$2 ;;
        --plugstack) plugstack=$2 ;;
        --plugin-args) plugin_args=$2 ;;
        --build-dir) build_dir=$2 ;;
      esac
      shift 2 ;;
    --plugin-only) plugin_only=1; shift ;;
    --no-deps) deps=0; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage "unknown option '$1'" ;;
  esac
done
[[ $prefix == /* ]] || usage "--prefix $prefix: must be an absolute path"
[[ $cuda == auto || $cuda == enabled || $cuda == disabled ]] || usage "--cuda $cuda: give auto, enabled or disabled"
readonly kManifest="$prefix/share/srunway/installed-files.txt" kDropin="$kSource/scripts/plugstack-dropin.sh"
dropin_args=()
[[ -n $plugstack ]] && dropin_args=(--plugstack "$plugstack")

if ((uninstall)); then
  if [[ -f $kManifest ]]; then
    while IFS= read -r file; do rm -f -- "$file"; done <"$kManifest"
    rm -f "$kManifest"
    for dir in "$prefix/share/srunway" "$prefix/libexec/srunway"; do rmdir "$dir" 2>/dev/null || true; done
    say "removed srunway's files from $prefix"
  else
    say "no srunway install under $prefix ($kManifest)"
  fi
  "$kDropin" remove "${dropin_args[@]}"
  exit 0
fi

# Slurm loads only plugins built for its own major.minor release.
running=$(running_slurm_release)
[[ -n $running ]] || die "no slurmd or scontrol answers -V here: install srunway where the cluster's Slurm runs"
slurm_include=$(slurm_headers_for "$slurm_include")
headers=$(slurm_release_of "$slurm_include")
[[ $(major_minor "$headers") == $(major_minor "$running") ]] ||
  die "the Slurm headers in $slurm_include are for $headers but the running Slurm is $running: Slurm refuses a plugin built for another release; pass --slurm-include with the headers of $running"

use_cuda_toolkit "$cuda"
((deps)) && "$kSource/scripts/install-deps.sh" --build
require_meson

say "building against Slurm $headers's headers in $slurm_include (running: $running), prefix $prefix"
log=$(mktemp "${TMPDIR:-/tmp}/srunway-install-site.XXXXXX.log")
build_srunway "$kSource" "$build_dir" "$plugin_only" "$log" --prefix "$prefix" --buildtype=release \
  -Dslurm=enabled "-Dslurm_include_dir=$slurm_include" -Dsanitized_tests=disabled -Dthread_sanitized_tests=disabled \
  "-Dcuda=$cuda" \
  ${cuda_home:+"-Dgpu_include_dir=$cuda_home/include"}
# A mistyped plugin argument would fail every job step once the drop-in names it: checked as the plugin checks
# them, before anything is installed.
if ! checked=$("$build_dir/topology/srunway-topo" --plugin-args "$plugin_args" --json 2>&1 >/dev/null) &&
    [[ $checked == *"error: --plugin-args: "* ]]; then
  usage "--plugin-args '$plugin_args': ${checked#*error: --plugin-args: }"
fi
installed=$(DESTDIR="" install_srunway "$build_dir" "$plugin_only" "$log")
plugin=$(grep '/srunway\.so$' <<<"$installed" || true)
[[ -n $plugin ]] || die "meson installed no srunway.so (log: $log)"
mkdir -p "$(dirname "$kManifest")"
printf '%s\n' "$installed" >"$kManifest"
say "installed $(wc -l <<<"$installed") files under $prefix; plugin $plugin"
train=$(grep '/srunway-train$' <<<"$installed" || true)
[[ -z $train ]] || say "$train $(sed -n 2p <<<"$("$train" --version)")"
"$kDropin" add "$plugin" "$plugin_args" "${dropin_args[@]}" \
  --comment "srunway's SPANK plugin for Slurm $headers, under $prefix (scripts/install-site.sh --uninstall --prefix $prefix removes it)"
rm -f "$log"
