#!/usr/bin/env bash
# srunway-train under sbatch + srun as users run it: a short job completes with its metrics; a job signalled with
# `scancel --signal=TERM` (what --signal=TERM@T and preemption send) saves a checkpoint and exits 4, and a
# resubmission with the same --load/--save directory continues from that step.
source "$(dirname "$0")/lib.sh"
require_cluster
train=${SRUNWAY_TRAIN:?}
workdir=$(mktemp -d)
at_exit "rm -rf '$workdir'"
common="--preset gpt-tiny --seq-length 32 --micro-batch-size 2 --mock-data --peak-tflops 1 --log-interval 1"

out=$(sbatch --wait --parsable --output="$workdir/short-%j.out" --cpus-per-task=1 \
  --wrap="srun --mpi=pmix '$train' $common --train-steps 10 --metrics-file '$workdir/short.jsonl'" 2>&1) ||
  fail "short job failed: $out; $(cat "$workdir"/short-*.out)"
expect_eq "metric lines" "$(wc -l <"$workdir/short.jsonl")" 10
grep -q '^step     10/10 | loss' "$workdir"/short-*.out || fail "no step lines in $(cat "$workdir"/short-*.out)"
echo "ok: a 10-step job completed"

job=$(sbatch --parsable --output="$workdir/long-%j.out" --cpus-per-task=1 \
  --wrap="srun --mpi=pmix '$train' $common --train-steps 100000 --save '$workdir/ckpt' --load '$workdir/ckpt'; echo srun-exit=\$?")
job=${job%%;*}
at_exit "scancel $job 2>/dev/null"
for _ in $(seq 1 600); do grep -q '^step' "$workdir/long-$job.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^step' "$workdir/long-$job.out" || fail "job $job never logged a step: $(cat "$workdir/long-$job.out")"
scancel --signal=TERM "$job"
for _ in $(seq 1 300); do grep -q '^srun-exit=' "$workdir/long-$job.out" && break; sleep 0.1; done
grep -q '^srun-exit=4$' "$workdir/long-$job.out" || fail "after SIGTERM: $(cat "$workdir/long-$job.out")"
grep -q 'stopped by signal 15 after step' "$workdir/long-$job.out" || fail "no stop message: $(cat "$workdir/long-$job.out")"
step=$(cat "$workdir/ckpt/latest_checkpointed_iteration.txt")
echo "ok: scancel --signal=TERM: checkpoint at step $step, exit 4"

target=$((step + 3))
out=$(sbatch --wait --parsable --output="$workdir/resume-%j.out" --cpus-per-task=1 \
  --wrap="srun --mpi=pmix '$train' $common --train-steps $target --save '$workdir/ckpt' --load '$workdir/ckpt'" 2>&1) ||
  fail "resumed job failed: $out"
grep -q "resumed from $workdir/ckpt at step $step" "$workdir"/resume-*.out || fail "no resume: $(cat "$workdir"/resume-*.out)"
expect_eq "steps after resuming" "$(grep -c '^step' "$workdir"/resume-*.out)" 3
echo "ok: the resubmitted job resumed at step $step and did steps $((step + 1))-$target"
