#!/usr/bin/env bash
# scripts/examples/finetune-hf.sbatch as users run it, 2 nodes x 2 ranks, on a Hugging Face model's folder: a base
# GPT trained here and written with --export-hf (model.safetensors, config.json and the dataset's tokenizer, the
# files the hub's gpt2 folder holds). The job takes the model from config.json and its weights from the folder (its
# first loss is the trained base's, far below a fresh model's), trains, and writes OUT_DIR/hf, whose weights give
# the job's last validation loss when evaluated on the same ranks.
source "$(dirname "$0")/lib.sh"
require_cluster
export SRUNWAY_TRAIN=${SRUNWAY_TRAIN:?} SRUNWAY_LAUNCH=${SRUNWAY_LAUNCH:?}
prep=${SRUNWAY_PREP:?}
script=$kSourceRoot/scripts/examples/finetune-hf.sbatch
work=$(mktemp -d)
at_exit "rm -rf '$work'"
for i in $(seq 1 400); do printf 'document %d says alpha beta gamma %d times\n\n' "$i" $((i % 13)); done >"$work/corpus.txt"
"$prep" --input "$work/corpus.txt" --output-prefix "$work/data" --train-vocab 300 --quiet >/dev/null ||
  fail "srunway-prep failed"
small=(--seq-length 32 --micro-batch-size 2 --peak-tflops 1)

# The base model, trained on one rank and written in Hugging Face's form.
"$SRUNWAY_TRAIN" --preset gpt-tiny --vocab-size 300 --data-path "$work/data" "${small[@]}" --train-steps 40 \
  --lr 3e-3 --export-hf "$work/base" >"$work/base.log" 2>&1 || fail "base model: $(cat "$work/base.log")"
expect_eq "the base folder" "$(ls "$work/base" | tr '\n' ' ')" \
  "config.json merges.txt model.safetensors tokenizer_config.json vocab.json "
scratch=$("$SRUNWAY_TRAIN" --preset gpt-tiny --vocab-size 300 --data-path "$work/data" "${small[@]}" --train-steps 1 \
  2>/dev/null | grep -oE '^step +1/1 \| loss [0-9.]+' | grep -oE '[0-9.]+$')

out=$(sbatch --wait --parsable --output="$work/job.out" "$script" "$work/base" "$work/data" "$work/out" \
  "${small[@]}" --global-batch-size 8 --train-steps 4 --warmup-steps 1 --lr 1e-3 --log-interval 1 \
  --eval-interval 2 --eval-iters 1 2>&1) || fail "fine-tuning job: $out: $(cat "$work/job.out")"
log=$(cat "$work/job.out")
grep -q "rank 0\] info: fine-tuning from $work/base/model.safetensors (Hugging Face GPT-2 names)" <<<"$log" ||
  fail "no fine-tuning line: $log"
first=$(grep -oE '^step +1/4 \| loss [0-9.]+' <<<"$log" | grep -oE '[0-9.]+$')
[[ -n $first && -n $scratch ]] || fail "no first losses (scratch '$scratch'): $log"
awk -v a="$first" -v b="$scratch" 'BEGIN { exit !(a < b - 1) }' ||
  fail "the fine-tuning's first loss $first is not the trained base's: a fresh model's is $scratch"
echo "ok: the job fine-tunes the Hugging Face folder (first loss $first; a fresh model's $scratch)"

expect_eq "the exported folder" "$(ls "$work/out/hf" | tr '\n' ' ')" \
  "config.json merges.txt model.safetensors tokenizer_config.json vocab.json "
cmp -s "$work/out/hf/vocab.json" "$work/base/vocab.json" || fail "the exported tokenizer is not the dataset's"
last=$(grep -oE '^validation at step 4 \| loss [0-9.]+' <<<"$log")
again=$(srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 "$SRUNWAY_TRAIN" --use-checkpoint-args --load "$work/out/hf" \
  --skip-train --data-path "$work/data" "${small[@]}" --global-batch-size 8 --eval-iters 1 2>"$work/again.err" |
  grep -oE '^validation at step 0 \| loss [0-9.]+')
[[ -n $last && ${last#*|} == "${again#*|}" ]] ||
  fail "the exported weights' validation '$again' is not the job's last '$last': $(cat "$work/again.err")"
echo "ok: OUT_DIR/hf holds the fine-tuned model (its validation ${again#*| }) and the dataset's tokenizer"
