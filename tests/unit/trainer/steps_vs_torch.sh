#!/usr/bin/env bash
# srunway-train against PyTorch over 100 training steps on the CPU, both in fp32: gpt-tiny from the parameters
# srunway-train drew and on the samples it read, in its order (trainer-train-dump writes both), with the same
# AdamW, constant learning rate and clipping. Every step's loss must match within 1e-4 (observed: within 4e-6 up
# to step 100; past about step 120 the two fp32 runs start to drift apart by rounding alone, so the check stops at
# 100). This is what the gpu suite's train_vs_torch does on a GPU in bf16 over 200 steps, with the same helpers.
# Then again with --eod-mask-loss, PyTorch taking the mean loss over the positions whose input token is not the
# tokenizer's <|endoftext|>, as Megatron's loss mask does; and with --reset-position-ids --reset-attention-mask,
# PyTorch's position ids and attention mask made as Megatron's get_ltor_masks_and_position_ids makes them. And
# --calculate-per-token-loss with 4 micro-batches of 2 per step: the same loss and steps as PyTorch's one batch of
# 8 with --eod-mask-loss, the mean over every scored position of the step (without the flag, each step's loss is
# the mean of 4 micro-batch means, which score unevenly: 1.5e-3 from PyTorch's at step 64).
# Usage: steps_vs_torch.sh SRUNWAY_TRAIN SRUNWAY_PREP TRAINER_TRAIN_DUMP [PYTHON]
set -euo pipefail
train=$1 prep=$2 dump=$3 python=${4:-/usr/bin/python3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset SLURM_PROCID SLURM_JOB_ID PMIX_RANK RANK WORLD_SIZE
readonly kSteps=100 kBatch=8 kSeq=128 kLr=1e-3 kSeed=1234

"$python" "$here/grammar_corpus.py" "$work/corpus.txt"
# For --eod-mask-loss each line a document of its own (srunway-prep's documents end at a blank line; the corpus
# is one): about 15 tokens each, so that every sample holds several ends of documents to mask.
sed G "$work/corpus.txt" >"$work/documents.txt"
for mode in plain eod; do
  "$prep" --input "$work/$([[ $mode == eod ]] && echo documents || echo corpus).txt" --output-prefix "$work/$mode" \
    --train-vocab 512 --quiet >/dev/null
  mkdir "$work/dump.$mode"
  "$dump" gpt-tiny "$work/$mode" "$kSeq" "$kBatch" "$kSteps" "$kSeed" "$work/dump.$mode"
done
eod=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["<|endoftext|>"])' "$work/eod.vocab.json")

# against MODE: srunway-train and PyTorch, step by step: plain; eod, --eod-mask-loss; docs, --reset-position-ids
# and --reset-attention-mask (on eod's documents); per-token, --calculate-per-token-loss against PyTorch's eod.
against() {
  local mode=$1 data=$1 flags=() uses=() micro=$kBatch peer=$1
  case $mode in
    eod) flags=(--eod-mask-loss) uses=("$eod" mask-loss) ;;
    docs) data=eod flags=(--reset-position-ids --reset-attention-mask) uses=("$eod" reset-positions,reset-attention) ;;
    per-token) data=eod peer=eod micro=2 flags=(--eod-mask-loss --calculate-per-token-loss --global-batch-size "$kBatch")
      uses=("$eod" mask-loss) ;;
  esac
  "$train" --preset gpt-tiny --device cpu --data-path "$work/$data" --split 1 --seq-length "$kSeq" \
    --micro-batch-size "$micro" --train-steps "$kSteps" --lr "$kLr" --lr-decay-style constant --warmup-steps 0 \
    --weight-decay 0.01 --clip-grad 1.0 --seed "$kSeed" --log-interval 1 --peak-tflops 1 \
    "${flags[@]}" --metrics-file "$work/ours.$mode.jsonl" >/dev/null \
    2>"$work/ours.err" || fail "srunway-train ($mode): $(cat "$work/ours.err")"
  [[ -e $work/torch.$peer.txt ]] ||
    "$python" "$here/torch_train_steps.py" "$work/dump.$data" "$kSteps" "$kBatch" "$kSeq" "$kLr" fp32 cpu \
      "${uses[@]}" >"$work/torch.$peer.txt" || fail "PyTorch ($mode)"
  "$python" - "$work/ours.$mode.jsonl" "$work/torch.$peer.txt" "$mode" <<'PY' || fail "srunway-train and PyTorch disagree ($mode)"
import json, sys
ours = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
torch = [float(l.split()[1]) for l in open(sys.argv[2])]
assert len(ours) == len(torch) == 100, (len(ours), len(torch))
gaps = [abs(a - b) for a, b in zip(ours, torch)]
worst = max(range(len(gaps)), key=gaps.__getitem__)
print(f"{sys.argv[3]}: loss: step 1 {ours[0]:.4f}, step 100 {ours[-1]:.4f} (PyTorch {torch[-1]:.4f}); largest gap "
      f"{gaps[worst]:.2e} at step {worst + 1} (allowed 1e-4)")
assert ours[-1] < 0.5 * ours[0], "the loss should fall"
sys.exit(0 if gaps[worst] <= 1e-4 else 1)
PY
}
against plain
against eod
against docs
against per-token
# PyTorch without the mask, on the same documents: another loss (the ends of documents are in every sample).
"$python" "$here/torch_train_steps.py" "$work/dump.eod" "$kSteps" "$kBatch" "$kSeq" "$kLr" fp32 cpu \
  >"$work/torch.unmasked.txt"
"$python" - "$work/ours.eod.jsonl" "$work/torch.unmasked.txt" <<'PY' || fail "--eod-mask-loss changed no loss"
import json, sys
masked = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l][-1]
unmasked = float(open(sys.argv[2]).readlines()[-1].split()[1])
print(f"eod: step 100 {masked:.4f}, PyTorch without the mask {unmasked:.4f}")
assert abs(masked - unmasked) > 100 * 1e-4, (masked, unmasked)
PY
# And without the documents' resets: another loss (every sample holds several documents).
"$python" - "$work/ours.docs.jsonl" "$work/torch.unmasked.txt" <<'PY' || fail "the documents' resets changed no loss"
import json, sys
reset = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l][-1]
one = float(open(sys.argv[2]).readlines()[-1].split()[1])
print(f"docs: step 100 {reset:.4f}, PyTorch with one document per sample {one:.4f}")
assert abs(reset - one) > 100 * 1e-4, (reset, one)
PY
echo "ok: 100 steps of srunway-train and PyTorch agree, plain, with --eod-mask-loss, with the documents' resets," \
  "and with --calculate-per-token-loss over 4 micro-batches"
