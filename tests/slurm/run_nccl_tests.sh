#!/usr/bin/env bash
# run-nccl-tests as an admin runs it on the local cluster: 2 nodes pass with collbench over MPI, an impossible
# threshold fails (exit 1) and more nodes than the partition has cannot run (exit 2). CPU ranks: the local
# cluster's GPUs are stand-ins, and a GPU run demands NCCL (run_nccl_tests_isolate checks that refusal).
source "$(dirname "$0")/lib.sh"
require_cluster
tool=${RUN_NCCL_TESTS:?}
# A job directory with a space and a '$', as an admin's may have: the script quotes what it writes (sbatch split
# --output at the space, and the job wrote its log elsewhere).
workdir=$(mktemp -d "${TMPDIR:-/tmp}/nccl tests \$HOME.XXXXXX")
at_exit "rm -rf '$workdir'"
small=(--gpus-per-node 0 --tasks-per-node 2 --min-bytes 1K --max-bytes 256K --step-factor 4 --iters 5 --warmup 1 --job-dir "$workdir")

"$tool" --nodes 2 --test all_reduce "${small[@]}" >"$workdir/pass.out" 2>&1 ||
  fail "2 nodes should pass: $(cat "$workdir/pass.out")"
cat "$workdir/pass.out"
grep -q "verdict: PASS" "$workdir/pass.out" || fail "no PASS verdict"
grep -q "run-nccl-tests: job [0-9]* (the whole run) is COMPLETED" "$workdir/pass.out" || fail "no progress lines"
grep -q "ranks 4 on 2 nodes" "$workdir/pass.out" || fail "wrong rank count"

rc=0
# The nodes named, as an admin names those to validate: --nodes follows the list.
"$tool" --nodelist 'node[1-2]' --test all_gather --expect-busbw 1000000 "${small[@]}" >"$workdir/fail.out" 2>&1 ||
  rc=$?
expect_eq "exit code below threshold" "$rc" 1
grep -q "ranks 4 on 2 nodes" "$workdir/fail.out" || fail "--nodelist 'node[1-2]': $(cat "$workdir/fail.out")"
grep -q "is below the threshold 1000000.00 GB/s (log: $workdir/run-nccl-tests-[0-9]*.out)" "$workdir/fail.out" ||
  fail "$(cat "$workdir/fail.out")"

rc=0
"$tool" --nodes 3 "${small[@]}" >"$workdir/nodes.out" 2>&1 || rc=$?
expect_eq "exit code with too many nodes" "$rc" 2
grep -q -- "--nodes 3: partition (default) has 2 nodes" "$workdir/nodes.out" || fail "$(cat "$workdir/nodes.out")"
# A --report directory that cannot be made is refused before a job is submitted (it failed after the job).
rc=0
"$tool" --nodes 2 "${small[@]}" --report /proc/srunway-report >"$workdir/report.out" 2>&1 || rc=$?
expect_eq "exit code with an impossible --report" "$rc" 2
grep -q -- "--report /proc/srunway-report: cannot create the directory" "$workdir/report.out" &&
  ! grep -q "submitted job" "$workdir/report.out" || fail "--report /proc/...: $(cat "$workdir/report.out")"
# Topology order from physical_host answers (a file standing in for each node's metadata server): node2's block
# sorts first, so the job runs with SLURM_HOSTFILE and --distribution=arbitrary and rank 0 lands on node2.
printf 'node1 /CLUSTER-B/RACK-1/HOST-1\nnode2 /CLUSTER-A/RACK-4/HOST-2\n' >"$workdir/answers"
SRUNWAY_METADATA_ANSWERS="$workdir/answers" "$tool" --nodes 2 --test all_reduce --topology-order metadata \
  --compare-order "${small[@]}" >"$workdir/order.out" 2>&1 || fail "ordered run: $(cat "$workdir/order.out")"
grep -qE "^run-nccl-tests: slurm order: [0-9.]+ GB/s at 256K$" "$workdir/order.out" || fail "no slurm-order figure: $(cat "$workdir/order.out")"
grep -qE "^run-nccl-tests: metadata order: [0-9.]+ GB/s at 256K$" "$workdir/order.out" || fail "no metadata-order figure"
log=$(ls -t "$workdir"/run-nccl-tests-*.out | head -n 1)
grep -q "^run-nccl-tests: topology order (metadata): node2 node1$" "$log" || fail "no order line: $(head -n 20 "$log")"
grep -qE "^#  Rank  0 .* on +node2 " "$log" || fail "rank 0 not on node2: $(grep Rank "$log")"
grep -qE "^#  Rank  3 .* on +node1 " "$log" || fail "rank 3 not on node1: $(grep Rank "$log")"
# --dcgm-level: a dcgmi standing in for NVIDIA's (first on PATH, which the job inherits) fails on node2 only.
mkdir -p "$workdir/fakebin"
cat >"$workdir/fakebin/dcgmi" <<'FAKE'
#!/bin/sh
if [ "$SLURMD_NODENAME" = node2 ]; then echo "| PCIe | Fail - GPU 3 link degraded |"; exit 1; fi
echo "| PCIe | Pass |"
FAKE
chmod +x "$workdir/fakebin/dcgmi"
rc=0
PATH="$workdir/fakebin:$PATH" "$tool" --nodes 2 --test all_reduce --dcgm-level 1 "${small[@]}" >"$workdir/dcgm.out" 2>&1 || rc=$?
expect_eq "exit code with a failed DCGM diagnostic" "$rc" 1
grep -q "^run-nccl-tests: bad node node2: dcgmi diag -r 1 failed: | PCIe | Fail - GPU 3 link degraded |$" "$workdir/dcgm.out" ||
  fail "node2 not named: $(cat "$workdir/dcgm.out")"
grep -q 'to drain it: scontrol update nodename=node2 state=drain' "$workdir/dcgm.out" || fail "no drain line"
! grep -q 'bad node node1' "$workdir/dcgm.out" || fail "node1 named"
grep -q "verdict: PASS" "$workdir/dcgm.out" || fail "the benchmark itself should still pass"
# A kill (or Ctrl-C, or a closed terminal: the same handler) while the job runs: the job is cancelled, not left
# holding its exclusive nodes, and the exit code is 128 + the signal. (SIGTERM here: a background job of a script
# ignores SIGINT until the program sets its own handler.)
"$tool" --nodes 2 --test all_reduce --gpus-per-node 0 --tasks-per-node 2 --min-bytes 256K --max-bytes 256K \
  --iters 16777216 --job-dir "$workdir" >"$workdir/stop.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "submitted job" "$workdir/stop.out" && break; sleep 0.2; done
job=$(sed -n 's/^run-nccl-tests: submitted job \([0-9]*\) .*/\1/p' "$workdir/stop.out")
[[ -n $job ]] || { kill "$pid"; fail "no job submitted: $(cat "$workdir/stop.out")"; }
at_exit "scancel $job 2>/dev/null"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
expect_eq "exit code after SIGTERM" "$rc" 143
grep -q "error: stopped by SIGTERM; cancelled $job (log: " "$workdir/stop.out" || fail "no stop line: $(cat "$workdir/stop.out")"
state=""
for _ in $(seq 50); do
  state=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  [[ $state == CANCELLED ]] && break
  sleep 0.2
done
expect_eq "job $job's state after run-nccl-tests was stopped" "$state" CANCELLED
echo "ok: a signal to run-nccl-tests cancels its job"
echo "ok: run-nccl-tests passes 2 nodes, fails an impossible threshold, refuses 3 nodes, orders by placement, names a node DCGM fails"
