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

# The -J file has nccl-tests' own layout (its src/util.cu), so tools written for nccl-tests read it.
python3 - "$workdir/all_reduce.json" <<'PY' || fail "all_reduce.json is not in nccl-tests' layout: $(cat "$workdir/all_reduce.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["version"] == 1 and j["config"]["step_factor"] == 4 and j["config"]["validation"] == 1, j["config"]
assert j["config"]["blocking_collectives"] in ("true", "false") and j["nccl_version"] is None
devices = j["config"]["devices"]
assert [d["rank"] for d in devices] == [0, 1, 2, 3], devices
assert {d["hostname"] for d in devices} == {"node1", "node2"} and devices[0]["device_hex"] == "cpu", devices
row = j["results"][-1]
assert row["size"] == 65536 and row["root"] == "    -1" and row["actual_iterations"] == 3, row
assert row["out_of_place"]["nwrong"] == 0 and row["in_place"]["bus_bw"] > 0, row
assert j["out_of_bounds"] == {"count": 0, "okay": "true"}, j["out_of_bounds"]
assert j["average_bus_bandwidth"]["okay"] == "unchecked" and j["average_bus_bandwidth"]["bandwidth"] > 0
assert "all_reduce" in j["args"] and all(e.split("=")[0].startswith(("NCCL_", "CUDA_", "SLURM_", "SRUNWAY_", "OMPI_", "PMIX_")) for e in j["env"])
assert j["start_time"] <= j["end_time"], (j["start_time"], j["end_time"])
PY
echo "ok: collbench -J writes nccl-tests' JSON layout"

# Halves that collbench does not run (in place for reduce_scatter, alltoall, sendrecv) are N/A throughout, #wrong
# included, as nccl-tests prints a check that did not happen; the out-of-place half is still checked.
for test in reduce_scatter alltoall sendrecv; do
  python3 - "$workdir/$test.json" <<'PY' || fail "$test: the in-place half that did not run is not N/A: $(cat "$workdir/$test.json")"
import json, sys
for row in json.load(open(sys.argv[1]))["results"]:
    assert row["in_place"] == {"time": None, "alg_bw": None, "bus_bw": None, "nwrong": None}, row
    assert row["out_of_place"]["nwrong"] == 0, row
PY
  awk '/^ *[0-9]/ && $NF != "N/A" {bad = 1} END {exit bad}' "$workdir/$test.log" ||
    fail "$test: a text row's in-place #wrong is not N/A: $(cat "$workdir/$test.log")"
done
echo "ok: in-place halves not run are N/A, not '#wrong 0'"

# NCCL_TESTS_MIN_BW as nccl-tests applies it (the average passes at 90% of it): a tenth of the average measured
# above passes; a thousand times it fails with exit code 1 and "FAILED" after the average.
average=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['average_bus_bandwidth']['bandwidth'])" "$workdir/all_reduce.json")
NCCL_TESTS_MIN_BW=$(awk -v a="$average" 'BEGIN {print a / 10}') srun --mpi=pmix -N2 -n4 "$collbench" all_reduce -b 1K -e 64K -f 4 -n 3 -w 1 \
  >"$workdir/min_bw.log" 2>&1 || fail "a tenth of the average failed: $(cat "$workdir/min_bw.log")"
grep -q "Avg bus bandwidth.* OK$" "$workdir/min_bw.log" || fail "$(cat "$workdir/min_bw.log")"
rc=0
NCCL_TESTS_MIN_BW=$(awk -v a="$average" 'BEGIN {print a * 1000}') srun --mpi=pmix -N2 -n4 "$collbench" all_reduce -b 1K -e 64K -f 4 -n 3 -w 1 \
  >"$workdir/min_bw.log" 2>&1 || rc=$?
expect_eq "exit code below NCCL_TESTS_MIN_BW" "$rc" 1
grep -q "Avg bus bandwidth.* FAILED$" "$workdir/min_bw.log" || fail "$(cat "$workdir/min_bw.log")"
echo "ok: NCCL_TESTS_MIN_BW passes and fails as in nccl-tests"

rc=0
srun --mpi=pmix -N1 -n1 "$collbench" all_reduce -d double >"$workdir/bad.log" 2>&1 || rc=$?
expect_eq "exit code of -d double" "$rc" 2
grep -q "not a supported type" "$workdir/bad.log" || fail "$(cat "$workdir/bad.log")"
