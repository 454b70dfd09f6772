#!/usr/bin/env bash
# Starts, stops and describes the real two-node Slurm cluster on this machine that blueprints/local/local.yaml
# describes: a thin wrapper over `srunway-blueprint up|down` (which renders the configuration and runs
# blueprints/local/daemons.sh) for the paths and ports of this checkout.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: scripts/local-cluster.sh up|down|status|env

  up      render blueprints/local/local.yaml and start munged, slurmctld and two slurmd (node1, node2); idempotent
  down    cancel the cluster's jobs and stop the daemons, by their pid files
  status  show which daemons run, sinfo, and where the logs are
  env     print the exports a shell needs to use the cluster: eval "$(scripts/local-cluster.sh env)"

environment:
  SRUNWAY_CLUSTER_DIR        state directory (default /var/tmp/srunway-cluster)
  SRUNWAY_CLUSTER_PORT_BASE  slurmctld port; the two slurmd use the next two (default 16817)
  SRUNWAY_PLUGSTACK          a line for plugstack.conf instead of srunway's plugin (empty: no plugin)
  SRUNWAY_BLUEPRINT_FILE     the blueprint (default blueprints/local/local.yaml)
  SRUNWAY_BUILD_DIR          where srunway-blueprint was built (default build/)
USAGE
}

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBlueprint=${SRUNWAY_BLUEPRINT_FILE:-$kRepo/blueprints/local/local.yaml}
readonly kBuild=${SRUNWAY_BUILD_DIR:-$kRepo/build}
readonly kTool=$kBuild/blueprints/srunway-blueprint
export SRUNWAY_CLUSTER_DIR=${SRUNWAY_CLUSTER_DIR:-/var/tmp/srunway-cluster}
export SRUNWAY_CLUSTER_PORT_BASE=${SRUNWAY_CLUSTER_PORT_BASE:-16817}

blueprint() {  # blueprint up|down: the tool, with this machine's values for the blueprint's variables
  [[ -x $kTool ]] || { echo "local-cluster: $kTool not found; run scripts/build.sh first" >&2; exit 1; }
  "$kTool" "$1" "$kBlueprint" --set "state_dir=$SRUNWAY_CLUSTER_DIR" --set "port_base=$SRUNWAY_CLUSTER_PORT_BASE" \
    --set "host=$(hostname)" --set "plugstack=${SRUNWAY_PLUGSTACK:-}"
}

# srunway's SPANK plugin from the build tree in every job step, added as a site adds it: a drop-in
# (etc/plugstack.conf.d/srunway.conf, included from plugstack.conf) with default_profile=auto, which on this
# machine (no GPU that hwloc sees) chooses none and says so in SRUNWAY_NETWORK_PROFILE. SRUNWAY_PLUGSTACK replaces it.
add_plugin() {
  [[ -z ${SRUNWAY_PLUGSTACK+set} ]] || return 0
  local plugin=$kBuild/spank/srunway.so helper=$kBuild/topology/srunway-topo-helper
  if [[ ! -f $plugin || ! -x $helper ]]; then
    echo "local-cluster: no SPANK plugin in $kBuild (Slurm headers missing?): job steps run without it"
    return 0
  fi
  "$kRepo/scripts/plugstack-dropin.sh" add "$plugin" "default_profile=auto topo_helper=$helper" \
    --plugstack "$SRUNWAY_CLUSTER_DIR/etc/plugstack.conf" \
    --comment "srunway's SPANK plugin from the build tree $kBuild (scripts/local-cluster.sh up)" >/dev/null
  echo "local-cluster: SPANK plugin on: $plugin (default_profile=auto)"
}

case ${1:-} in
  up) blueprint up && add_plugin ;;
  down) blueprint down ;;
  status | env) exec "$kRepo/blueprints/local/daemons.sh" "$1" ;;
  -h | --help | help) usage ;;
  "") usage >&2; exit 2 ;;
  *) echo "local-cluster: unknown command '$1' (expected up, down, status or env; see --help)" >&2; exit 2 ;;
esac
