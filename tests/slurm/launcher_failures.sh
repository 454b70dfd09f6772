#!/usr/bin/env bash
# A rank killed during the bootstrap, or one that never joins: every other rank exits with one line naming
# what happened, within its --timeout (the outer `timeout` only guards against a hang).
source "$(dirname "$0")/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
work=$(mktemp -d)
at_exit "rm -rf '$work'"

run_failing() {  # run_failing NAME MPI BOOTSTRAP BEHAVIOUR: rank 3 of 4 misbehaves
  local name=$1 mpi=$2 bootstrap=$3 behaviour=$4
  if timeout 90 srun --mpi="$mpi" -N2 -n4 --time=2 -l bash -c \
      "if [ \$SLURM_PROCID = 3 ]; then $behaviour; fi; exec $launch --bootstrap=$bootstrap --timeout 5 -- true" \
      >"$work/$name.out" 2>"$work/$name.err"; then
    fail "$name: the step succeeded"
  fi
  [[ $? -ne 124 ]] || fail "$name: the step hung past the guard"
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

echo "== pmix bootstrap, rank 3 sleeps instead of joining the fence"
run_failing pmix-sleep pmix pmix 'sleep 30'
for r in 0 1 2; do
  grep -q "^ *$r: srunway-launch: rank $r on node[12]: init did not complete within 5 s" "$work/pmix-sleep.err" ||
    fail "rank $r printed no line"
done

echo "== pmix bootstrap, rank 3 killed during the fence"
run_failing pmix-kill pmix pmix 'kill -9 $$'
lines=$(grep -c "srunway-launch: rank [0-2] on node[12]: init did not complete within 5 s" "$work/pmix-kill.err" || true)
expect_eq "surviving ranks that explained" "$lines" 3
echo "ok"
