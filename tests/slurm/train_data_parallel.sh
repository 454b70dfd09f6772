#!/usr/bin/env bash
# srunway-train data-parallel over the local cluster's two nodes: 2 nodes x 2 ranks give the losses and the parameters
# of 1 rank with the same global batch, with and without dropout; ZeRO-1 gives those of plain data parallelism with a
# quarter of the optimizer state per rank, and its checkpoint resumes on 1 and on 2 ranks; overlap on and off, and any
# OMP_NUM_THREADS, change nothing; the gradients reduced in bf16 stay within its noise; --calculate-per-token-loss
# over 4 ranks is that of 1 rank; the straggler warning names the injected slow rank (200 ms a step; the threshold is
# 4x, well above the jitter of 4 ranks on 2 cores) and nobody else, as --straggler-minmax-count does, and
# --disable-straggler-on-startup silences both; the replicas' weights hash alike, and one rank's flipped bit is named;
# bad input is one line from rank 0 and every rank exits; a rank failing alone mid-run ends them all at once, a hung
# one at the others' MPI deadline; a node's ranks share its memory and their cgroup's limit, and one rank unable to
# build the model ends them all.
source "$(dirname "$0")/lib.sh"
require_cluster
train=${SRUNWAY_TRAIN:?}
workdir=$(mktemp -d)
at_exit "rm -rf '$workdir'"
common=(--preset gpt-tiny --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-steps 10
        --peak-tflops 1 --bucket-size-mb 0.05)

# run NAME NODES TASKS_PER_NODE THREADS [FLAGS...]: srunway-train under srun; metrics in NAME.jsonl, weights in
# NAME.safetensors, output in NAME.log.
run() {
  local name=$1 nodes=$2 tasks=$3 threads=$4
  shift 4
  srun --mpi=pmix -N "$nodes" --ntasks-per-node="$tasks" -c "$threads" env OMP_NUM_THREADS="$threads" \
    "$train" "${common[@]}" --metrics-file "$workdir/$name.jsonl" --export "$workdir/$name.safetensors" "$@" \
    >"$workdir/$name.log" 2>&1 || fail "$name: exit $?: $(cat "$workdir/$name.log")"
}

# compare A B: prints the largest relative loss difference and the largest parameter difference relative to the
# largest parameter, over every step and tensor.
compare() {
  python3 - "$workdir/$1" "$workdir/$2" <<'PY'
import array, json, struct, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p + ".jsonl")]
def weights(p):
    data = open(p + ".safetensors", "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    values = array.array("f"); values.frombytes(data[8 + n:]); return values
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 10, (len(a), len(b))
wa, wb = weights(sys.argv[1]), weights(sys.argv[2])
assert len(wa) == len(wb)
print(max(abs(x - y) / abs(x) for x, y in zip(a, b)), max(abs(x - y) for x, y in zip(wa, wb)) / max(abs(x) for x in wa))
PY
}

run one 1 1 1
run dp 2 2 1
read -r loss_diff param_diff <<<"$(compare one dp)"
python3 -c "import sys; sys.exit(0 if $loss_diff <= 1e-6 and $param_diff <= 1e-5 else 1)" ||
  fail "2x2 ranks against 1: losses differ by $loss_diff (relative), parameters by $param_diff"
grep -q "batch 8 x 32 tokens = 4 ranks x 1 micro-batches of 2" "$workdir/dp.log" || fail "$(cat "$workdir/dp.log")"
expect_eq "step lines (rank 0 alone prints)" "$(grep -c '^step' "$workdir/dp.log")" 10
# Without --peak-tflops, MFU's peak on CPUs is what the 4 ranks measured all at once, averaged: rank 0's own rate,
# measured while its peers were busy or idle, moved MFU by a third from run to run. Without -c (or OMP_NUM_THREADS),
# the 2 ranks of a node, which the local cluster does not pin, share its CPUs: each took all of them, and 4 ranks of
# 2 threads on this 2-core machine made steps 3 to 4x slower.
srun --mpi=pmix -N 2 --ntasks-per-node=2 env -u OMP_NUM_THREADS -u SLURM_CPUS_PER_TASK "$train" --preset gpt-tiny \
  --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-steps 2 >"$workdir/peak.log" 2>&1 ||
  fail "peak: $(cat "$workdir/peak.log")"
