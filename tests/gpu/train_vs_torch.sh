#!/usr/bin/env bash
# GPU suite: 200 steps of gpt-tiny trained by srunway-train --device cuda and by PyTorch on the same GPU, from the
# same initial parameters and on the same samples in the same order (trainer-train-dump writes what srunway-train
# starts from), with the same optimizer settings: the loss curves must agree within bf16 noise. The unit suite's
# trainer/steps_vs_torch does the same on the CPU in fp32 (every step within 1e-4 over 100 steps), with the same
# helpers (tests/unit/trainer: grammar_corpus.py, torch_train_steps.py; SRUNWAY_TRAINER_HELPERS names another
# folder that holds them).
#
# bf16 noise is measured, not assumed: PyTorch runs twice, with bf16 autocast (what srunway-train does) and in fp32;
# the mean gap between those two curves over each window of 20 steps is the noise of that window. srunway-train's
# mean gap to PyTorch bf16 in every window must stay within 2 x that noise + 0.02, and its final 20-step mean loss
# within 5% of PyTorch bf16's (two fp32 runs on the CPU already end 1.6% apart: past step 120 rounding alone makes
# the runs drift). The data is a small corpus with structure (the loss falls from ln 512 to below 1), tokenized by
# srunway-prep. Exits 77 without a GPU, a CUDA driver, or PyTorch with CUDA.
# Usage: train_vs_torch.sh SRUNWAY_TRAIN SRUNWAY_PREP TRAINER_TRAIN_DUMP [PYTHON]
set -euo pipefail
train=${1:?usage: train_vs_torch.sh SRUNWAY_TRAIN SRUNWAY_PREP TRAINER_TRAIN_DUMP [PYTHON]}
prep=${2:?} dump=${3:?} python=${4:-python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
helpers=${SRUNWAY_TRAINER_HELPERS:-$here/../unit/trainer}
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset SLURM_PROCID SLURM_JOB_ID PMIX_RANK RANK WORLD_SIZE

readonly kSteps=200 kBatch=8 kSeq=128 kLr=1e-3 kSeed=1234
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIP: no PyTorch with a CUDA GPU ($python)"; exit 77
fi

"$python" "$helpers/grammar_corpus.py" "$work/corpus.txt"
"$prep" --input "$work/corpus.txt" --output-prefix "$work/data" --train-vocab 512 --quiet >/dev/null

if ! "$train" --preset gpt-tiny --device cuda --data-path "$work/data" --split 1 --seq-length "$kSeq" \
  --micro-batch-size "$kBatch" --train-steps "$kSteps" --lr "$kLr" --lr-decay-style constant --warmup-steps 0 \
  --weight-decay 0.01 --clip-grad 1.0 --seed "$kSeed" --log-interval 1 --peak-tflops 1 \
  --metrics-file "$work/ours.jsonl" >"$work/ours.out" 2>"$work/ours.err"; then
  if grep -qE 'no CUDA driver|no GPU visible' "$work/ours.err"; then echo "SKIP: $(cat "$work/ours.err")"; exit 77; fi
  fail "srunway-train: $(cat "$work/ours.err")"
fi
mkdir -p "$work/dump"
"$dump" gpt-tiny "$work/data" "$kSeq" "$kBatch" "$kSteps" "$kSeed" "$work/dump" || fail "trainer-train-dump"
for precision in bf16 fp32; do
  "$python" "$helpers/torch_train_steps.py" "$work/dump" "$kSteps" "$kBatch" "$kSeq" "$kLr" "$precision" cuda \
    >"$work/torch.$precision.txt" 2>"$work/torch.$precision.err" || fail "PyTorch $precision: $(tail -n 3 "$work/torch.$precision.err")"
done

"$python" - "$work/ours.jsonl" "$work/torch.bf16.txt" "$work/torch.fp32.txt" <<'PY'
import json, sys
import torch
ours = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
bf16 = [float(l.split()[1]) for l in open(sys.argv[2])]
fp32 = [float(l.split()[1]) for l in open(sys.argv[3])]
assert len(ours) == len(bf16) == len(fp32), (len(ours), len(bf16), len(fp32))
print(f"PyTorch {torch.__version__}; step 1 loss: srunway {ours[0]:.4f}, PyTorch bf16 {bf16[0]:.4f}, fp32 {fp32[0]:.4f}")
ok = abs(ours[0] - fp32[0]) < 0.02 * fp32[0]  # the same start: same parameters, same first batch
print(f"{'window':>9} {'srunway':>8} {'torch bf16':>10} {'torch fp32':>10} {'gap':>7} {'noise':>7} {'allowed':>7}")
mean = lambda xs: sum(xs) / len(xs)
for start in range(0, len(ours), 20):
    w = slice(start, start + 20)
    gap = mean([abs(a - b) for a, b in zip(ours[w], bf16[w])])
    noise = mean([abs(a - b) for a, b in zip(bf16[w], fp32[w])])
    allowed = 2 * noise + 0.02
    ok &= gap <= allowed
    print(f"{start + 1:>4}-{start + 20:<4} {mean(ours[w]):8.4f} {mean(bf16[w]):10.4f} {mean(fp32[w]):10.4f} "
          f"{gap:7.4f} {noise:7.4f} {allowed:7.4f}{'' if gap <= allowed else '  <- too far'}")
last_ours, last_bf16 = mean(ours[-20:]), mean(bf16[-20:])
ok &= abs(last_ours - last_bf16) <= 0.05 * last_bf16 and last_ours < 0.6 * ours[0]
print(f"last 20 steps: srunway {last_ours:.4f}, PyTorch bf16 {last_bf16:.4f} (within 5% wanted; both fell from "
      f"{ours[0]:.2f})")
sys.exit(0 if ok else 1)
PY
echo "ok: srunway-train and PyTorch agree over $kSteps steps"
