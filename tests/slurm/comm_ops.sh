#!/usr/bin/env bash
# Every Comm operation and data type over 4 MPI ranks on both nodes, blocking and non-blocking.
source "$(dirname "$0")/lib.sh"
require_cluster
out=$(timeout 180 srun --mpi=pmix -N2 -n4 --time=3 "$COMM_OPS") || fail "comm_ops failed: $out"
echo "$out"
expect_eq "summary" "$out" "comm ops: 4 ranks, 108 checks per rank, 0 failures"
