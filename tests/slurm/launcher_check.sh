#!/usr/bin/env bash
# srunway-launch --check over 16 ranks with the MPI communicator: correct collectives and a phase table.
source "$(dirname "$0")/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
out=$(timeout 120 srun --mpi=pmix -N2 -n16 --time=2 "$launch" --check --bytes 65536) || fail "--check failed: $out"
echo "$out"
grep -q '^srunway-launch --check: 16 ranks on 2 nodes, bootstrap pmix, communicator mpi$' <<<"$out" || fail "header"
grep -q '^all-reduce: ok$' <<<"$out" || fail "all-reduce not ok"
grep -q '^all-gather: ok$' <<<"$out" || fail "all-gather not ok"
# "id broadcast" is the exchange in which the ranks agree on NCCL or MPI (builds with the NCCL backend).
for phase in init fence "communicator init" split "first collective"; do
  grep -qE "^$phase +[0-9.]+ +[0-9.]+  rank [0-9]+ on node[12]$" <<<"$out" || fail "no row for $phase"
done
json=$(timeout 120 srun --mpi=pmix -N2 -n4 --time=2 "$launch" --check --json) || fail "--check --json failed"
/usr/bin/python3 - "$json" <<'PY' || fail "bad JSON: $json"
import json, sys
report = json.loads(sys.argv[1])
assert report["ranks"] == 4 and report["nodes"] == 2, report
assert report["allreduce"] == "ok" and report["allgather"] == "ok", report
phases = [p["phase"] for p in report["phases"]]
assert phases in (["init", "fence", "driver and nccl load", "id broadcast", "communicator init", "split",
                   "first collective"],
                  ["init", "fence", "communicator init", "split", "first collective"]), phases
PY
# One rank needs no MPI: the self communicator.
out=$(timeout 60 srun --mpi=none -n1 --time=2 "$launch" --bootstrap=slurm --check) || fail "1-rank check: $out"
grep -q 'communicator self' <<<"$out" || fail "1-rank check did not use self: $out"
# Bad usage: one line, exit 2.
if srun -n1 "$launch" --bootstrap=mpi --check 2>"$SRUNWAY_BUILD_ROOT/launch-err.txt"; then fail "bad backend accepted"; fi
grep -q "unknown bootstrap 'mpi' (expected auto, pmix, slurm or env)" "$SRUNWAY_BUILD_ROOT/launch-err.txt" || fail "unclear"
echo "ok"
