#!/usr/bin/env bash
# srunway-topo as an admin runs it on a saved topology: a task's GPU, NIC, CPU binding and NCCL variables (text and
# JSON), and bad input (a local rank past the node's tasks, a CUDA_VISIBLE_DEVICES it cannot place, an unknown
# profile, a file hwloc cannot read or that crashes it) each one line with its exit code (2: the command line,
# 1: the topology).
#   topo_cli.sh SRUNWAY_TOPO FIXTURE_DIR
set -euo pipefail
readonly kTopo=${1:?usage: topo_cli.sh SRUNWAY_TOPO FIXTURE_DIR} kFixtures=${2:?}
readonly kWork=$(mktemp -d)
trap 'rm -rf "$kWork"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect CODE PATTERN ARGS...: exit CODE and, when it is not 0, one line on stderr matching PATTERN.
expect() {
  local want=$1 pattern=$2 rc=0
  shift 2
  "$kTopo" "$@" >"$kWork/out" 2>"$kWork/err" || rc=$?
  [[ $rc == "$want" ]] || fail "srunway-topo $*: exit $rc, want $want: $(cat "$kWork/err")"
  ((want == 0)) && return
  [[ $(wc -l <"$kWork/err") == 1 ]] && grep -qE -- "$pattern" "$kWork/err" ||
    fail "srunway-topo $*: want one line /$pattern/ on stderr: $(cat "$kWork/err")"
}
readonly kMega=$kFixtures/a3mega.xml

# A3 Mega's local rank 3: its GPU, the gVNIC under the same PCIe switch, the cores of its NUMA node's share.
expect 0 "" --xml "$kMega" --local-rank 3 --profile generic --json
python3 - "$kWork/out" <<'PY' || fail "local rank 3's plan: $(cat "$kWork/out")"
import json, sys
plan = json.load(open(sys.argv[1]))
assert plan["task_gpus"] == [3], plan["task_gpus"]
assert plan["task_nics"] == ["enp14s0"], plan["task_nics"]
assert plan["cpus"] == "39-51,143-155", plan["cpus"]
assert plan["env"]["NCCL_SOCKET_IFNAME"] == "enp14s0", plan["env"]
assert len(plan["gpus"]) == 8, len(plan["gpus"])
PY
expect 0 "" --xml "$kMega" --local-rank 3 --profile generic
grep -q '^  export NCCL_SOCKET_IFNAME=enp14s0$' "$kWork/out" && grep -q '^  CPU binding: 39-51,143-155$' "$kWork/out" ||
  fail "local rank 3 as text: $(cat "$kWork/out")"
# Two tasks on the node's GPUs 4-7: local rank 1 takes the second of them.
expect 0 "" --xml "$kMega" --gpus 4,5,6,7 --local-tasks 2 --local-rank 1 --profile generic --json
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); sys.exit(p["task_gpus"] != [5])' "$kWork/out" ||
  fail "GPUs 4-7, local rank 1 of 2: $(cat "$kWork/out")"
# CUDA_VISIBLE_DEVICES='' is a task that sees no GPU: no GPU, NIC or CPU binding of its own (not all eight).
expect 0 "" --xml "$kMega" --gpus '' --profile generic --json
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); sys.exit(p["task_gpus"] != [] or p["task_nics"] != [])' \
  "$kWork/out" || fail "--gpus '': $(cat "$kWork/out")"
echo "ok: plans for A3 Mega's local ranks"

# --plugin-args: the plugstack.conf arguments, checked as the plugin checks them (an admin's typo there fails every
# job step) and decided with: the admin's default profile and plugin path; --profile as a user's --network-profile.
expect 0 "" --xml "$kMega" --plugin-args "default_profile=generic plugin_path=/opt/fastrak" --json
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); sys.exit(p["profile"] != "generic")' "$kWork/out" ||
  fail "--plugin-args default_profile=generic: $(cat "$kWork/out")"
expect 0 "" --xml "$kMega" --plugin-args "default_profile=generic plugin_path=/opt/fastrak" --profile a3mega --json
grep -q '"LD_LIBRARY_PATH": "/opt/fastrak:' "$kWork/out" || fail "plugin_path=/opt/fastrak unused: $(cat "$kWork/out")"
expect 2 "^srunway-topo\[.*\] error: --plugin-args: unknown plugstack argument 'defualt_profile' \(expected" \
  --xml "$kMega" --plugin-args "defualt_profile=a3mega"
expect 2 "--plugin-args: plugstack argument plugin_path='opt/x' must be an absolute path" \
  --xml "$kMega" --plugin-args "plugin_path=opt/x"
expect 2 "--network-profile=a3mega refused: the administrator fixed the profile to generic \(allow_user_profile=no\)" \
  --xml "$kMega" --plugin-args "default_profile=generic allow_user_profile=no" --profile a3mega
echo "ok: --plugin-args are checked as the plugin checks them, and decide the plan as they do there"

expect 2 "^srunway-topo\[.*\] error: --local-rank 9 is not below the node's 8 tasks \(one per GPU; --local-tasks sets another count\)$" \
  --xml "$kMega" --local-rank 9
expect 2 "--local-rank 2 is not below the node's 2 tasks \(--local-tasks\)$" --xml "$kMega" --local-rank 2 --local-tasks 2
expect 2 "--local-tasks: 0 is not above 0" --xml "$kMega" --local-tasks 0
expect 2 "--gpus: CUDA_VISIBLE_DEVICES='GPU-1f2e': 'GPU-1f2e' is not a GPU index" --xml "$kMega" --gpus GPU-1f2e
expect 2 "unknown network profile 'a3ultra' \(expected auto, a3mega, a3high, generic or none\)" \
  --xml "$kMega" --profile a3ultra
expect 2 "^srunway-topo: --xml: File does not exist: $kWork/none.xml \(see --help\)$" --xml "$kWork/none.xml"
expect 1 "README.md: hwloc cannot read it as XML" --xml "$kFixtures/README.md"
expect 1 "corrupt-no-complete-cpuset.xml: hwloc crashed \(signal 11\) reading it; the file is probably corrupt" \
  --xml "$kFixtures/corrupt-no-complete-cpuset.xml"
echo "ok: bad input is one line and its exit code"
