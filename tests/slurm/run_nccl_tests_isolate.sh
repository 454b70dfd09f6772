#!/usr/bin/env bash
# Bad-node isolation on the local cluster: with SRUNWAY_FAULT_SLOW_NODE=node2 (collbench throttles node2's
# transfers) a 2-node run fails, --isolate names node2 and only node2, and --drain drains it (checked with
# sinfo); the test resumes it afterwards as the README tells admins to.
source "$(dirname "$0")/lib.sh"
require_cluster
tool=${RUN_NCCL_TESTS:?}
workdir=$(mktemp -d)
at_exit "rm -rf '$workdir'"
at_exit "scontrol update nodename=node2 state=resume >/dev/null 2>&1"
args=(--nodes 2 --test all_reduce --gpus-per-node 2 --min-bytes 4M --max-bytes 4M --iters 3 --warmup 1
      --job-dir "$workdir")

# The healthy figure first, in this run: the threshold is a third of it.
# (--json: full precision; the table prints two decimals).
"$tool" "${args[@]}" --json >"$workdir/healthy.out" 2>"$workdir/healthy.err" ||
  fail "healthy run: $(cat "$workdir/healthy.out" "$workdir/healthy.err")"
healthy=$(python3 -c "
import json, sys
text = open(sys.argv[1]).read()
print(json.loads(text[text.index('{'):])['verdict']['busbw_at_largest_gbps'])" "$workdir/healthy.out")
[[ -n $healthy ]] || fail "no busbw in $(cat "$workdir/healthy.out")"
threshold=$(awk -v h="$healthy" 'BEGIN {printf "%.4f", h / 3}')
echo "healthy busbw $healthy GB/s; threshold $threshold GB/s"

rc=0
SRUNWAY_FAULT_SLOW_NODE=node2 "$tool" "${args[@]}" --expect-busbw "$threshold" --isolate >"$workdir/isolate.out" 2>&1 || rc=$?
cat "$workdir/isolate.out"
expect_eq "exit code with a slow node" "$rc" 1
grep -q "run-nccl-tests: bad node node2:" "$workdir/isolate.out" || fail "node2 not named"
grep -q "run-nccl-tests: bad node node1" "$workdir/isolate.out" && fail "node1 named although healthy"
grep -q "to drain it: scontrol update nodename=node2 state=drain" "$workdir/isolate.out" || fail "no drain command shown"
[[ $(sinfo -h -n node2 -o %T) == idle ]] || fail "node2 changed without --drain: $(sinfo -h -n node2 -o %T)"

rc=0
SRUNWAY_FAULT_SLOW_NODE=node2 "$tool" "${args[@]}" --expect-busbw "$threshold" --isolate --drain >"$workdir/drain.out" 2>&1 || rc=$?
expect_eq "exit code with --drain" "$rc" 1
grep -q "run-nccl-tests: drained node2" "$workdir/drain.out" || fail "$(cat "$workdir/drain.out")"
state=$(sinfo -h -n node2 -o %T)
[[ $state == drained || $state == draining ]] || fail "node2 is $state after --drain"
reason=$(sinfo -h -n node2 -o %E)
[[ $reason == run-nccl-tests* ]] || fail "drain reason: $reason"
echo "ok: node2 isolated and drained ($state: $reason)"
scontrol update nodename=node2 state=resume
for _ in $(seq 1 50); do [[ $(sinfo -h -n node2 -o %T) == idle ]] && break; sleep 0.2; done
[[ $(sinfo -h -n node2 -o %T) == idle ]] || fail "node2 did not resume: $(sinfo -h -n node2 -o %T)"