grep -qE "MFU against the ranks' mean fp32 sgemm rate [0-9.]+ GFLOP/s" "$workdir/peak.log" ||
  fail "$(cat "$workdir/peak.log")"
grep -qE "^step +2/2 .* \| MFU [0-9.]+%$" "$workdir/peak.log" || fail "peak: $(cat "$workdir/peak.log")"
cpus=$(srun -N1 -n1 nproc)
share=$((cpus / 2 > 1 ? cpus / 2 : 1))
grep -qE "ranks share their node's CPUs \(no --cpus-per-task or CPU binding\): $share threads? each" \
  "$workdir/peak.log" ||
  fail "no share of $cpus CPUs: $(cat "$workdir/peak.log")"
grep -qE " $share threads? per rank;" "$workdir/peak.log" || fail "threads: $(cat "$workdir/peak.log")"
echo "ok: 2 nodes x 2 ranks = 1 rank: losses within $loss_diff relative, parameters within $param_diff"

run one_dropout 1 1 1 --hidden-dropout 0.1 --attention-dropout 0.1
run dp_dropout 2 2 1 --hidden-dropout 0.1 --attention-dropout 0.1
read -r loss_diff param_diff <<<"$(compare one_dropout dp_dropout)"
python3 -c "import sys; sys.exit(0 if $loss_diff <= 1e-6 and $param_diff <= 1e-5 else 1)" ||
  fail "with dropout, 2x2 ranks against 1: losses differ by $loss_diff (relative), parameters by $param_diff"
read -r effect _ <<<"$(compare one one_dropout)"
python3 -c "import sys; sys.exit(0 if $effect > 1e-4 else 1)" || fail "dropout 0.1 changed the losses by only $effect"
echo "ok: with dropout 0.1 (losses $effect away from none), 2 nodes x 2 ranks = 1 rank: losses within $loss_diff" \
  "relative, parameters within $param_diff"

run zero 2 2 1 --use-distributed-optimizer
read -r loss_diff param_diff <<<"$(compare dp zero)"
python3 -c "import sys; sys.exit(0 if $loss_diff <= 1e-6 and $param_diff <= 1e-5 else 1)" ||
  fail "ZeRO-1 against plain data parallelism: losses differ by $loss_diff (relative), parameters by $param_diff"
full_mb=$(sed -n 's/.*optimizer state \([0-9.]*\) MB per rank$/\1/p' "$workdir/dp.log")
zero_mb=$(sed -n 's/.*optimizer state \([0-9.]*\) MB per rank (ZeRO-1: 1\/4 of it)$/\1/p' "$workdir/zero.log")
python3 -c "import sys; sys.exit(0 if abs($zero_mb * 4 - $full_mb) <= 0.05 * $full_mb else 1)" ||
  fail "optimizer state per rank: $zero_mb MB with ZeRO-1, $full_mb MB without: $(grep 'optimizer state' "$workdir/zero.log")"
echo "ok: ZeRO-1 = plain data parallelism: losses within $loss_diff, parameters within $param_diff;" \
  "optimizer state $zero_mb MB per rank against $full_mb MB"

# A checkpoint written by 4 ranks with ZeRO-1 at step 5 goes on, on 1 rank without it and on 2 ranks with it, with
# the losses of the 4-rank run.
run zero_ckpt 2 2 1 --use-distributed-optimizer --save "$workdir/zckpt" --save-interval 5
for resume in "1 1 1" "1 2 1 --use-distributed-optimizer"; do
  name=resume_$(echo "$resume" | cut -d' ' -f2)
  # shellcheck disable=SC2086
  run "$name" $resume --load "$workdir/zckpt/iter_0000005"
  python3 - "$workdir/zero_ckpt.jsonl" "$workdir/$name.jsonl" <<'PY' ||
