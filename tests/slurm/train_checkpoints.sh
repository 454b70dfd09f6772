#!/usr/bin/env bash
# srunway-train's sharded checkpoints on 2 nodes x 2 ranks: one shard per rank and a manifest per checkpoint,
# --keep-checkpoints deleting older complete ones; a missing or corrupt shard, or a manifest without its shards,
# is one line naming the file from rank 0 and every rank exits 1; a full disk during a save (a small tmpfs) leaves
# the previous checkpoint in charge and loadable; a killed save's files are removed by the next save.
source "$(dirname "$0")/lib.sh"
require_cluster
train=${SRUNWAY_TRAIN:?}
work=$(mktemp -d)
at_exit "rm -rf '$work'"
common=(--preset gpt-tiny --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --peak-tflops 1)
train4() { srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 env OMP_NUM_THREADS=1 "$train" "${common[@]}" "$@"; }

train4 --train-steps 10 --save "$work/ckpt" --save-interval 2 --keep-checkpoints 2 >"$work/keep.log" 2>&1 ||
  fail "$(cat "$work/keep.log")"
expect_eq "checkpoints kept" "$(cd "$work/ckpt" && echo iter_*)" "iter_0000008 iter_0000010"
expect_eq "shards of step 10" "$(cd "$work/ckpt/iter_0000010" && echo *)" \
  "manifest.json shard_00000_of_00004.ckpt shard_00001_of_00004.ckpt shard_00002_of_00004.ckpt shard_00003_of_00004.ckpt"
grep -q "deleted checkpoint $work/ckpt/iter_0000006 (--keep-checkpoints 2)" "$work/keep.log" || fail "$(cat "$work/keep.log")"
echo "ok: 4 shards and a manifest per checkpoint; --keep-checkpoints 2 kept steps 8 and 10"

# One run at a time saves in a --save directory: two (a job array's tasks sharing one) wrote their shards into the
# same staging directories and committed each other's, a checkpoint mixed from two runs. A second job is refused
# while the first trains, in one line from its rank 0, before any step.
srun -J lease-holder --mpi=pmix -N2 --ntasks-per-node=2 -c1 env OMP_NUM_THREADS=1 "$train" "${common[@]}" \
  --train-steps 100000 --save "$work/leased" --log-interval 1 >"$work/holder.log" 2>&1 &
holder=$!
for _ in $(seq 1 300); do grep -q '^step' "$work/holder.log" && break; sleep 0.1; done
rc=0
train4 --train-steps 2 --save "$work/leased" >"$work/second.log" 2>&1 || rc=$?
scancel --signal=TERM --name lease-holder
rc_holder=0
wait "$holder" || rc_holder=$?
expect_eq "exit of a second job saving where another trains" "$rc" 1
expect_eq "error lines" "$(count_matching 'srunway-train.* error:' "$(cat "$work/second.log")")" 1
grep -qE "rank 0\] error: rank 0 on node1: --save $work/leased is in use by job [0-9]+'s process [0-9]+ on .* \(its lease .*\): two runs saving in one directory mix their checkpoints" \
  "$work/second.log" || fail "$(cat "$work/second.log")"
! grep -q '^step' "$work/second.log" || fail "the second job trained: $(cat "$work/second.log")"
expect_eq "the first job's exit after SIGTERM (saved)" "$rc_holder" 4
[[ ! -e $work/leased/.srunway-save-lease.json ]] || fail "the first job left its lease"
echo "ok: a second job saving in a training job's --save is refused before any step; the first gives its lease up"

# A lease left by a run killed without its handler on another host (an OOM kill, a node lost): taken over as soon
# as scontrol says its job has ended, not 120 s after its last touch. The job is real (sleeping, then cancelled);
# the lease names a host that is not this one, so that only Slurm can tell.
srun -J lease-sleeper -N1 -n1 sleep 300 >/dev/null 2>&1 &
sleeper=$!
job=
for _ in $(seq 1 100); do job=$(squeue -h -n lease-sleeper -t RUNNING -o %A); [[ -n $job ]] && break; sleep 0.1; done
[[ -n $job ]] || fail "the sleeping job did not start"
mkdir -p "$work/killed"
cluster=$(scontrol show config | awk '$1 == "ClusterName" {print $3}')
printf '{"job":"%s","host":"lost-node","pid_ns":1,"pid":4242,"nonce":"x","cluster":"%s"}\n' "$job" "$cluster" \
  >"$work/killed/.srunway-save-lease.json"
rc=0
train4 --train-steps 2 --save "$work/killed" >"$work/killed-running.log" 2>&1 || rc=$?
expect_eq "exit while the lease's job runs" "$rc" 1
grep -q "error: rank 0 on node1: --save $work/killed is in use by job $job's process 4242 on lost-node" \
  "$work/killed-running.log" || fail "$(cat "$work/killed-running.log")"
scancel "$job"
wait "$sleeper" || true
for _ in $(seq 1 100); do [[ -z $(squeue -h -j "$job" 2>/dev/null) ]] && break; sleep 0.1; done
train4 --train-steps 2 --save "$work/killed" >"$work/killed-ended.log" 2>&1 || fail "$(cat "$work/killed-ended.log")"
grep -q "info: --save $work/killed: took over the lease of job $job's process 4242 on lost-node (its job has ended: CANCELLED)" \
  "$work/killed-ended.log" || fail "$(cat "$work/killed-ended.log")"
[[ -d $work/killed/iter_0000002 ]] || fail "no checkpoint after taking the lease over"
echo "ok: a dead run's lease whose job Slurm says has ended (CANCELLED) is taken over at once"

