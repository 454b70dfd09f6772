#!/usr/bin/env bash
# srunway-collbench over MPI on CPU ranks of both nodes: every collective checks out (-c 1, #wrong 0), its
# output is accepted by the parser (run-nccl-tests --parse) and its JSON (-J) too; reduced types work.
source "$(dirname "$0")/lib.sh"
require_cluster
collbench=${SRUNWAY_COLLBENCH:?} tool=${RUN_NCCL_TESTS:?}
workdir=$(mktemp -d)
at_exit "rm -rf '$workdir'"

for test in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  srun --mpi=pmix -N2 -n4 "$collbench" "$test" -b 1K -e 64K -f 4 -n 3 -w 1 -c 1 -J "$workdir/$test.json" \
    >"$workdir/$test.log" 2>&1 || fail "$test: $(cat "$workdir/$test.log")"
  "$tool" --parse "$workdir/$test.log" --test "$test" >"$workdir/$test.verdict" ||
    fail "$test: the parser rejects collbench's output: $(cat "$workdir/$test.verdict" "$workdir/$test.log")"
  grep -q "verdict: PASS: complete and correct" "$workdir/$test.verdict" || fail "$test: $(cat "$workdir/$test.verdict")"
  grep -q "ranks 4 on 2 nodes" "$workdir/$test.verdict" || fail "$test: $(cat "$workdir/$test.verdict")"
  "$tool" --parse "$workdir/$test.json" --test "$test" >/dev/null || fail "$test: JSON output rejected"
  echo "ok: $test: $(grep -c '^ *[0-9]' "$workdir/$test.log") sizes, no wrong values, parsed from text and JSON"
done
for type in half bfloat16 int32 int64 uint8; do
  srun --mpi=pmix -N2 -n4 "$collbench" all_reduce -d "$type" -o max -b 256 -e 4K -f 4 -n 2 -w 1 -c 1 \
    >"$workdir/type.log" 2>&1 || fail "all_reduce -d $type: $(cat "$workdir/type.log")"
  "$tool" --parse "$workdir/type.log" >/dev/null || fail "all_reduce -d $type: $(cat "$workdir/type.log")"
done
echo "ok: all_reduce max over half, bfloat16, int32, int64, uint8"

rc=0
srun --mpi=pmix -N1 -n1 "$collbench" all_reduce -d double >"$workdir/bad.log" 2>&1 || rc=$?
expect_eq "exit code of -d double" "$rc" 2
grep -q "not a supported type" "$workdir/bad.log" || fail "$(cat "$workdir/bad.log")"
