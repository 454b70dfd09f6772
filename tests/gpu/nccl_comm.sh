#!/usr/bin/env bash
# GPU suite: the NCCL communicator on this machine's GPU. Every Comm operation over NCCL (one rank: NCCL refuses
# two ranks on one GPU), srunway-launch --check and srunway-collbench over NCCL with every collective checked, and
# the failure paths that one GPU can show: two ranks given the same GPU, and a rank that never joins
# communicator init (the other's ncclCommInitRankConfig must end at --timeout, aborted, with one line).
# Exits 77 (skip) without a GPU, a CUDA driver or a libnccl that can be opened at all (SRUNWAY_NCCL_LIBRARY, the
# linker's search path, the CUDA install, a Python wheel's nvidia/*/lib); an NCCL that opens but is too old fails.
set -euo pipefail
comm_ops=${COMM_OPS:?COMM_OPS must name comm_ops}
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
collbench=${SRUNWAY_COLLBENCH:?SRUNWAY_COLLBENCH must name srunway-collbench}
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset SLURM_PROCID SLURM_JOB_ID PMIX_RANK RANK WORLD_SIZE  # one rank, outside any job

if ! out=$("$launch" --check --comm nccl 2>&1); then
  # Only an absent driver, GPU or NCCL is a skip: an NCCL that loads but is too old, or any other failure of a
  # GPU node, fails the suite.
  if grep -qE 'no CUDA driver|no GPU visible|cannot load libnccl' <<<"$out"; then echo "SKIP: $out"; exit 77; fi
  fail "srunway-launch --check --comm nccl: $out"
fi
echo "$out"
grep -q 'communicator nccl$' <<<"$out" || fail "--check did not use NCCL"
grep -q '^all-reduce: ok$' <<<"$out" && grep -q '^all-gather: ok$' <<<"$out" || fail "--check found wrong values"
for phase in "id broadcast" "communicator init" split "first collective"; do
  grep -qE "^$phase +[0-9.]+ +[0-9.]+  rank 0 on " <<<"$out" || fail "no row for $phase"
done
# auto picks NCCL where the rank has a GPU.
# (Output read whole: under pipefail, `| grep -q` can fail on the writer's broken pipe after a match.)
auto_out=$("$launch" --check) || fail "--check with --comm auto failed: $auto_out"
grep -q 'communicator nccl$' <<<"$auto_out" || fail "--comm auto did not pick NCCL on a GPU"

echo "== every operation and type over NCCL"
"$comm_ops" nccl | tee "$work/ops.txt"
grep -qE '^comm ops \(nccl\): 1 ranks, [0-9]+ checks per rank, 0 failures$' "$work/ops.txt" || fail "comm_ops"

echo "== collbench over NCCL, every collective checked"
for test in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  "$collbench" --comm nccl "$test" -b 8 -e 64M -f 4 -c 1 -w 2 -n 5 -d float >"$work/$test.txt" ||
    fail "collbench $test: $(cat "$work/$test.txt")"
  grep -qE '^# +Rank +0 .* device +0 \[[0-9a-fA-F:.]+\] NVIDIA' "$work/$test.txt" || fail "$test: no GPU device line: $(head -20 "$work/$test.txt")"
  grep -q '^# Out of bounds values : 0 OK$' "$work/$test.txt" || fail "$test: wrong values: $(cat "$work/$test.txt")"
done
cat "$work/all_gather.txt"
# -J in nccl-tests' layout, with the loaded NCCL's version code and the GPU's bus id; -z 1 waits per operation.
"$collbench" --comm nccl all_reduce -b 1M -e 4M -f 2 -c 1 -z 1 -J "$work/all_reduce.json" >"$work/z.txt" ||
  fail "collbench -z 1 -J: $(cat "$work/z.txt")"
python3 - "$work/all_reduce.json" <<'PY' || fail "-J: $(cat "$work/all_reduce.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert isinstance(j["nccl_version"], int) and j["nccl_version"] >= 21400, j["nccl_version"]
assert j["config"]["blocking_collectives"] == "true", j["config"]
assert j["config"]["devices"][0]["device_info"].startswith("NVIDIA"), j["config"]["devices"]
assert j["out_of_bounds"]["okay"] == "true" and len(j["results"]) == 3, j
PY
for type in half bfloat16 int32 int64 uint8; do
  "$collbench" --comm nccl all_reduce -b 1K -e 1M -f 32 -c 1 -d "$type" -o max >"$work/t.txt" || fail "collbench -d $type"
  grep -q '^# Out of bounds values : 0 OK$' "$work/t.txt" || fail "-d $type: wrong values"
done

# Two ranks through the torchrun-style environment on one host.
two_ranks() {  # two_ranks NAME RANK1-ENV...: rank 0 and rank 1 of --check --comm nccl --timeout 5
  local name=$1; shift
  local port=$((29000 + RANDOM % 1000))
  env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$launch" --bootstrap=env --check \
    --comm nccl --timeout 5 >"$work/$name.0" 2>&1 &
  local first=$!
  env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" timeout 60 "$launch" --bootstrap=env \
    --check --comm nccl --timeout 5 >"$work/$name.1" 2>&1 &
  local second=$!
  local rc0=0 rc1=0
  wait "$first" || rc0=$?
  wait "$second" || rc1=$?
  echo "$rc0 $rc1"
}

echo "== two ranks on one GPU: refused with one line on each rank"
codes=$(two_ranks shared)
cat "$work/shared.0" "$work/shared.1"
[[ $codes == "4 4" ]] || fail "two ranks on one GPU: exit codes $codes, want 4 4"
for r in 0 1; do
  grep -q "^srunway-launch: rank $r on .*: communicator init: rank 0 on .* and rank 1 would share GPU .*: NCCL needs one GPU per rank" \
    "$work/shared.$r" || fail "rank $r: no clear line: $(cat "$work/shared.$r")"
done

echo "== rank 1 never joins communicator init: rank 0's init ends at --timeout, aborted"
start=$(date +%s)
codes=$(two_ranks stall SLURMD_NODENAME=elsewhere SRUNWAY_FAULT_STALL_RANK=1 SRUNWAY_FAULT_STALL_PHASE="communicator init")
took=$(( $(date +%s) - start ))
cat "$work/stall.0" "$work/stall.1"
[[ ${codes%% *} == 4 ]] || fail "rank 0 exited $codes, want 4"
# Told by rank 0 that the communicator could not be built, rank 1 exits as rank 0 does (4): both ranks' codes say
# what failed, whichever rank saw it first.
[[ ${codes##* } == 4 ]] || fail "rank 1 exited ${codes##* }, want 4 (told by rank 0; 124 means left hanging)"
grep -q "^srunway-launch: rank 0 on .*: communicator init: ncclCommInitRankConfig did not finish within 5 s" \
  "$work/stall.0" || fail "rank 0 did not say what timed out"
grep -q "^srunway-launch: rank 1 on elsewhere: rank 0 on .* failed: communicator init: ncclCommInitRankConfig did not finish" \
  "$work/stall.1" || fail "rank 1 did not say why it ended"
echo "both ranks gone after ${took} s"
echo "ok"