import json, sys
whole = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
resumed = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2]))}
assert sorted(resumed) == list(range(6, 11)), sorted(resumed)
worst = max(abs(resumed[s] - whole[s]) / abs(whole[s]) for s in resumed)
assert worst <= 1e-6, worst
PY
    fail "$name: the resumed losses differ from the 4-rank run's: $(cat "$workdir/$name.jsonl")"
done
echo "ok: a ZeRO-1 checkpoint of 4 ranks resumes on 1 rank and on 2 ZeRO-1 ranks with the same losses"

run no_overlap 2 2 1 --no-overlap-grad-reduce
read -r loss_diff param_diff <<<"$(compare dp no_overlap)"
expect_eq "overlap off against on (loss, parameters)" "$loss_diff $param_diff" "0.0 0.0"
grep -q "reduced after the backward" "$workdir/no_overlap.log" || fail "$(cat "$workdir/no_overlap.log")"
echo "ok: --no-overlap-grad-reduce gives the same bits"

# --grad-reduce-in-bf16 over MPI (bf16 elements, summed by srunway's own operation through float): the 4 ranks'
# buckets summed in bf16, plainly and under ZeRO-1, train within bf16's noise of the fp32 reduction, not its bits.
for name in bf16 bf16_zero; do
  run "$name" 2 2 1 --grad-reduce-in-bf16 $([[ $name == bf16_zero ]] && echo --use-distributed-optimizer)
  read -r loss_diff param_diff <<<"$(compare dp "$name")"
  python3 -c "import sys; sys.exit(0 if $loss_diff <= 2e-3 and $param_diff > 0 else 1)" ||
    fail "$name: the bf16 reduction's losses differ by $loss_diff (relative), its parameters by $param_diff"
  grep -q "overlapped with the backward in bf16" "$workdir/$name.log" || fail "$(cat "$workdir/$name.log")"
  echo "ok: $name: the gradients reduced in bf16 give losses within $loss_diff of fp32's, parameters $param_diff away"
done

# --rampup-batch-size on 4 ranks: each rank takes its share of each step's batch (8, 8, then 16: 1 and then 2
# micro-batches each), and the losses are those of 1 rank taking it all.
ramp=(--preset gpt-tiny --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 16 --peak-tflops 1
      --rampup-batch-size 8 8 16 --train-samples 80 --bucket-size-mb 0.05 --log-interval 1)
for shape in "1 1" "2 2"; do
  read -r nodes tasks <<<"$shape"
  srun --mpi=pmix -N "$nodes" --ntasks-per-node="$tasks" -c 1 env OMP_NUM_THREADS=1 "$train" "${ramp[@]}" \
    --metrics-file "$workdir/ramp_$nodes.jsonl" >"$workdir/ramp_$nodes.log" 2>&1 ||
    fail "the ramp on $nodes x $tasks: $(cat "$workdir/ramp_$nodes.log")"
done
python3 - "$workdir/ramp_1.jsonl" "$workdir/ramp_2.jsonl" <<'PY' ||
import json, sys
one, four = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [l["global_batch_size"] for l in one] == [l["global_batch_size"] for l in four] == [8, 8, 16, 16, 16, 16]
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(one, four))
assert worst <= 1e-6, worst
PY
  fail "the ramp on 4 ranks against 1: $(cat "$workdir/ramp_1.jsonl" "$workdir/ramp_2.jsonl")"
echo "ok: --rampup-batch-size on 2 nodes x 2 ranks = 1 rank"

