#!/usr/bin/env bash
# 16 ranks on the two nodes pass 40 barriers and all-gathers, over PMIx and over the Slurm environment + TCP, and
# no rank is let through a round before every rank has reached it (barrier_order.cc checks it through files).
# Slurm 22.05's tree fence failed this on the local cluster in every run; blueprints/local/local.yaml asks for the
# ring fence instead.
source "$(dirname "$0")/lib.sh"
require_cluster
program=${BARRIER_ORDER:?BARRIER_ORDER must name the barrier_order program}
for bootstrap in pmix slurm; do
  witness=$(mktemp -d -p /dev/shm srunway-barrier.XXXXXX)
  chmod 777 "$witness"
  rc=0
  out=$(timeout 120 srun --quiet --mpi=pmix -N2 -n16 --time=2 "$program" "$witness" 40 "$bootstrap" 2>&1) || rc=$?
  rm -rf "$witness"
  [[ $rc -eq 0 ]] || fail "$bootstrap: ranks passed a round early (exit $rc): $(head -5 <<<"$out")"
  expect_eq "$bootstrap summary" "$out" "barrier order ok: 40 rounds, 16 ranks on 2 nodes"
done
echo "ok"
