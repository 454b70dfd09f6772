#!/usr/bin/env bash
# An Open MPI program over 16 ranks on both nodes, started by srun --mpi=pmix without mpirun.
source "$(dirname "$0")/lib.sh"
require_cluster
out=$(srun --mpi=pmix -N2 -n16 --time=2 "$MPI_ALLREDUCE") || fail "srun mpi_allreduce failed: $out"
echo "$out"
expect_eq "summary" "$out" "mpi allreduce ok: 16 ranks, sum 120"