# --calculate-per-token-loss on 4 ranks: the step's loss and gradients are over the positions that all ranks scored,
# as on 1 rank. The documents (--eod-mask-loss) make each micro-batch score another count, so a rank dividing by
# its own count (or the loss its own positions' mean) would report another loss.
for i in $(seq 1 300); do
  printf 'Note %d: the %s cat sat on the mat %d times.\n\n' "$i" "$( ((i % 3)) && echo black || echo grey)" "$((i % 5))"
done >"$workdir/notes.txt"
"${SRUNWAY_PREP:?}" --input "$workdir/notes.txt" --output-prefix "$workdir/notes" --train-vocab 300 --quiet >/dev/null ||
  fail "srunway-prep of the notes failed"
per_token=(--preset gpt-tiny --data-path "$workdir/notes" --split 1 --seq-length 32 --micro-batch-size 2
           --global-batch-size 8 --train-steps 10 --peak-tflops 1 --bucket-size-mb 0.05 --eod-mask-loss
           --calculate-per-token-loss)
for shape in "1 1" "2 2"; do
  read -r nodes tasks <<<"$shape"
  srun --mpi=pmix -N "$nodes" --ntasks-per-node="$tasks" -c 1 env OMP_NUM_THREADS=1 "$train" "${per_token[@]}" \
    --metrics-file "$workdir/per_token_$nodes.jsonl" --export "$workdir/per_token_$nodes.safetensors" \
    >"$workdir/per_token_$nodes.log" 2>&1 || fail "per-token loss on $nodes x $tasks: $(cat "$workdir/per_token_$nodes.log")"
done
read -r loss_diff param_diff <<<"$(compare per_token_1 per_token_2)"
python3 -c "import sys; sys.exit(0 if $loss_diff <= 1e-6 and $param_diff <= 1e-5 else 1)" ||
  fail "per-token loss on 2x2 ranks against 1: losses differ by $loss_diff (relative), parameters by $param_diff"
echo "ok: --calculate-per-token-loss on 2 nodes x 2 ranks = 1 rank: losses within $loss_diff, parameters within" \
  "$param_diff"

run dp_threads 2 2 2
read -r loss_diff param_diff <<<"$(compare dp dp_threads)"
expect_eq "2 threads per rank against 1 (loss, parameters)" "$loss_diff $param_diff" "0.0 0.0"
echo "ok: 2 threads per rank give the same bits as 1"

SRUNWAY_TRAIN_SLOW_RANK=3:200 run slow 2 2 1 --straggler-window 3 --straggler-threshold 4 --log-interval 5 \
  --straggler-minmax-count 1
warnings=$(grep 'straggler:' "$workdir/slow.log" || true)
expect_eq "straggler warnings" "$(count_matching . "$warnings")" 1
grep -qE "straggler: rank 3 on node2 computed" <<<"$warnings" || fail "straggler warning: $warnings"
grep -q '"slowest_rank":3,"slowest_host":"node2"' "$workdir/slow.jsonl" || fail "metrics: $(head -2 "$workdir/slow.jsonl")"
# Megatron's --straggler-minmax-count: the slowest and the fastest ranks after each log line (steps 5 and 10).
minmax=$(grep -E 'info: step (5|10) compute: slowest rank 3 on node2 [0-9.]+ ms; fastest rank [0-2] on node[12] ' \
  "$workdir/slow.log" || true)
expect_eq "--straggler-minmax-count 1 lines naming rank 3 slowest" "$(count_matching . "$minmax")" 2
grep -q '"slowest_ranks":\[3\],"fastest_ranks":\[[0-2]\]' "$workdir/slow.jsonl" ||
  fail "metrics: $(head -2 "$workdir/slow.jsonl")"
# --disable-straggler-on-startup: neither line, the metrics as before.
SRUNWAY_TRAIN_SLOW_RANK=3:200 run quiet 2 2 1 --straggler-window 3 --straggler-threshold 4 --train-steps 4 \
  --straggler-minmax-count 1 --disable-straggler-on-startup
