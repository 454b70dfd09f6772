#!/usr/bin/env bash
# Benchmark: data-parallel srunway-train, 2 ranks (one per node, one thread each), with communication slowed by
# SRUNWAY_MPI_DELAY_MS (a link carrying one gradient bucket at a time, each taking the delay) so that reducing
# the gradients costs about half the compute (the backward, which it can hide behind, is about two thirds of it): the step time with the reduction overlapped with the backward,
# without overlap (--no-overlap-grad-reduce), and of the same per-rank work on one rank with no communication at
# all. Then tokens/s of 1, 2 and 4 ranks for one global batch, with no delay. Prints medians and ratios; asserts
# nothing about time.
source "$(dirname "$0")/../slurm/lib.sh"
require_cluster
train=${SRUNWAY_TRAIN:?}
work=$(mktemp -d)
at_exit "rm -rf '$work'"
model=(--preset gpt-tiny --num-layers 12 --hidden-size 128 --num-attention-heads 4 --ffn-hidden-size 512
       --mock-data --seq-length 64 --micro-batch-size 4 --peak-tflops 1 --log-interval 1)
steps=24

# median_ms NAME: the median step time of NAME.jsonl after the first 4 steps.
median_ms() {
  python3 -c 'import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "ms" in l]
print("%.1f" % statistics.median(r["ms"] for r in rows[4:]))' "$work/$1.jsonl"
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
train_run() {  # train_run NAME NODES TASKS_PER_NODE [FLAGS...]
  local name=$1 nodes=$2 tasks=$3
  shift 3
  srun --mpi=pmix -N "$nodes" --ntasks-per-node="$tasks" -c1 env OMP_NUM_THREADS=1 "$train" "${model[@]}" \
    --train-steps "$steps" --metrics-file "$work/$name.jsonl" "$@" >"$work/$name.log" 2>&1 ||
    fail "$name: $(cat "$work/$name.log")"
}

train_run compute 1 1 --global-batch-size 4
compute=$(median_ms compute)
buckets=48
bucket_mb=$(python3 -c "
import re; line = open('$work/compute.log').read(); m = float(re.search(r'([0-9.]+) M parameters', line).group(1))
print(f'{m * 4 / $buckets:.4f}')")
delay=$(python3 -c "print(f'{0.5 * $compute / $buckets:.2f}')")
export SRUNWAY_MPI_DELAY_MS=$delay
train_run overlap 2 1 --global-batch-size 8 --bucket-size-mb "$bucket_mb"
train_run serial 2 1 --global-batch-size 8 --bucket-size-mb "$bucket_mb" --no-overlap-grad-reduce
unset SRUNWAY_MPI_DELAY_MS
overlap=$(median_ms overlap) serial=$(median_ms serial)
echo "data parallel, 2 ranks x 1 thread, about $buckets buckets of $bucket_mb MB each delayed $delay ms (communication"
echo "about 0.5x compute), median step time of $steps steps:"
echo "  compute alone (1 rank, same work per rank)  $compute ms"
echo "  overlapped reduction                        $overlap ms  (x$(ratio "$overlap" "$compute") compute alone, goal <= 1.05)"
echo "  reduction after the backward                $serial ms  (x$(ratio "$serial" "$compute") compute alone; overlap x$(ratio "$overlap" "$serial") of it)"

echo "scaling, global batch 16, one thread per rank, no delay:"
for ranks in 1 2 4; do
  nodes=$((ranks > 1 ? 2 : 1))
  train_run "scale$ranks" "$nodes" $((ranks / nodes)) --global-batch-size 16
  ms=$(median_ms "scale$ranks")
  tokens=$(python3 -c "print(f'{16 * 64 / ($ms / 1000):.0f}')")
  [[ $ranks == 1 ]] && base=$tokens
  echo "  $ranks rank(s): $ms ms per step, $tokens tokens/s (x$(ratio "$tokens" "$base") 1 rank)"
done
