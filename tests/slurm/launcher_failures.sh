#!/usr/bin/env bash
# A rank killed during the bootstrap, or one that never joins: every other rank exits with one line naming
# what happened, within its --timeout (the outer `timeout` only guards against a hang).
source "$(dirname "$0")/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
work=$(mktemp -d)
at_exit "rm -rf '$work'"

run_failing() {  # run_failing NAME MPI BOOTSTRAP BEHAVIOUR: rank 3 of 4 misbehaves
  local name=$1 mpi=$2 bootstrap=$3 behaviour=$4 rc=0
  # The exit code is taken from the command itself: after `if ...; fi` $? is the if's own status, always 0.
  timeout 90 srun --mpi="$mpi" -N2 -n4 --time=2 -l bash -c \
      "if [ \$SLURM_PROCID = 3 ]; then $behaviour; fi; exec $launch --bootstrap=$bootstrap --timeout 5 -- true" \
      >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  ((rc != 0)) || fail "$name: the step succeeded"
  ((rc != 124)) || fail "$name: the step hung past the guard"
  cat "$work/$name.err"
}

echo "== slurm bootstrap, rank 3 killed before joining"
run_failing slurm-kill none slurm 'kill -9 $$'
for r in 0 1 2; do
  grep -q "^ *$r: srunway-launch: rank $r on node[12]: rank 3 did not arrive during init$" "$work/slurm-kill.err" ||
    fail "rank $r did not name rank 3"
done

echo "== slurm bootstrap, rank 3 sleeps instead of joining"
run_failing slurm-sleep none slurm 'sleep 8'
for r in 0 1 2; do
  grep -q "^ *$r: srunway-launch: rank $r on node[12]: rank 3 did not arrive during init$" "$work/slurm-sleep.err" ||
    fail "rank $r did not name rank 3"
done

# Under PMIx the fence cannot say who is missing; after its deadline every rank asks each peer for its part of
# the exchange (direct modex) and names those with no answer, with their hosts.
echo "== pmix bootstrap, rank 3 sleeps instead of joining the fence"
run_failing pmix-sleep pmix pmix 'sleep 30'
for r in 0 1 2; do
  grep -q "^ *$r: srunway-launch: rank $r on node[12]: init did not complete within 5 s: rank 3 on node2 did not arrive$" \
    "$work/pmix-sleep.err" || fail "rank $r did not name rank 3"
done

echo "== pmix bootstrap, rank 3 killed before it joins the fence"
run_failing pmix-kill pmix pmix 'kill -9 $$'
lines=$(grep -c "srunway-launch: rank [0-2] on node[12]: init did not complete within 5 s: rank 3 on node2 did not arrive$" "$work/pmix-kill.err" || true)
expect_eq "surviving ranks that named rank 3" "$lines" 3

echo "== pmix bootstrap, ranks 1 and 3 sleep: both named with their hosts"
timeout 90 srun --mpi=pmix -N2 -n4 --time=2 -l bash -c \
  "if [ \$SLURM_PROCID = 1 -o \$SLURM_PROCID = 3 ]; then sleep 30; fi; exec $launch --bootstrap=pmix --timeout 5 -- true" \
  >"$work/two.out" 2>"$work/two.err" || true
for r in 0 2; do
  grep -q "^ *$r: srunway-launch: rank $r on node1: init did not complete within 5 s: ranks 1 (node1) and 3 (node2) did not arrive$" \
    "$work/two.err" || fail "rank $r did not name ranks 1 and 3: $(cat "$work/two.err")"
done

echo "== pmix, rank 3 stalls before the --check fence, alive: named in a later phase too"
rc=0
SRUNWAY_FAULT_STALL_RANK=3 SRUNWAY_FAULT_STALL_PHASE=fence timeout 90 srun --mpi=pmix -N2 -n4 --time=2 -l \
  "$launch" --check --timeout 5 >"$work/stall.out" 2>"$work/stall.err" || rc=$?
((rc != 0 && rc != 124)) || fail "stall: exit $rc"
# Rank 3 itself is alive and hears it from the others through the watchdog: every rank prints one such line.
expect_eq "ranks that named rank 3 in the fence" \
  "$(grep -cE "^ *[0-3]: srunway-launch: .*fence did not complete within 5 s: rank 3 on node2 did not arrive$" "$work/stall.err")" 4
# After the bootstrap: the heartbeat watchdog names the rank that died and the phase it was in.
run_check_fault() {  # run_check_fault NAME MPI BOOTSTRAP RANK PHASE
  local name=$1 mpi=$2 bootstrap=$3 victim=$4 phase=$5 rc=0
  SRUNWAY_FAULT_KILL_RANK=$victim SRUNWAY_FAULT_KILL_PHASE=$phase timeout 90 srun --mpi="$mpi" -N2 -n4 --time=2 -l \
      "$launch" --bootstrap="$bootstrap" --check --timeout 10 >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  ((rc != 0)) || fail "$name: the step succeeded"
  ((rc != 124)) || fail "$name: the step hung past the guard"
  grep srunway-launch "$work/$name.err" || true
  # Slurm's block distribution of 4 tasks on 2 nodes puts ranks 0-2 on node1 and rank 3 on node2.
  local r victim_node=$((victim == 3 ? 2 : 1))
  for r in 0 1 2 3; do
    [[ $r -eq $victim ]] && continue
    expect_eq "$name: lines of rank $r" "$(grep -c "^ *$r: srunway-launch: rank $r on node[12]: rank $victim on node$victim_node died during $phase$" "$work/$name.err")" 1
  done
}

echo "== pmix, rank 3 killed inside the first collective (an MPI all-reduce)"
run_check_fault pmix-collective pmix pmix 3 "first collective"
echo "== slurm bootstrap, rank 3 killed during the id broadcast"
run_check_fault slurm-broadcast none slurm 3 "id broadcast"
echo "== pmix, rank 0 (the watchdog's root) killed inside the first collective"
run_check_fault pmix-root pmix pmix 0 "first collective"

echo "== --comm mpi, rank 1 alive but stuck before the first collective: the others' all-reduce gives up"
# MPI cannot abandon the call: past --timeout each waiting rank ends from the deadline's thread, as a failure (exit 3
# and the watchdog's word to the others, so the stuck rank ends too), not with a bare exit 1 that reads to the
# others as a death.
rc=0
SRUNWAY_FAULT_STALL_RANK=1 SRUNWAY_FAULT_STALL_PHASE="first collective" timeout 90 srun --mpi=pmix -N2 -n4 --time=2 -l \
  "$launch" --check --comm mpi --timeout 5 >"$work/mpi-stuck.out" 2>"$work/mpi-stuck.err" || rc=$?
((rc != 0 && rc != 124)) || fail "mpi-stuck: exit $rc"
grep srunway-launch "$work/mpi-stuck.err" || true
for r in 0 1 2 3; do
  pattern="^ *$r: srunway-launch: rank $r on node[12]: (rank [0-3] on node[12] failed: )?first collective: "
  expect_eq "mpi-stuck: lines of rank $r" \
    "$(grep -cE "${pattern}MPI_Allreduce did not finish within 5 s" "$work/mpi-stuck.err")" 1
done
! grep -q "died during" "$work/mpi-stuck.err" || fail "mpi-stuck: a rank was reported dead: $(cat "$work/mpi-stuck.err")"
echo "ok"
