#!/usr/bin/env bash
# scripts/examples/gpt3-5b.sbatch scaled down as its header says (same flags, the tiny preset, 2 nodes x 2 CPU
# ranks): the job completes its 10 steps data-parallel over both nodes, with NeMo's warmup (lr 0 at the first
# step, 1.6e-4 x 9 / 115 at the tenth) and the optimizer state sharded (ZeRO-1, NeMo's distributed_fused_adam); and
# the recipe itself, planned by --dry-run for its 8 nodes x 8 GPUs with NeMo's micro-batches of 4, fits an 80 GB
# GPU (ZeRO-1 shards the fp32 parameters and the moments).
source "$(dirname "$0")/lib.sh"
require_cluster
export SRUNWAY_TRAIN=${SRUNWAY_TRAIN:?} SRUNWAY_LAUNCH=${SRUNWAY_LAUNCH:?}
work=$(mktemp -d)
at_exit "rm -rf '$work'"
out=$(sbatch --wait --parsable -N2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 --time=10 \
  --output="$work/job.out" "$kSourceRoot/scripts/examples/gpt3-5b.sbatch" --preset gpt-tiny --seq-length 64 \
  --micro-batch-size 2 --global-batch-size 16 --metrics-file "$work/metrics.jsonl" 2>&1) ||
  fail "job: $out: $(cat "$work/job.out")"
log=$(cat "$work/job.out")
grep -q "batch 16 x 64 tokens = 4 ranks x 2 micro-batches of 2" <<<"$log" || fail "$log"
grep -q "optimizer state .* per rank (ZeRO-1: 1/4 of it)" <<<"$log" || fail "no ZeRO-1: $log"
expect_eq "step lines" "$(grep -c '^step' <<<"$log")" 10
python3 - "$work/metrics.jsonl" <<'PY' || fail "metrics: $(cat "$work/metrics.jsonl")"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == list(range(1, 11))
assert rows[0]["lr"] == 0.0 and abs(rows[9]["lr"] - 1.6e-4 * 9 / 115) < 1e-9, (rows[0]["lr"], rows[9]["lr"])
assert all(math.isfinite(r["loss"]) for r in rows)
PY
out=$(sbatch --wait --parsable -N1 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=1 --time=5 \
  --output="$work/plan.out" "$kSourceRoot/scripts/examples/gpt3-5b.sbatch" --dry-run --nodes 8 --gpus-per-node 8 \
  2>&1) || fail "dry run: $out: $(cat "$work/plan.out")"
plan=$(cat "$work/plan.out")
grep -q "5047558144 parameters" <<<"$plan" || fail "not the 5B model: $plan"
grep -q "64 GPUs (8 nodes x 8); micro-batch 4, 8 accumulation steps per GPU, global batch 2048" <<<"$plan" ||
  fail "not the recipe's layout: $plan"
grep -Eq "^  total .* fits in 80 GB" <<<"$plan" || fail "the recipe does not fit an 80 GB GPU: $plan"
echo "ok: the 5B recipe scaled down: 10 steps on 2 nodes x 2 ranks with NeMo's warmup and ZeRO-1; the full recipe's plan fits 80 GB per GPU"
