#!/usr/bin/env bash
# The quickstart's batch job, submitted with sbatch: 2 nodes, srun --mpi=pmix, 4 tasks per node.
source "$(dirname "$0")/lib.sh"
require_cluster
workdir=$(mktemp -d)
at_exit "rm -rf '$workdir'"
sbatch_out=$(sbatch --wait --parsable --output="$workdir/hello-%j.out" \
  "$kSourceRoot/scripts/examples/hello.sbatch" 2>&1) || {
  cat "$workdir"/hello-*.out >&2 2>/dev/null || true
  fail "sbatch --wait failed: $sbatch_out"
}
job=${sbatch_out%%;*}
log="$workdir/hello-$job.out"
[[ -s $log ]] || fail "job $job wrote no output to $log"
cat "$log"
lines=$(grep '^hello from task' "$log" || true)
expect_eq "task lines" "$(wc -l <<<"$lines")" 8
for node in node1 node2; do
  expect_eq "tasks on $node" "$(count_matching " on $node:" "$lines")" 4
done
for rank in $(seq 0 7); do
  expect_eq "lines of task $rank" "$(count_matching "^hello from task $rank of 8 \\(PMIx rank $rank\\)" "$lines")" 1
done
