#!/usr/bin/env bash
# srunway-launch --check --comm nccl with two ranks on this host (torchrun's environment), against the stand-in
# CUDA driver and NCCL (fake_gpu.cc), which give every rank the same GPU: the failures that end communicator init
# end both ranks with exit 4 and one line each, the rank that saw the failure and the rank it told alike, however
# slowly the line is written (slow_stderr.cc).
#   nccl_check_cli.sh SRUNWAY_LAUNCH FAKE_LIBRARY_DIR
set -euo pipefail
launch=${1:?usage: nccl_check_cli.sh SRUNWAY_LAUNCH FAKE_LIBRARY_DIR} fakes=${2:?}
export SRUNWAY_CUDA_DRIVER=$fakes/libcuda.so.1 SRUNWAY_NCCL_LIBRARY=$fakes/libnccl.so.2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

two_ranks() {  # two_ranks NAME RANK0-ENV -- RANK1-ENV: the exit codes of rank 0 and rank 1, each output in NAME.R
  local name=$1 port rank0=() rank1=()
  port=$(python3 "$(dirname "$0")/../../free_port.py")
  shift
  while [[ $1 != -- ]]; do rank0+=("$1"); shift; done
  shift
  rank1=("$@")
  env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${rank0[@]}" timeout 60 "$launch" \
    --bootstrap=env --check --comm nccl --timeout 2 >"$work/$name.0" 2>&1 &
  local first=$!
  env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "${rank1[@]}" timeout 60 "$launch" \
    --bootstrap=env --check --comm nccl --timeout 2 >"$work/$name.1" 2>&1 &
  local second=$! rc0=0 rc1=0
  wait "$first" || rc0=$?
  wait "$second" || rc1=$?
  echo "$rc0 $rc1"
}

echo "== two ranks on one GPU: refused on each rank"
codes=$(two_ranks shared --)
cat "$work/shared.0" "$work/shared.1"
[[ $codes == "4 4" ]] || fail "two ranks on one GPU: exit codes $codes, want 4 4"
for r in 0 1; do
  grep -q "^srunway-launch: rank $r on .*: communicator init: rank 0 on .* and rank 1 would share GPU .*: NCCL needs one GPU per rank" \
    "$work/shared.$r" || fail "rank $r: no clear line: $(cat "$work/shared.$r")"
  (($(wc -l <"$work/shared.$r") == 1)) || fail "rank $r: more than one line"
done

echo "== rank 1 slow to write its line, told of rank 0's failure meanwhile: the line still comes out"
# Rank 1's main thread has taken the one line it may print when rank 0's abort reaches its watchdog thread, which
# ends the process: that end must wait for the line.
codes=$(two_ranks slow -- LD_PRELOAD="$fakes/libslow_stderr.so" SLOW_STDERR_MS=1000)
cat "$work/slow.1"
[[ $codes == "4 4" ]] || fail "slow stderr: exit codes $codes, want 4 4"
grep -q "^srunway-launch: rank 1 on .*: communicator init: rank 0 on .* and rank 1 would share GPU .*: NCCL needs" \
  "$work/slow.1" || fail "rank 1 ended with its line unwritten: $(cat "$work/slow.1")"
(($(wc -l <"$work/slow.1") == 1)) || fail "rank 1: more than one line: $(cat "$work/slow.1")"

echo "== rank 1's stderr stalled for good: told of rank 0's failure, it still ends, without its line"
# The watchdog thread waits for the main thread's line two seconds at most; waiting for good would leave the rank
# hanging until timeout's 60 s (exit 124).
codes=$(two_ranks stalled -- LD_PRELOAD="$fakes/libslow_stderr.so" SLOW_STDERR_MS=100000)
[[ $codes == "4 4" ]] || fail "stalled stderr: exit codes $codes, want 4 4 (124: left hanging)"

echo "== rank 1 told of rank 0's failure while stuck elsewhere, its stderr stalled for good: it still ends"
# The watchdog thread is the first to write a line here, and the write never ends: it gives up after two seconds
# and ends the process. It wrote with no time limit until 2026-12-05, and the rank hung until timeout's 60 s; the
# same could happen in the case above when rank 0's abort came before rank 1's own failure (seen once, on a busy
# machine), with the main thread then waiting for the watchdog thread to end.
codes=$(two_ranks told FAKE_NCCL_INIT_NEVER_FINISHES=1 -- SLURMD_NODENAME=elsewhere SRUNWAY_FAULT_STALL_RANK=1 \
  SRUNWAY_FAULT_STALL_PHASE="communicator init" LD_PRELOAD="$fakes/libslow_stderr.so" SLOW_STDERR_MS=100000)
[[ $codes == "4 4" ]] || fail "told while stuck, stderr stalled: exit codes $codes, want 4 4 (124: left hanging)"

echo "== SRUNWAY_NCCL_RANKS_PER_ID that is not a count: one line on each rank, before any NCCL call"
codes=$(two_ranks per_id SRUNWAY_NCCL_RANKS_PER_ID=abc -- SRUNWAY_NCCL_RANKS_PER_ID=abc)
[[ $codes == "4 4" ]] || fail "SRUNWAY_NCCL_RANKS_PER_ID=abc: exit codes $codes, want 4 4"
for r in 0 1; do
  grep -q "^srunway-launch: rank $r on .*: SRUNWAY_NCCL_RANKS_PER_ID='abc' is not an integer" "$work/per_id.$r" ||
    fail "rank $r: no clear line: $(cat "$work/per_id.$r")"
  (($(wc -l <"$work/per_id.$r") == 1)) || fail "rank $r: more than one line: $(cat "$work/per_id.$r")"
done

echo "== rank 0's communicator init never finishes, rank 1 stuck before its own: rank 0 times out and tells rank 1"
codes=$(two_ranks stall FAKE_NCCL_INIT_NEVER_FINISHES=1 -- SLURMD_NODENAME=elsewhere SRUNWAY_FAULT_STALL_RANK=1 \
  SRUNWAY_FAULT_STALL_PHASE="communicator init")
cat "$work/stall.0" "$work/stall.1"
[[ ${codes%% *} == 4 ]] || fail "rank 0 exited ${codes%% *}, want 4"
[[ ${codes##* } == 4 ]] || fail "rank 1 exited ${codes##* }, want 4 like rank 0 (told by it; 124 means left hanging)"
grep -q "^srunway-launch: rank 0 on .*: communicator init: ncclCommInitRankConfig did not finish within 2 s" \
  "$work/stall.0" || fail "rank 0 did not say what timed out"
grep -q "^srunway-launch: rank 1 on elsewhere: rank 0 on .* failed: communicator init: ncclCommInitRankConfig did not finish" \
  "$work/stall.1" || fail "rank 1 did not say why it ended"
echo "ok"
