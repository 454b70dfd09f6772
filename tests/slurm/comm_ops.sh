#!/usr/bin/env bash
# Every Comm operation and data type over MPI ranks on both nodes, blocking and non-blocking, in and out of
# place, and the intra-/inter-node splits: 4 ranks (3 on node1, 1 on node2) and 16.
source "$(dirname "$0")/lib.sh"
require_cluster
out=$(timeout 180 srun --mpi=pmix -N2 -n4 --time=3 "$COMM_OPS" mpi) || fail "comm_ops failed: $out"
echo "$out"
expect_eq "summary" "$out" "comm ops (mpi): 4 ranks, 190 checks per rank, 0 failures"
out=$(timeout 180 srun --mpi=pmix -N2 -n16 --time=3 "$COMM_OPS" mpi) || fail "comm_ops over 16 ranks failed: $out"
echo "$out"
expect_eq "summary" "$out" "comm ops (mpi): 16 ranks, 190 checks per rank, 0 failures"