grep -E 'straggler:|compute: slowest' "$workdir/quiet.log" && fail "--disable-straggler-on-startup: straggler lines"
grep -q '"slowest_rank":3,"slowest_host":"node2"' "$workdir/quiet.jsonl" ||
  fail "metrics: $(head -2 "$workdir/quiet.jsonl")"
echo "ok: the straggler warning names rank 3 on node2, once; --straggler-minmax-count names it slowest at each log" \
  "line; --disable-straggler-on-startup prints neither"

# --check-weight-hash-across-dp-replicas-interval over MPI: the 4 replicas hash alike at every step (MPI's
# all-reduce gives every rank the same sums; ZeRO-1's gather the same slices), and the check changes no bit of the
# run. A bit flipped in rank 3's parameters after step 3 (SRUNWAY_TRAIN_FLIP_WEIGHT, as a memory fault would) is
# found at step 4's check: rank 0's one line names rank 3 on node2 against the 3 others, every rank exits 3, and the
# checkpoint of step 2 stays the last.
run hashed 2 2 1 --check-weight-hash-across-dp-replicas-interval 1
expect_eq "hashed at every step against without (loss, parameters)" "$(compare dp hashed)" "0.0 0.0"
run hashed_zero 2 2 1 --check-weight-hash-across-dp-replicas-interval 1 --use-distributed-optimizer
rc=0
out=$(SRUNWAY_TRAIN_FLIP_WEIGHT=3:3 srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 "$train" "${common[@]}" \
  --check-weight-hash-across-dp-replicas-interval 2 --save "$workdir/flipped" --save-interval 2 2>&1) || rc=$?
expect_eq "exit of ranks whose weights differ" "$rc" 3
expect_eq "error lines of weights that differ" "$(count_matching 'srunway-train.* error:' "$out")" 1
grep -qE "error: step 4: the ranks' weights differ, where data parallelism keeps them the same bit for bit: rank 3 on node2 \(hash [0-9a-f]{16}\) holds other weights than the 3 other ranks \(hash [0-9a-f]{16}\); a fault in a GPU's or a host's memory or on the network\? Stopping without saving \(the last good checkpoint in $workdir/flipped is kept\)$" \
  <<<"$out" || fail "$out"
[[ $(cat "$workdir/flipped/latest_checkpointed_iteration.txt") == 2 && ! -e $workdir/flipped/iter_0000004 ]] ||
  fail "the checkpoint of step 2 should be the last: $(ls "$workdir/flipped")"
echo "ok: the 4 replicas' weights hash alike at every step; a bit flipped in rank 3's is named at the next check, exit 3"

out=$(srun --mpi=pmix -N2 --ntasks-per-node=2 "$train" "${common[@]}" --global-batch-size 6 2>&1) && fail "batch 6 on 4 ranks ran"
expect_eq "error lines for an indivisible batch" "$(count_matching 'srunway-train.* error:' "$out")" 1
grep -q "global-batch-size 6 is not a multiple of --micro-batch-size 2 x 4 data-parallel ranks" <<<"$out" || fail "$out"
echo "ok: an indivisible global batch is one line from rank 0"

out=$(srun --mpi=pmix -N2 --ntasks-per-node=2 bash -c \
  'lr=3e-4; [[ $SLURM_PROCID == 2 ]] && lr=1e-3; exec "$0" "$@" --lr $lr' "$train" "${common[@]}" 2>&1) &&
  fail "ranks with different --lr ran"
expect_eq "error lines for disagreeing ranks" "$(count_matching 'srunway-train.* error:' "$out")" 1
grep -q "ranks disagree on the training configuration or data: rank 2 on node2 has hash" <<<"$out" || fail "$out"
echo "ok: a rank with another --lr is named at start-up"

