#!/usr/bin/env bash
# Benchmark: all_reduce bus bandwidth of srunway-collbench (over the launcher's MPI Comm) against a plain
# MPI_Allreduce loop on the same 2 ranks, one per node, interleaved in one run; both in place, float sum,
# nccl-tests' timing (mean over ranks) and busbw formula. Prints each size's pair and the ratio at the largest
# (goal: within 2%). Both end in the blocking MPI_Allreduce (collbench's Comm runs MPI's blocking collectives on
# CPU ranks; waiting for MPI_Iallreduce at once measured 0.72x, since Open MPI gives the non-blocking call other
# algorithms), so what remains is collbench's own cost. One rank per node and 15 rounds of 1-16 MB: on the 2-CPU
# machine 8 ranks made the figures swing by half, and single sizes still swing by 10-30% from run to run.
# Asserts nothing about time.
source "$(dirname "$0")/../slurm/lib.sh"
require_cluster
collbench=${SRUNWAY_COLLBENCH:?} peer=${MPI_ALLREDUCE_LOOP:?}
rounds=${SRUNWAY_BENCH_ROUNDS:-15}
min=$((1 << 20)) max=$((16 << 20)) iters=50 warmup=5
work=$(mktemp -d)
at_exit "rm -rf '$work'"

for ((r = 0; r < rounds; r++)); do
  # The JSON output keeps full precision (the table prints two decimals).
  srun --mpi=pmix -N2 -n2 "$collbench" all_reduce -b "$min" -e "$max" -f 4 -n "$iters" -w "$warmup" -c 0 \
    -J "$work/round.json" >/dev/null 2>&1 || fail "collbench failed"
  python3 -c "import json,sys; [print(r['size'], r['in_place']['bus_bw']) for r in json.load(open(sys.argv[1]))['results']]" \
    "$work/round.json" >>"$work/collbench"
  srun --mpi=pmix -N2 -n2 "$peer" "$min" "$max" 4 "$iters" "$warmup" 2>/dev/null >>"$work/mpi"
done
median_of() { awk -v s="$1" '$1 == s {print $2}' "$2" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo "all_reduce, 2 ranks on 2 nodes, in place, median busbw (GB/s) of $rounds rounds:"
printf '%12s %12s %12s %8s\n' size collbench MPI ratio
for size in $(awk '{print $1}' "$work/mpi" | sort -n | uniq); do
  ours=$(median_of "$size" "$work/collbench") theirs=$(median_of "$size" "$work/mpi")
  printf '%12s %12.4f %12.4f %8s\n' "$size" "$ours" "$theirs" "$(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.3f", a / b}')"
done
echo "ratio at the largest size is collbench/MPI (goal: 0.98-1.02)"
