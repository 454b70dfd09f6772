#!/usr/bin/env bash
# Bad-node isolation on the local cluster, one fault at a time on node2 (collbench's fault hooks): slow transfers,
# ranks that hang in the collective, a rank that crashes, wrong values, a node that cannot set up its
# communicator. Each time the run fails, --isolate names node2 and only node2 with its evidence (exit 1), and
# nothing changes without --drain. A GPU run on nodes without NCCL names every node's reason and, since every
# node fails alike, drains nobody (exit 2). --drain drains node2 alone and --requeue-job requeues a job running
# on node1 with node2 excluded (node2 is tested on its own there, since runs take whole nodes); the test resumes
# node2 afterwards as the README tells admins to.
source "$(dirname "$0")/lib.sh"
require_cluster
tool=${RUN_NCCL_TESTS:?}
workdir=$(mktemp -d)
at_exit "rm -rf '$workdir'"
at_exit "scontrol update nodename=node2 state=resume >/dev/null 2>&1"
base=(--nodes 2 --test all_reduce --min-bytes 4M --max-bytes 4M --iters 3 --warmup 1 --job-dir "$workdir")
args=("${base[@]}" --gpus-per-node 0 --tasks-per-node 2)

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
grep -q "# Communicator: mpi (host memory)" "$workdir"/run-nccl-tests-*.out || fail "the log does not name its communicator"

states() { sinfo -h -N -o '%N=%T' | sort | tr '\n' ' '; }
readonly kIdle="node1=idle node2=idle "

# isolated NAME FAULT KIND [OPTIONS...]: with SRUNWAY_FAULT_<FAULT>_NODE=node2 the run fails, --isolate names
# node2 alone with "KIND:" evidence, exit 1, and no node changes state.
isolated() {
  local name=$1 fault=$2 kind=$3 rc=0
  shift 3
  env "SRUNWAY_FAULT_${fault}_NODE=node2" "$tool" "${args[@]}" --isolate "$@" >"$workdir/$name.out" 2>&1 || rc=$?
  grep -vE " is (PENDING|RUNNING|COMPLETING)$" "$workdir/$name.out"
  expect_eq "$name: exit code" "$rc" 1
  grep -q "^run-nccl-tests: bad node node2: $kind: " "$workdir/$name.out" || fail "$name: node2 not named as $kind"
  ! grep -q "^run-nccl-tests: bad node node1" "$workdir/$name.out" || fail "$name: node1 named although healthy"
  grep -q "to drain it: scontrol update nodename=node2 state=drain" "$workdir/$name.out" || fail "$name: no drain command"
  expect_eq "$name: node states without --drain" "$(states)" "$kIdle"
}

echo "== a slow node"
isolated slow SLOW slow --expect-busbw "$threshold"
# Alone, node2 is judged against node1 measured alone, not against the two-node threshold.
grep -q "below 90% of node1's .* GB/s measured alone the same way (node2 alone)" "$workdir/slow.out" ||
  fail "slow: the evidence does not compare with node1 alone"

echo "== a node whose ranks hang in the collective"
isolated hang HANG hung --run-timeout 8
grep -q "job [0-9]* (the whole run) has not ended 8s after it started: cancelled as hung" "$workdir/hang.out" ||
  fail "hang: the whole run was not cancelled at its run timeout"
grep -q "^run-nccl-tests: the run: hung: no end within 8s of its start" "$workdir/hang.out" || fail "hang: no finding line"
rc=0
SRUNWAY_FAULT_HANG_NODE=node2 "$tool" "${args[@]}" --run-timeout 8 >"$workdir/hang-alone.out" 2>&1 || rc=$?
expect_eq "hang without --isolate: exit code" "$rc" 2

echo "== a node whose rank crashes"
isolated crash CRASH crashed
grep -q "^run-nccl-tests: bad node node2: crashed: tasks 0-1 on node2: Segmentation fault" "$workdir/crash.out" ||
  fail "crash: the evidence does not name the ranks and the signal"

echo "== a node that gives wrong values"
isolated wrong CORRUPT "wrong values"

echo "== a node that cannot set up its communicator"
isolated no-comm NO_COMM "no communicator"
grep -q "node2 could not set up its communicator: cannot load NCCL" "$workdir/no-comm.out" || fail "no-comm: no reason"