# A rank that fails alone mid-run (rank 0 cannot write its --metrics-file) ends the step at once with its line:
# its peers waited in the gradient all-reduce and it waited for them in MPI_Finalize, silent, to the time limit.
rc=0
out=$(timeout 100 srun --mpi=pmix -N2 --ntasks-per-node=2 --time=2 "$train" "${common[@]}" --train-steps 500 \
  --metrics-file /dev/full 2>&1) || rc=$?
((rc != 124)) || fail "rank 0 failing alone left the step hanging: $out"
expect_eq "exit of a step whose rank 0 failed alone" "$rc" 1
expect_eq "error lines of rank 0 failing alone" "$(count_matching 'srunway-train.* error:' "$out")" 1
grep -q "rank 0\] error: rank 0 on node1: write metrics file /dev/full: No space left on device$" <<<"$out" || fail "$out"
echo "ok: rank 0 failing alone mid-run ends every rank at once, with its one line"
# A rank that hangs (rank 3 sleeps 10 minutes before its first micro-batch) is caught by the others' deadline on MPI's
# calls (--distributed-timeout-minutes, 6 s here): their line names the call, and the step ends. MPI has no deadline
# of its own: they waited, silent, to the time limit.
rc=0
out=$(SRUNWAY_TRAIN_SLOW_RANK=3:600000 timeout 100 srun --mpi=pmix -N2 --ntasks-per-node=2 --time=2 "$train" \
  "${common[@]}" --distributed-timeout-minutes 0.1 2>&1) || rc=$?
((rc != 124)) || fail "a hung rank 3 left the step hanging: $out"
((rc != 0)) || fail "a hung rank 3: exit 0: $out"
grep -qE "rank [0-2]\] error: rank [0-2] on node[12]: MPI_[A-Za-z_/]+ did not finish within 6 s: a rank may be hung or gone, and MPI cannot abandon the call \(--distributed-timeout-minutes 0.1\); ending the step$" <<<"$out" ||
  fail "$out"
echo "ok: a hung rank ends the step at the others' MPI deadline, named as such"
# So does rank 0's own check at start-up (an --export or --metrics-file it cannot write; the others waited for it).
for flag in --export --metrics-file; do
  rc=0
  out=$(timeout 100 srun --mpi=pmix -N2 --ntasks-per-node=2 --time=2 "$train" "${common[@]}" \
    "$flag" "$workdir/none/out" 2>&1) || rc=$?
  ((rc != 124)) || fail "rank 0's $flag failing at start-up left the step hanging: $out"
  expect_eq "exit with rank 0's $flag unwritable" "$rc" 1
  expect_eq "error lines of $flag" "$(count_matching 'srunway-train.* error:' "$out")" 1
  grep -q "rank 0\] error: rank 0 on node1: .*$workdir/none.*: No such file or directory$" <<<"$out" || fail "$out"
done
echo "ok: rank 0 unable to write --export or --metrics-file at start-up ends every rank, with its one line"

# kill -9 of one rank's srunway-train mid-run, under srunway-launch: every rank ends within the launcher's
# timeout, the dead rank is named with its host, and the last complete checkpoint still loads.
launch=${SRUNWAY_LAUNCH:?}
ckpt=$workdir/kill-ckpt
job_out=$workdir/kill.log
timeout 120 srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 "$launch" --timeout 20 -- bash -c \
  'echo $$ >"$0/pid.$SLURM_PROCID"; exec "$@"' "$workdir" "$train" "${common[@]}" --train-steps 100000 \
  --save "$ckpt" --save-interval 5 >"$job_out" 2>&1 &
