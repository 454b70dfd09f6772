# Shared by the slurm suite: finds the local cluster, or skips (exit 77), or fails when the cluster is required.
set -euo pipefail

readonly kSourceRoot=${SRUNWAY_SOURCE_ROOT:?SRUNWAY_SOURCE_ROOT must point at the source tree}

fail() { echo "FAIL: $*" >&2; exit 1; }

# at_exit COMMAND: runs COMMAND when the test exits, after those registered later (one EXIT trap for all).
kAtExit=()
run_at_exit() {
  local i
  for ((i = ${#kAtExit[@]} - 1; i >= 0; i--)); do eval "${kAtExit[$i]}" || true; done
}
trap run_at_exit EXIT
at_exit() { kAtExit+=("$1"); }

require_cluster() {
  eval "$("$kSourceRoot/scripts/local-cluster.sh" env)"
  if ! "$kSourceRoot/scripts/local-cluster.sh" status >/dev/null 2>&1; then
    if [[ ${SRUNWAY_REQUIRE_CLUSTER:-0} == 1 ]]; then
      "$kSourceRoot/scripts/local-cluster.sh" status >&2 || true
      fail "the local cluster is not running (scripts/local-cluster.sh up)"
    fi
    echo "SKIP: the local cluster is not running; start it with scripts/local-cluster.sh up"
    exit 77
  fi
}

# count_matching PATTERN TEXT: how many lines of TEXT match the extended regex PATTERN.
count_matching() { grep -cE "$1" <<<"$2" || true; }

expect_eq() {
  local what=$1 got=$2 want=$3
  [[ $got == "$want" ]] || fail "$what: got '$got', want '$want'"
}

# use_plugstack LINE...: replaces the cluster's plugstack.conf (read anew by every srun and job step) for the
# rest of the test and restores the original on exit.
use_plugstack() {
  local conf
  conf=$(sed -n 's/^PlugStackConfig=//p' "$SLURM_CONF")
  [[ -n $conf ]] || fail "no PlugStackConfig in $SLURM_CONF"
  if [[ -z ${kPlugstackSaved:-} ]]; then
    kPlugstackSaved=$(mktemp)
    cp "$conf" "$kPlugstackSaved"
    at_exit "cp '$kPlugstackSaved' '$conf'; rm -f '$kPlugstackSaved'"
  fi
  printf '%s\n' "$@" >"$conf"
}
