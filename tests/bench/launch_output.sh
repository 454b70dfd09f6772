#!/usr/bin/env bash
# Benchmark: a program that prints 64 MB (lines of 100 bytes) as one rank on node1, in one run, interleaved: bare
# `srun` (its output to a file, as sbatch's); srunway-launch --log-dir (the program's output comes through the
# launcher into DIR/rank_0.out); and --log-dir --tee (into the log and the step's output). Until 2026-11-28 the
# launcher copied 16 KiB per 100 ms tick: --tee held such a program to 160 KB/s (20 MB took 123 s).
# Prints medians and ratios; asserts nothing about time, only that every byte arrived.
source "$(dirname "$0")/../slurm/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?}
rounds=${SRUNWAY_BENCH_ROUNDS:-5}
work=$(mktemp -d)
at_exit "rm -rf '$work'"
program='head -c 64000000 /dev/zero | tr "\0" x | fold -w 99'
bytes=64646464

# run_ms OUTPUT CHECKED -- COMMAND...: the wall time of COMMAND in ms, its stdout in OUTPUT; CHECKED must then
# hold every byte.
run_ms() {
  local output=$1 checked=$2 start end
  shift 3
  start=$(date +%s%N)
  "$@" >"$output" || fail "failed: $*"
  end=$(date +%s%N)
  [[ $(stat -c %s "$checked") == "$bytes" ]] || fail "$*: $checked holds $(stat -c %s "$checked") of $bytes bytes"
  echo $(((end - start) / 1000000))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

declare -a bare logged teed
run_ms "$work/bare.out" "$work/bare.out" -- srun -n1 -w node1 bash -c "$program" >/dev/null  # warm-up
for ((i = 0; i < rounds; i++)); do
  bare+=("$(run_ms "$work/bare.out" "$work/bare.out" -- srun -n1 -w node1 bash -c "$program")")
  logged+=("$(run_ms /dev/null "$work/log/rank_0.out" -- \
    srun -n1 -w node1 "$launch" --log-dir "$work/log" -- bash -c "$program")")
  teed+=("$(run_ms "$work/tee.out" "$work/tee/rank_0.out" -- \
    srun -n1 -w node1 "$launch" --log-dir "$work/tee" --tee -- bash -c "$program")")
  cmp -s "$work/tee.out" "$work/tee/rank_0.out" || fail "--tee printed other bytes than it logged"
done
m_bare=$(printf '%s\n' "${bare[@]}" | median)
m_logged=$(printf '%s\n' "${logged[@]}" | median)
m_teed=$(printf '%s\n' "${teed[@]}" | median)
mb_s() { awk -v ms="$1" -v b="$bytes" 'BEGIN {printf "%.0f MB/s", b / 1e3 / ms}'; }
echo "a program printing $((bytes / 1000000)) MB on one rank ($(nproc) CPUs), median of $rounds rounds:"
echo "  srun (to a file)                     ${m_bare} ms  $(mb_s "$m_bare")"
echo "  srun srunway-launch --log-dir        ${m_logged} ms  $(mb_s "$m_logged")  (x$(ratio "$m_logged" "$m_bare") bare srun)"
echo "  srun srunway-launch --log-dir --tee  ${m_teed} ms  $(mb_s "$m_teed")  (x$(ratio "$m_teed" "$m_bare") bare srun)"