step_pid=$!
for _ in $(seq 1 600); do [[ -s $ckpt/latest_checkpointed_iteration.txt ]] && break; sleep 0.1; done
[[ -s $ckpt/latest_checkpointed_iteration.txt ]] || fail "no checkpoint before the kill: $(cat "$job_out")"
kill -9 "$(cat "$workdir/pid.2")"
rc=0
wait "$step_pid" || rc=$?
((rc != 0 && rc != 124)) || fail "after kill -9 of rank 2 the step exited $rc: $(cat "$job_out")"
grep -q "srunway-launch: rank 2 on node2 was killed by SIGKILL after" "$job_out" || fail "$(cat "$job_out")"
grep -q "srunway-launch: rank 0 on node1: rank 2 on node2 was killed by SIGKILL" "$job_out" || fail "$(cat "$job_out")"
saved=$(cat "$ckpt/latest_checkpointed_iteration.txt")
"$train" "${common[@]}" --load "$ckpt" --train-steps $((10#$saved + 1)) >"$workdir/resume.log" 2>&1 ||
  fail "the last checkpoint does not load: $(cat "$workdir/resume.log")"
grep -q "resumed from $ckpt at step $((10#$saved))" "$workdir/resume.log" || fail "$(cat "$workdir/resume.log")"
echo "ok: kill -9 of rank 2: every rank ended, rank 2 on node2 named, the checkpoint of step $((10#$saved)) loads"

# A node's ranks share its memory and their job's cgroup (Slurm's --mem): two ranks in a 2 GiB memory cgroup, each
# with a 1.18 GiB model, is one line from rank 0, exit 1 (each rank thought the whole room its own, and the cgroup
# OOM-killed one as they filled it). A rank alone that cannot build its model (rank 1 alone in a 1 GiB cgroup) ends
# every rank at once, rank 0 naming it (rank 0 waited for it in the first collective until the distributed
# timeout). Root makes the cgroup where the machine has cgroup v1's memory controller; else said and skipped.
big=(--preset gpt-tiny --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 4 --train-steps 2
     --peak-tflops 1 --vocab-size 131072 --hidden-size 512 --device cpu --distributed-timeout-minutes 1)
cgroup=/sys/fs/cgroup/memory/srunway-share-$$
if [[ -w /sys/fs/cgroup/memory ]] && mkdir "$cgroup" 2>/dev/null; then
  at_exit "rmdir '$cgroup'"
  # in_cgroup RANKS FLAGS...: 2 ranks on node1, those whose SLURM_PROCID matches RANKS (a regex) in the cgroup.
  in_cgroup() {
    local ranks=$1
    shift
    timeout 300 srun --mpi=pmix -N1 -w node1 --ntasks-per-node=2 -c1 bash -c \
      "[[ \$SLURM_PROCID =~ ^($ranks)\$ ]] && echo \$\$ >'$cgroup/cgroup.procs'; exec env OMP_NUM_THREADS=1 \"\$@\"" \
      - "$train" "$@"
  }
  echo $((2 << 30)) >"$cgroup/memory.limit_in_bytes"
  rc=0
  out=$(in_cgroup '0|1' "${big[@]}" 2>&1) || rc=$?
  expect_eq "exit of 2 ranks over their cgroup's limit" "$rc" 1
  expect_eq "error lines" "$(count_matching 'srunway-train.* error:' "$out")" 1
  grep -qE "rank 0\] error: cannot allocate .* GiB it may \(this node's 2 ranks share what cgroup /srunway-share-$$ had left of its 2.00 GiB limit" <<<"$out" ||
    fail "$out"
  echo "ok: a node's 2 ranks share their cgroup's 2 GiB: one line, exit 1"
  echo $((1 << 30)) >"$cgroup/memory.limit_in_bytes"
  rc=0
  out=$(in_cgroup 1 "${big[@]}" 2>&1) || rc=$?
  expect_eq "exit with rank 1 unable to build the model" "$rc" 1
  grep -q "rank 0\] error: rank 1 on node1 could not build the model (its line says why)" <<<"$out" || fail "$out"
  grep -q "rank 1\] error: rank 1 on node1: cannot allocate" <<<"$out" || fail "$out"
  echo "ok: rank 1 unable to build the model ends both ranks at once, rank 0 naming it"
else
  echo "ok (skipped): no memory cgroup can be made here"
fi