# expect_load_error NAME PATTERN: resuming from the damaged checkpoint exits 1 with one error line, from rank 0.
expect_load_error() {
  local out rc=0
  out=$(train4 --train-steps 12 --load "$work/ckpt" 2>&1) || rc=$?
  ((rc != 0)) || fail "$1: the run went on"
  expect_eq "$1: error lines" "$(count_matching 'srunway-train.* error:' "$out")" 1
  grep -qE "rank 0\] error: .*$2" <<<"$out" || fail "$1: $out"
  echo "ok: $1: $(grep 'error:' <<<"$out" | sed 's/.*error: //')"
}
shard=$work/ckpt/iter_0000010/shard_00002_of_00004.ckpt
cp "$shard" "$work/saved-shard"
python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-100] ^= 0x40; open(p, 'wb').write(b)" "$shard"
expect_load_error "a corrupt shard" "$shard: checksum mismatch"
rm "$shard"
expect_load_error "a missing shard" "$shard: missing \\(listed in"
cp "$work/saved-shard" "$shard"
rm "$work/ckpt/iter_0000010/manifest.json"
expect_load_error "shards without their manifest" "iter_0000010: no manifest.json"

# A full disk: a tmpfs with room for one checkpoint (1.7 MB) but not two, under 2 ranks on node1. Each of the
# local cluster's nodes has a mount namespace of its own (its slurmd's), so the tmpfs is mounted in node1's.
node1_slurmd=$(pgrep -f '^slurmd -N node1( |$)' | head -1 || true)
in_node1() { nsenter --mount="/proc/$node1_slurmd/ns/mnt" "$@"; }
mkdir "$work/full"
if [[ -n $node1_slurmd ]] && in_node1 mount -t tmpfs -o size=2600k tmpfs "$work/full" 2>/dev/null; then
  at_exit "nsenter --mount=/proc/$node1_slurmd/ns/mnt umount '$work/full'"
  train2() { srun --mpi=pmix -N1 -w node1 --ntasks-per-node=2 -c1 env OMP_NUM_THREADS=1 "$train" "${common[@]}" "$@"; }
  rc=0
  train2 --train-steps 6 --save "$work/full/ckpt" --save-interval 3 >"$work/full.log" 2>&1 || rc=$?
  expect_eq "exit after a save on a full disk" "$rc" 1
  expect_eq "error lines" "$(count_matching 'srunway-train.* error:' "$(cat "$work/full.log")")" 1
  grep -qE "rank 0\] error: rank [01] on node1: write $work/full/ckpt/\.saving_iter_0000006/.*: No space left on device( \(and 1 more rank\))?; the last complete checkpoint in $work/full/ckpt stays \(step 3\)$" "$work/full.log" ||
    fail "$(cat "$work/full.log")"
  in_node1 test ! -e "$work/full/ckpt/iter_0000006" -a ! -e "$work/full/ckpt/.saving_iter_0000006" ||
    fail "the failed save left iter_0000006 or its staging directory behind"
  expect_eq "latest after the failed save" "$(in_node1 cat "$work/full/ckpt/latest_checkpointed_iteration.txt")" 3
  out=$(train2 --train-steps 4 --load "$work/full/ckpt" 2>&1) || fail "the checkpoint of step 3 does not load: $out"
  grep -q "resumed from $work/full/ckpt at step 3 " <<<"$out" || fail "$out"
  echo "ok: a full disk during the save of step 6: exit 1, the checkpoint of step 3 stays in charge and loads"
  # A save killed midway (a time limit's SIGKILL) left its staging directory, as large as a checkpoint, for good:
  # here one takes the room the next run's save needs, which removes it first.
  in_node1 rm -rf "$work/full/ckpt"
  in_node1 mkdir -p "$work/full/ckpt/.saving_iter_0000002"
  in_node1 dd if=/dev/zero of="$work/full/ckpt/.saving_iter_0000002/.shard_00000_of_00002.ckpt.tmp.Xy12Z3" \
    bs=1k count=1700 status=none
  out=$(train2 --train-steps 3 --save "$work/full/ckpt" --save-interval 3 2>&1) ||
    fail "a save where a killed one left its files: $out"
  grep -q "removed $work/full/ckpt/.saving_iter_0000002 (1.7 MiB): a save that did not finish" <<<"$out" || fail "$out"
  expect_eq "latest after a killed save's files were removed" \
    "$(in_node1 cat "$work/full/ckpt/latest_checkpointed_iteration.txt")" 3
  echo "ok: a killed save's staging directory is removed by the next save, which then fits"
  # A --save that node2 does not share (the tmpfs is node1's alone): no checkpoint could ever be committed there,
  # which was found at the first save; now at start-up, in one line from rank 0, before any step.
  rc=0
  train4 --train-steps 4 --save "$work/full/unshared" >"$work/unshared.log" 2>&1 || rc=$?
  expect_eq "exit with a --save that node2 does not share" "$rc" 1
  expect_eq "error lines" "$(count_matching 'srunway-train.* error:' "$(cat "$work/unshared.log")")" 1
  grep -qE "rank 0\] error: --save $work/full/unshared: rank 2 on node2 \(and 1 more rank\) cannot see the files that rank 0 writes there: .* a directory that every node shares$" \
    "$work/unshared.log" || fail "$(cat "$work/unshared.log")"
  ! grep -q '^step' "$work/unshared.log" || fail "trained with an unshared --save: $(cat "$work/unshared.log")"
  left=$(in_node1 ls -A "$work/full/unshared")
  [[ -z $left ]] || fail "the probe stayed: $left"
  echo "ok: a --save directory that not every node shares ends the run at start-up"
else
  echo "ok (skipped): cannot mount a tmpfs in node1's mount namespace here for the full-disk case"
fi