echo "== GPUs without NCCL anywhere: every node's reason, nobody drained"
rc=0
"$tool" "${base[@]}" --gpus-per-node 1 --isolate --drain >"$workdir/no-nccl.out" 2>&1 || rc=$?
grep -vE " is (PENDING|RUNNING|COMPLETING)$" "$workdir/no-nccl.out"
expect_eq "no NCCL: exit code" "$rc" 2
grep -q "srunway-collbench all_reduce --comm nccl" "$workdir"/run-nccl-tests.sbatch || fail "the GPU run did not ask for NCCL"
grep -q "^run-nccl-tests: the run: no communicator: node1, node2 could not set up their communicator: .*NCCL" \
  "$workdir/no-nccl.out" || fail "no NCCL: the nodes and the reason are not named"
grep -q "every suspect failed alone in the same way (no communicator): a site-wide problem" "$workdir/no-nccl.out" ||
  fail "no NCCL: not called site-wide"
! grep -q "^run-nccl-tests: bad node" "$workdir/no-nccl.out" || fail "no NCCL: a node was named"
expect_eq "no NCCL: node states" "$(states)" "$kIdle"

echo "== --drain drains node2 alone; --requeue-job puts a running job back without it"
# run-nccl-tests takes whole nodes, so the job to requeue runs on node1 while node2 is tested on its own.
train=$(sbatch --parsable -N1 -w node1 --requeue --output="$workdir/train-%j.out" --wrap 'sleep 300')
at_exit "scancel $train 2>/dev/null"
for _ in $(seq 1 100); do [[ $(squeue -h -j "$train" -o %T) == RUNNING ]] && break; sleep 0.2; done
expect_eq "the job to requeue runs on" "$(squeue -h -j "$train" -o %T:%N)" "RUNNING:node1"
rc=0
one=(--nodes 1 --nodelist node2 "${args[@]:2}")
SRUNWAY_FAULT_CRASH_NODE=node2 "$tool" "${one[@]}" --isolate --drain --requeue-job "$train" \
  >"$workdir/drain.out" 2>&1 || rc=$?
grep -vE " is (PENDING|RUNNING|COMPLETING)$" "$workdir/drain.out"
expect_eq "exit code with --drain" "$rc" 1
grep -q "run-nccl-tests: drained node2" "$workdir/drain.out" || fail "node2 not drained"
grep -q "^run-nccl-tests: requeued job $train without node2$" "$workdir/drain.out" || fail "job $train not requeued"
state=$(sinfo -h -n node2 -o %T)
[[ $state == drained || $state == draining ]] || fail "node2 is $state after --drain"
reason=$(sinfo -h -n node2 -o %E)
[[ $reason == "run-nccl-tests all_reduce job "*": crashed: "* ]] || fail "drain reason: $reason"
[[ $(sinfo -h -n node1 -o %T) != drain* ]] || fail "node1 was drained too"
shown=$(scontrol show job "$train" -o)
grep -q "ExcNodeList=node2 " <<<"$shown" && grep -q "Restarts=1 " <<<"$shown" || fail "the job was not requeued without node2: $shown"
# Slurm holds a requeued job a while; the test starts it sooner, but not within the second node1's slurmd revoked
# the old instance's credential: a credential made in that same second counts as revoked and the batch job is
# killed ("Killing non-startable batch JobId=...: Job credential revoked", seen once in CI).
sleep 2
scontrol update JobId="$train" StartTime=now 2>/dev/null || true
for _ in $(seq 1 150); do [[ $(squeue -h -j "$train" -o %T) == RUNNING ]] && break; sleep 0.2; done
expect_eq "the requeued job runs on" "$(squeue -h -j "$train" -o %T:%N)" "RUNNING:node1"
echo "ok: node2 isolated for each fault, drained alone ($state: $reason), job $train requeued onto node1"
scancel "$train"
scontrol update nodename=node2 state=resume
for _ in $(seq 1 50); do [[ $(sinfo -h -n node2 -o %T) == idle ]] && break; sleep 0.2; done
[[ $(sinfo -h -n node2 -o %T) == idle ]] || fail "node2 did not resume: $(sinfo -h -n node2 -o %T)"
