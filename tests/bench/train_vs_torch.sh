#!/usr/bin/env bash
# Benchmark: training throughput (tokens/s) of srunway-train against PyTorch on the CPU, in one run: the same
# small GPT, batch, sequence length, thread count and BLAS (both use the system OpenBLAS; PyTorch through the
# libblas.so.3 alternative, which this prints). Median of the timed steps, first steps excluded on both sides.
# Asserts nothing about time.
set -euo pipefail
train=${SRUNWAY_TRAIN:?} threads=${SRUNWAY_BENCH_THREADS:-$(nproc)} steps=${SRUNWAY_BENCH_STEPS:-20}
read -r layers hidden heads seq vocab batch <<<"${SRUNWAY_BENCH_MODEL:-4 256 4 256 8192 8}"

blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
metrics=$(mktemp)
trap 'rm -f "$metrics"' EXIT
"$train" --preset gpt-tiny --num-layers "$layers" --hidden-size "$hidden" --num-attention-heads "$heads" \
  --ffn-hidden-size $((4 * hidden)) --max-position-embeddings "$seq" --vocab-size "$vocab" \
  --micro-batch-size "$batch" --mock-data --train-steps "$steps" --log-interval 1 --threads "$threads" \
  --peak-tflops 1 --metrics-file "$metrics" >/dev/null 2>&1
ours=$(/usr/bin/python3 -c "
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][2:]
print(f'{statistics.median(r[\"tokens_per_s\"] for r in rows):.1f}')" "$metrics")
torch_line=$(/usr/bin/python3 "$(dirname "$0")/torch_train.py" "$layers" "$hidden" "$heads" "$seq" "$vocab" "$batch" \
  "$steps" "$threads")
theirs=${torch_line#tokens_per_s=}
echo "GPT ${layers} layers x ${hidden} hidden, ${heads} heads, seq ${seq}, vocab ${vocab}, batch ${batch}, ${threads} threads, ${steps} steps"
echo "BLAS: srunway-train links OpenBLAS; PyTorch uses libblas.so.3 -> ${blas}"
echo "  srunway-train  ${ours} tokens/s"
echo "  PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')  ${theirs} tokens/s"
echo "  ratio srunway/PyTorch = $(awk -v a="$ours" -v b="$theirs" 'BEGIN {printf "%.2f", a / b}') (goal >= 1.0)"
