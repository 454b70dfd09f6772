#!/usr/bin/env bash
# Benchmark: `srun -N2 -n16 true` without and with the SPANK plugin (topology from a fixture), interleaved in
# one run; prints each median and their ratio (goal: at most 1.05). Asserts nothing about time.
source "$(dirname "$0")/../slurm/lib.sh"
require_cluster
plugin=${SRUNWAY_SPANK_PLUGIN:?SRUNWAY_SPANK_PLUGIN must name srunway.so}
fixture=$kSourceRoot/tests/fixtures/topology/local-2cpu.xml
rounds=${SRUNWAY_BENCH_ROUNDS:-15}

# time_srun: wall milliseconds of one `srun -N2 -n16 --gpus-per-task=1 true`.
time_srun() {
  local start end
  start=$(date +%s%N)
  srun -N2 -n16 --gpus-per-task=1 --time=2 true || fail "srun failed"
  end=$(date +%s%N)
  echo $(((end - start) / 1000000))
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

without=() with=()
use_plugstack "# no plugins"
time_srun >/dev/null  # warm-up
for ((i = 0; i < rounds; i++)); do
  use_plugstack "# no plugins"
  without+=("$(time_srun)")
  use_plugstack "required $plugin topology_xml=$fixture"
  with+=("$(time_srun)")
done
m_without=$(printf '%s\n' "${without[@]}" | median)
m_with=$(printf '%s\n' "${with[@]}" | median)
ratio=$(awk -v a="$m_with" -v b="$m_without" 'BEGIN {printf "%.3f", a / b}')
echo "srun -N2 -n16 true over $rounds rounds: without plugin median ${m_without} ms, with plugin ${m_with} ms"
echo "ratio with/without: $ratio (goal <= 1.05)"
