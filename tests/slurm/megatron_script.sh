#!/usr/bin/env bash
# scripts/examples/megatron-llama.sbatch, a Megatron-LM script with Megatron's own flags, as a user submits it: the
# job trains the Llama those flags describe (RMSNorm, SwiGLU, RoPE, untied output, no biases, 2 query groups) over
# 2 nodes x 2 ranks with the optimizer sharded, its vocabulary the tokenizer's padded to 128 as Megatron's, and
# completes with its validation runs, checkpoints, TensorBoard events and progress.txt; the loss falls. Its
# samples' documents (about 20 tokens each in samples of 64) train each on its own, with the tokenizer's end of
# document. Its norms' weights are stored less 1 (--apply-layernorm-1p, kept in the checkpoints) and its embeddings
# and output layer follow the schedule at 5/3 of the other rates (--decoupled-lr 5e-3 --decoupled-min-lr 5e-4
# beside --lr 3e-3 --min-lr 3e-4), over the ranks' ZeRO-1 slices.
source "$(dirname "$0")/lib.sh"
require_cluster
export SRUNWAY_TRAIN=${SRUNWAY_TRAIN:?} SRUNWAY_LAUNCH=${SRUNWAY_LAUNCH:?}
prep=${SRUNWAY_PREP:?}
work=$(mktemp -d)
at_exit "rm -rf '$work'"
for i in $(seq 1 400); do
  printf 'Document %d. The %s fox jumps over the lazy dog %d times, and the dog sleeps.\n\n' "$i" \
    "$([[ $((i % 2)) == 0 ]] && echo quick || echo brown)" "$((i % 7))"
done >"$work/corpus.txt"
"$prep" --input "$work/corpus.txt" --output-prefix "$work/data" --train-vocab 300 --quiet >/dev/null ||
  fail "srunway-prep failed"
tokens=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$work/data.vocab.json")
out=$(sbatch --wait --parsable --output="$work/job.out" "$kSourceRoot/scripts/examples/megatron-llama.sbatch" \
  "$work/data" "$work/data.vocab.json" "$work/data.merges.txt" "$work/run" 2>&1) || fail "job: $out: $(cat "$work/job.out")"
log=$(cat "$work/job.out")
grep -q "model llama (2 layers, hidden 128, heads 4/2, vocab $(((tokens + 127) / 128 * 128))): " <<<"$log" ||
  fail "not the Llama of Megatron's flags with the tokenizer's $tokens tokens padded: $log"
grep -q "batch 16 x 64 tokens = 4 ranks x 2 micro-batches of 2" <<<"$log" || fail "$log"
eod=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["<|endoftext|>"])' "$work/data.vocab.json")
grep -q "info: documents: each ends after token $eod (<|endoftext|>); each starts again at position 0 and attends to its own tokens only" <<<"$log" ||
  fail "no documents line: $log"
grep -q "optimizer state .* per rank (ZeRO-1: 1/4 of it)" <<<"$log" || fail "no ZeRO-1: $log"
expect_eq "step lines" "$(grep -c '^step' <<<"$log")" 4
# --timing-log-level 1: at each log step Megatron's three timers over the 4 ranks, min <= max.
expect_eq "timer blocks" "$(grep -c '^(min, max) time across ranks (ms):$' <<<"$log")" 4
python3 - "$work/job.out" <<'PY' || fail "timers: $log"
import re, sys
found = re.findall(r"^    ([a-z-]+) \.+: \(([0-9.]+), ([0-9.]+)\)$", open(sys.argv[1]).read(), re.M)
assert sorted({name for name, _, _ in found}) == ["all-grads-sync", "forward-backward", "optimizer"], found
assert len(found) == 12 and all(float(low) <= float(high) for _, low, high in found), found
PY
expect_eq "validation lines" "$(grep -c '^validation at step' <<<"$log")" 2
expect_eq "latest checkpoint" "$(cat "$work/run/checkpoints/latest_checkpointed_iteration.txt")" 40
python3 - "$work/run/metrics.jsonl" <<'PY' || fail "metrics: $(cat "$work/run/metrics.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
assert [r["step"] for r in rows] == [10, 20, 30, 40], rows
assert rows[-1]["loss"] < rows[0]["loss"] - 0.5, (rows[0]["loss"], rows[-1]["loss"])
assert all(abs(r["decoupled_lr"] / r["lr"] - 5 / 3) < 1e-5 for r in rows), rows
PY
grep -aq '"apply_layernorm_1p":true' "$work/run/checkpoints/iter_0000040"/shard_00000_of_00004.ckpt ||
  fail "the checkpoint does not keep --apply-layernorm-1p"
# --log-progress: the job's start and its two checkpoints in progress.txt, under its Slurm job id and 4 ranks, the
# second at twice the first's floating-point operations (the same batch at every step).
progress=$work/run/checkpoints/progress.txt
python3 - "$progress" "${out%%;*}" <<'PY' || fail "progress.txt: $(cat "$progress")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
job = sys.argv[2]
assert len(lines) == 3, lines
assert re.fullmatch(rf"[0-9-]+ [0-9:]+\tJob ID: {job}\t# GPUs: 4\tStarting job", lines[0]), lines[0]
flops = []
for line, step in zip(lines[1:], (20, 40)):
    m = re.fullmatch(rf"[0-9-]+ [0-9:]+\tJob ID: {job}\t# GPUs: 4\tSaved checkpoint\tIteration: {step}\t"
                     r"Job throughput: [0-9.]+ TFLOP/s/GPU\tCumulative throughput: [0-9.]+ TFLOP/s/GPU\t"
                     r"Floating-point operations: ([0-9.e+]+)\tTokens \(in billions\): 0\.00", line)
    assert m, line
    flops.append(float(m.group(1)))
assert abs(flops[1] / flops[0] - 2) < 0.01, flops
PY
# Rank 0 alone writes TensorBoard's events: one file, 40 steps of lm loss.
events=("$work/run/tensorboard"/events.out.tfevents.*)
expect_eq "event files" "${#events[@]}" 1
[[ -s ${events[0]} ]] || fail "empty event file ${events[0]}"
grep -qa "lm loss validation ppl" "${events[0]}" || fail "no validation perplexity in ${events[0]}"
echo "ok: a Megatron-LM script's Llama trained over 2 nodes x 2 ranks ($tokens tokens' vocabulary, padded)"
