#!/usr/bin/env bash
# scripts/examples/train-requeue.sbatch as users run it, 2 nodes x 2 ranks: `scancel --signal=USR1 --batch JOB`
# (the preemption warning) -> every rank stops after the same step and rank 0 saves -> the script requeues the job
# -> the requeued job resumes by itself and its losses continue exactly those of an uninterrupted run. Then
# --exit-save-budget: a save that would not fit is skipped, said so, and the last periodic checkpoint stays; and
# --exit-duration-in-mins stops and saves.
source "$(dirname "$0")/lib.sh"
require_cluster
export SRUNWAY_TRAIN=${SRUNWAY_TRAIN:?} SRUNWAY_LAUNCH=${SRUNWAY_LAUNCH:?}
script=$kSourceRoot/scripts/examples/train-requeue.sbatch
work=$(mktemp -d)
at_exit "rm -rf '$work'"
flags=(--preset gpt-tiny --mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --train-steps 60
       --peak-tflops 1 --straggler-threshold 100)

out=$(sbatch --wait --parsable --output="$work/whole.out" "$script" "$work/whole" "${flags[@]}" \
  --metrics-file "$work/whole.jsonl" 2>&1) || fail "uninterrupted job: $out: $(cat "$work/whole.out")"

job=$(sbatch --parsable --output="$work/requeue.out" "$script" "$work/requeue" "${flags[@]}" \
  --metrics-file "$work/requeue.jsonl")
job=${job%%;*}
at_exit "scancel $job 2>/dev/null"
for _ in $(seq 1 600); do [[ $(wc -l 2>/dev/null <"$work/requeue.jsonl" || echo 0) -ge 5 ]] && break; sleep 0.1; done
scancel --signal=USR1 --batch "$job"
state="" released=0
for _ in $(seq 1 180); do
  info=$(scontrol show job "$job" -o)
  state=$(grep -o 'JobState=[A-Z]*' <<<"$info" | cut -d= -f2)
  # Slurm holds a requeued job back about two minutes (its EligibleTime); let it start sooner, but not within the
  # second in which slurmd revoked the first run's credential: a credential issued in that second is refused too
  # ("Killing non-startable batch job: Job credential revoked") and the job ends FAILED.
  if ((!released)) && [[ $state == PENDING ]] && grep -q 'Restarts=1' <<<"$info"; then
    scontrol update JobId="$job" StartTime=now+2 2>/dev/null || true  # it may have started meanwhile
    released=1
  fi
  [[ $state == COMPLETED || $state == FAILED || $state == CANCELLED ]] && break
  sleep 1
done
log=$(cat "$work/requeue.out")
[[ $state == COMPLETED ]] || fail "job state after the requeue: got '$state', want 'COMPLETED'; its output: $log"
stopped=$(sed -n 's/.*stopped by signal 10 after step \([0-9]*\);.*/\1/p' <<<"$log")
[[ -n $stopped ]] || fail "no rank stopped on USR1: $log"
expect_eq "ranks that exited 4" "$(grep -c 'Exited with exit code 4' <<<"$log")" 2  # srun's lines: tasks 0-1, 2-3
grep -q "saved checkpoint $work/requeue/iter_$(printf %07d "$stopped") (stopping on a signal, 4 shards in" <<<"$log" ||
  fail "$log"
grep -q "job $job (restart 1)" <<<"$log" || fail "not requeued: $log"
grep -q "resumed from $work/requeue at step $stopped " <<<"$log" || fail "did not resume: $log"
python3 - "$work/whole.jsonl" "$work/requeue.jsonl" <<'PY' || fail "the requeued run's losses differ from the uninterrupted run's"
import json, sys
whole, requeued = ([(r["step"], r["loss"]) for r in map(json.loads, open(p)) if "loss" in r] for p in sys.argv[1:])
assert len(whole) == 60 and requeued == whole, (len(whole), len(requeued), [a for a in zip(whole, requeued) if a[0] != a[1]][:3])
PY
echo "ok: USR1 -> every rank saved step $stopped -> requeued -> resumed; losses of all 60 steps equal the uninterrupted run's"

# A save that does not fit what is left of the budget is skipped: the periodic checkpoint before it stays.
name=budget-$$
srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 -J "$name" "$SRUNWAY_TRAIN" "${flags[@]}" --train-steps 100000 \
  --save "$work/budget" --save-interval 3 --exit-save-budget 0 >"$work/budget.log" 2>&1 &
step_pid=$!
for _ in $(seq 1 600); do [[ -s $work/budget/latest_checkpointed_iteration.txt ]] && break; sleep 0.1; done
scancel --signal=USR1 --name="$name"
rc=0
wait "$step_pid" || rc=$?
expect_eq "exit after a skipped save" "$rc" 4
log=$(cat "$work/budget.log")
grep -qE "warning: not saving: the last save took [0-9.]+ s and 0.0 s are left of --exit-save-budget 0 s; the last complete checkpoint in $work/budget stays" <<<"$log" ||
  fail "no skip message: $log"
stopped=$(sed -n 's/.*stopped by signal 10 after step \([0-9]*\);.*/\1/p' <<<"$log")
latest=$(cat "$work/budget/latest_checkpointed_iteration.txt")
((latest % 3 == 0 && latest < stopped)) || fail "latest checkpoint $latest after stopping at $stopped: the stop was saved"
echo "ok: --exit-save-budget 0: the save at step $stopped was skipped, the checkpoint of step $latest stays"

out=$(srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 "$SRUNWAY_TRAIN" "${flags[@]}" --train-steps 100000 \
  --save "$work/duration" --exit-duration-in-mins 0.02 2>&1) && fail "--exit-duration-in-mins: the step succeeded"
stopped=$(sed -n 's/.*stopped after step \([0-9]*\): --exit-duration-in-mins 0.02 has passed;.*/\1/p' <<<"$out")
[[ -n $stopped ]] || fail "no time-limit stop: $out"
expect_eq "checkpoint after --exit-duration-in-mins" "$(cat "$work/duration/latest_checkpointed_iteration.txt")" "$stopped"
echo "ok: --exit-duration-in-mins 0.02 stopped every rank at step $stopped with a checkpoint"
