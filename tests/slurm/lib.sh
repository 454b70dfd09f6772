# Shared by the slurm suite: finds the local cluster, or skips (exit 77), or fails when the cluster is required.
set -euo pipefail

readonly kSourceRoot=${SRUNWAY_SOURCE_ROOT:?SRUNWAY_SOURCE_ROOT must point at the source tree}

fail() { echo "FAIL: $*" >&2; exit 1; }

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
