#!/usr/bin/env bash
# 16 ranks across both nodes exchange their identity through PMIx put/commit/fence/get.
source "$(dirname "$0")/lib.sh"
require_cluster
out=$(srun --mpi=pmix -N2 -n16 --time=2 "$PMIX_EXCHANGE") || fail "srun pmix_exchange failed: $out"
echo "$out"
expect_eq "summary" "$out" "pmix exchange ok: 16 ranks on 2 nodes: node1:8 node2:8"
