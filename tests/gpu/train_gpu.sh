#!/usr/bin/env bash
# GPU suite: srunway-train --device cuda as a user runs it, one rank on this machine's GPU (NCCL carries its
# gradients, as it would across nodes):
#   1. gpt-tiny overfitting one batch for 30 steps on the GPU (bf16) and on the CPU (fp32) from the same
#      initialisation: the GPU's loss falls as the CPU's does, step by step within bf16 noise (3% of the loss, or
#      0.05 absolute near zero), and so does llama-tiny's, gpt-tiny's with --apply-layernorm-1p, and that of
#      llama-tiny with LayerNorms (--normalization LayerNorm) whose gradients go through NCCL in bf16
#      (--grad-reduce-in-bf16);
#   2. the same with --use-distributed-optimizer and dropout (the ZeRO-1 path and the seeded masks); and
#      --recompute-activations (dropout on: the recomputed masks must be the drawn ones) gives the kept run's losses
#      and gradient norms (within 1e-3: attention's backward adds across blocks in any order; recomputing from
#      the wrong layer's input is 1.7% off) in less peak memory;
#   3. save at step 10 -> load -> continue gives the uninterrupted run's losses for steps 11-20 (within 1e-4),
#      the GEMM algorithms the run chose by timing (the default) taken from the checkpoint, not timed again;
#      SRUNWAY_GEMM_TUNE=0 (the heuristic's first algorithm for each GEMM) trains to the same losses within 1e-2;
#      --export writes safetensors and --sample generates from the GPU's logits;
#   (the start-up log says which attention and GELU implementations run: cuDNN's attention where it loads, else
#   the mma.sync tiles, which take gpt-tiny's head size 16; GELU cuBLASLt's epilogues)
#   4. bad input: cuBLASLt missing with --device cuda is one line naming it, exit 1; with --device auto the run
#      trains on the CPU and says why once; SRUNWAY_ATTENTION=cudnn without cuDNN is one warning naming it, and
#      attention runs on the kernels; by default no warning, the reason at the end of the start-up line;
#   5. a head size no GPU attention kernel takes is one line, exit 2;
#   6. a model too large for the GPU is one line saying what was asked, what is free and what to try, exit 1.
# Exits 77 (skip) where there is no GPU or no CUDA driver.
# Usage: train_gpu.sh SRUNWAY_TRAIN SRUNWAY_PREP
set -euo pipefail
train=${1:?usage: train_gpu.sh SRUNWAY_TRAIN SRUNWAY_PREP}
prep=${2:?usage: train_gpu.sh SRUNWAY_TRAIN SRUNWAY_PREP}
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset SLURM_PROCID SLURM_JOB_ID PMIX_RANK RANK WORLD_SIZE  # one rank, outside any job

common=(--seq-length 64 --micro-batch-size 4 --mock-data --overfit-batch --lr 3e-3 --warmup-steps 5
        --log-interval 1 --peak-tflops 1)
if ! "$train" --preset gpt-tiny "${common[@]}" --train-steps 1 --device cuda >"$work/probe.out" 2>"$work/probe.err"; then
  if grep -qE 'no CUDA driver|no GPU visible' "$work/probe.err"; then echo "SKIP: $(cat "$work/probe.err")"; exit 77; fi
  fail "--device cuda: $(cat "$work/probe.err")"
fi
grep -q 'training on ' "$work/probe.err" || fail "no line saying which GPU: $(cat "$work/probe.err")"
kernels_or_cudnn='(cuDNN [0-9]+ from .* \(else mma.sync tiles\)|mma.sync tiles)'
grep -qE "GPU operations: attention on $kernels_or_cudnn, GELU and bias gradients in cuBLASLt" "$work/probe.err" ||
  fail "no line saying which attention and GELU run: $(grep -i 'operations' "$work/probe.err")"
grep "GPU operations" "$work/probe.err"

# Without --peak-tflops: MFU against the GPU's known peak or, for a GPU outside that table (the emulated one), no
# MFU at all, on the step lines or in the metrics (it read "MFU inf%").
"$train" --preset gpt-tiny --seq-length 64 --micro-batch-size 4 --mock-data --train-steps 1 --log-interval 1 \
  --device cuda --metrics-file "$work/peak.jsonl" >"$work/peak.out" 2>"$work/peak.err" || fail "$(cat "$work/peak.err")"
if grep -q "MFU is not shown" "$work/peak.err"; then
  ! grep -qE "MFU|inf" "$work/peak.out" "$work/peak.jsonl" || fail "an MFU without a peak: $(cat "$work/peak.out")"
else
  grep -qE "MFU [0-9.]+%" "$work/peak.out" || fail "no MFU against the GPU's peak: $(cat "$work/peak.out")"
fi

# compare NAME CPU.jsonl GPU.jsonl: step by step within bf16 noise, and both fell.
compare() {
  python3 - "$@" <<'PY'
import json, sys
name, cpu_path, gpu_path = sys.argv[1:4]
read = lambda p: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
cpu, gpu = read(cpu_path), read(gpu_path)
assert len(cpu) == len(gpu) and cpu, f"{name}: {len(cpu)} CPU steps, {len(gpu)} GPU steps"
worst = max(abs(c - g) / max(abs(c), 0.05 / 0.03) for c, g in zip(cpu, gpu))
print(f"{name}: first loss cpu {cpu[0]:.4f} gpu {gpu[0]:.4f}, last cpu {cpu[-1]:.4f} gpu {gpu[-1]:.4f}, "
      f"worst relative gap {worst:.4f} (allowed 0.03)")
assert worst <= 0.03, f"{name}: the GPU's losses left the CPU's by {worst:.4f}"
assert gpu[-1] < 0.7 * gpu[0], f"{name}: the GPU's loss did not fall ({gpu[0]} -> {gpu[-1]})"
PY
}

echo "== 1. GPU against CPU, one batch overfitted"
for preset in gpt-tiny llama-tiny; do
  for device in cpu cuda; do
    "$train" --preset "$preset" "${common[@]}" --train-steps 30 --device "$device" \
      --metrics-file "$work/$preset.$device.jsonl" >"$work/$preset.$device.out" 2>&1 ||
      fail "$preset on $device: $(tail -n 5 "$work/$preset.$device.out")"
  done
  compare "$preset" "$work/$preset.cpu.jsonl" "$work/$preset.cuda.jsonl" || fail "$preset: GPU and CPU disagree"
done
# --apply-layernorm-1p: the norm kernels multiply by 1 + the stored weights (drawn as 0), as the CPU's norms do.
for device in cpu cuda; do
  "$train" --preset gpt-tiny "${common[@]}" --train-steps 30 --device "$device" --apply-layernorm-1p \
    --metrics-file "$work/1p.$device.jsonl" >"$work/1p.$device.out" 2>&1 ||
    fail "--apply-layernorm-1p on $device: $(tail -n 5 "$work/1p.$device.out")"
done
compare "gpt-tiny --apply-layernorm-1p" "$work/1p.cpu.jsonl" "$work/1p.cuda.jsonl" || fail "--apply-layernorm-1p on the GPU"
# The model of Megatron's Llama 3 scripts, a Llama with LayerNorms, its buckets cast to bf16 for NCCL's sum and back.
for device in cpu cuda; do
  "$train" --preset llama-tiny "${common[@]}" --train-steps 30 --device "$device" --normalization LayerNorm \
    --grad-reduce-in-bf16 --metrics-file "$work/ln.$device.jsonl" >"$work/ln.$device.out" 2>&1 ||
    fail "llama-tiny with LayerNorm on $device: $(tail -n 5 "$work/ln.$device.out")"
done
compare "llama-tiny with LayerNorm, reduced in bf16" "$work/ln.cpu.jsonl" "$work/ln.cuda.jsonl" ||
  fail "llama-tiny with LayerNorm on the GPU"
grep -q "model llama with LayerNorm (.* overlapped with the backward in bf16;" "$work/ln.cuda.out" ||
  fail "the model line of a Llama with LayerNorm reduced in bf16: $(grep 'model' "$work/ln.cuda.out")"
# Llama has neither GELU nor biases: its start-up line names no epilogues for them.
grep -qE "GPU operations: attention on $kernels_or_cudnn, cuBLASLt from " "$work/llama-tiny.cuda.out" ||
  fail "llama's operations line: $(grep 'GPU operations' "$work/llama-tiny.cuda.out")"

echo "== 2. ZeRO-1 and dropout"
for device in cpu cuda; do
  "$train" --preset gpt-tiny "${common[@]}" --train-steps 30 --device "$device" --use-distributed-optimizer \
    --hidden-dropout 0.1 --attention-dropout 0.1 --bucket-size-mb 0.05 \
    --metrics-file "$work/zero.$device.jsonl" >"$work/zero.$device.out" 2>&1 ||
    fail "ZeRO-1 on $device: $(tail -n 5 "$work/zero.$device.out")"
done
compare "gpt-tiny ZeRO-1 + dropout" "$work/zero.cpu.jsonl" "$work/zero.cuda.jsonl" || fail "ZeRO-1 on the GPU"

echo "== 2b. --recompute-activations on the GPU"
for preset in gpt-tiny llama-tiny; do
  for mode in keep recompute; do
    out=$work/$preset.gpu-$mode
    "$train" --preset "$preset" --num-layers 3 --seq-length 64 --micro-batch-size 4 --peak-tflops 1 --mock-data \
      --train-steps 4 --hidden-dropout 0.1 --attention-dropout 0.1 --log-interval 1 --device cuda \
      $([[ $mode == recompute ]] && echo --recompute-activations) --metrics-file "$out.jsonl" >"$out.out" 2>&1 ||
      fail "$preset ($mode) on the GPU: $(tail -n 5 "$out.out")"
  done
  python3 - "$preset" "$work/$preset.gpu-keep.jsonl" "$work/$preset.gpu-recompute.jsonl" <<'PY' ||
import json, sys
name = sys.argv[1]
keep, again = ([json.loads(l) for l in open(p) if '"loss"' in l] for p in sys.argv[2:4])
assert len(keep) == len(again) == 4, (len(keep), len(again))
worst = max(abs(a[k] - b[k]) / abs(a[k]) for a, b in zip(keep, again) for k in ("loss", "grad_norm"))
print(f"{name}: recomputed losses and gradient norms within {worst:.1e} of the kept run's (allowed 1e-3), "
      f"peak memory {keep[-1]['peak_memory_gib']:.4f} -> {again[-1]['peak_memory_gib']:.4f} GiB")
assert worst <= 1e-3, "recomputation changed the results"
# At this size cuBLASLt's workspace is most of the peak, so the saving is small, but there must be one.
assert again[-1]["peak_memory_gib"] < keep[-1]["peak_memory_gib"], "recomputation saved no memory"
PY
    fail "$preset: --recompute-activations on the GPU"
done

echo "== 3. save, load, continue; export; sample"
run=("$train" --preset gpt-tiny --seq-length 64 --micro-batch-size 4 --mock-data --lr 3e-3 --warmup-steps 4
     --train-steps 20 --log-interval 1 --peak-tflops 1 --device cuda)
# Saving (steps 10 and 20) and exporting do not change the training: the uninterrupted run is the saved one too.
"${run[@]}" --metrics-file "$work/straight.jsonl" --save "$work/ckpt" --save-interval 10 \
  --export "$work/model.safetensors" >/dev/null 2>"$work/straight.err" || fail "$(cat "$work/straight.err")"
# Whether the metrics file $1 has the losses of the steps it logged that the run above (or $reference) logged, to
# $2 (default 1e-5) relative; prints the largest gap.
reference=$work/straight.jsonl
same_losses() {
  python3 - "$reference" "$1" "${2:-1e-5}" <<'PY'
import json, sys
read = lambda p: {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(p) if '"loss"' in l}
straight, other, rtol = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
gap = max((abs(straight[k] - other[k]) / max(1, abs(straight[k])) for k in other if k in straight), default=0)
print(f"{len(other)} steps, largest relative loss gap {gap:.2e} (allowed {rtol:g})")
sys.exit(0 if other and other.keys() <= straight.keys() and gap <= rtol else 1)
PY
}
# By default every GEMM's algorithm is chosen by timing, said on the start-up line; SRUNWAY_GEMM_TUNE=0 takes the
# heuristic's first, whose sums run in other orders, so the losses agree within 1e-2 (the emulated GPU's algorithms
# compute alike: exactly). The warm-up's four steps (the same learning rates as the run above's): the first meets
# every GEMM shape.
grep -q "algorithm the fastest of its first candidates, timed" "$work/straight.err" ||
  fail "the start-up line does not say the GEMMs are timed: $(grep 'GPU operations' "$work/straight.err")"
SRUNWAY_GEMM_TUNE=0 "${run[@]}" --train-steps 4 --metrics-file "$work/heuristic.jsonl" >/dev/null \
  2>"$work/heuristic.err" || fail "SRUNWAY_GEMM_TUNE=0: $(cat "$work/heuristic.err")"
! grep -q "candidates, timed" "$work/heuristic.err" ||
  fail "SRUNWAY_GEMM_TUNE=0: the start-up line says the GEMMs are timed: $(grep 'GPU operations' "$work/heuristic.err")"
heuristic=$(same_losses "$work/heuristic.jsonl" 1e-2) || fail "SRUNWAY_GEMM_TUNE=0 changed the losses: $heuristic"
echo "the heuristic's GEMM algorithms: $heuristic"
# --disable-bf16-reduced-precision-matmul: said on the start-up line, the losses within 1e-2 of the run above's. On
# the emulated GPU, whose stand-in cuBLASLt is told to add split-K halves in bf16 (FAKE_CUBLASLT_SPLIT_K=1) unless
# the reduction schemes asked for forbid it: with the flag the run above's losses exactly, without it others. The
# checkpoint's GEMM choices, made without the flag, are timed anew with it (another list of candidates).
fp32_sums() {
  "$@" --train-steps 4 --metrics-file "$work/fp32-sums.jsonl" >/dev/null 2>"$work/fp32-sums.err" ||
    fail "--disable-bf16-reduced-precision-matmul: $(cat "$work/fp32-sums.err")"
}
fp32_sums "${run[@]}" --disable-bf16-reduced-precision-matmul
grep -q "GPU operations: .*, split-K sums in fp32" "$work/fp32-sums.err" ||
  fail "--disable-bf16-reduced-precision-matmul: $(grep 'GPU operations' "$work/fp32-sums.err")"
if [[ -n ${SRUNWAY_FAKE_CUDNN:-} ]]; then
  # SRUNWAY_LOG=debug names each product whose algorithm splits k, and how it adds the parts.
  fp32_sums env FAKE_CUBLASLT_SPLIT_K=1 SRUNWAY_LOG=debug "${run[@]}" --disable-bf16-reduced-precision-matmul
  split=$(same_losses "$work/fp32-sums.jsonl" 0) || fail "fp32 split-K sums changed the losses: $split"
  ! grep -q "k split in" "$work/fp32-sums.err" || fail "fp32 split-K sums: $(grep -m1 "k split in" "$work/fp32-sums.err")"
  fp32_sums env FAKE_CUBLASLT_SPLIT_K=1 SRUNWAY_LOG=debug "${run[@]}"
  ! split=$(same_losses "$work/fp32-sums.jsonl" 0) || fail "bf16 split-K sums did not change the losses: $split"
  grep -q "debug: cuBLASLt [0-9x]*: k split in 2, the parts added in bf16 (reduction scheme 4)" "$work/fp32-sums.err" ||
    fail "bf16 split-K sums: no debug line says so: $(grep -m3 cuBLASLt "$work/fp32-sums.err")"
  echo "bf16 split-K sums on the stand-in: $split; $(grep -c "k split in" "$work/fp32-sums.err") products split"
else
  split=$(same_losses "$work/fp32-sums.jsonl" 1e-2) || fail "fp32 split-K sums changed the losses: $split"
  echo "fp32 split-K sums: $split"
fi
"${run[@]}" --disable-bf16-reduced-precision-matmul --load "$work/ckpt/iter_0000010" --train-steps 11 >/dev/null \
  2>"$work/fp32-sums-load.err" || fail "--disable-bf16-reduced-precision-matmul --load: $(cat "$work/fp32-sums-load.err")"
grep -q "split-K sums allowed in bf16, this run has them kept fp32 .*: timing them anew" "$work/fp32-sums-load.err" ||
  fail "a checkpoint's GEMM choices made with bf16 split-K sums were taken: $(cat "$work/fp32-sums-load.err")"
# The resumed run takes the checkpoint's choices (a rank that could not would say it times them anew).
SRUNWAY_LOG=debug "${run[@]}" --load "$work/ckpt/iter_0000010" --metrics-file "$work/resumed.jsonl" >/dev/null \
  2>"$work/load.err" || fail "load: $(cat "$work/load.err")"
! grep -q "timing them anew\|algorithms timed" "$work/load.err" ||
  fail "the resumed run timed its GEMMs again: $(grep -m 3 'timing them anew\|algorithms timed' "$work/load.err")"
python3 - "$work/straight.jsonl" "$work/resumed.jsonl" <<'PY' || fail "the resumed run left the uninterrupted one"
import json, sys
read = lambda p: {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(p) if '"loss"' in l}
straight, resumed = read(sys.argv[1]), read(sys.argv[2])
assert sorted(resumed) == list(range(11, 21)), sorted(resumed)
gap = max(abs(straight[s] - resumed[s]) for s in resumed)
print(f"resumed steps 11-20: largest gap to the uninterrupted run {gap:.2e} (allowed 1e-4)")
assert gap <= 1e-4
PY
[[ -s $work/model.safetensors ]] || fail "--export wrote nothing"
python3 - "$work/model.safetensors" <<'PY' || fail "the exported weights are not finite or not the model's"
import json, math, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
begin, end = header["wte"]["data_offsets"]
values = struct.unpack(f"<{(end - begin) // 4}f", data[8 + n + begin:8 + n + end])
assert all(math.isfinite(v) for v in values) and any(v != 0 for v in values)
print(f"export: {len(header) - 1} tensors, wte finite")
PY

for i in $(seq 1 300); do echo "line $i of a small corpus, with words that repeat: alpha beta gamma $((i % 7))"; done \
  >"$work/corpus.txt"
"$prep" --input "$work/corpus.txt" --output-prefix "$work/data" --train-vocab 400 --quiet >/dev/null
"$train" --preset gpt-tiny --seq-length 64 --micro-batch-size 4 --data-path "$work/data" --split 1 --lr 3e-3 \
  --train-steps 8 --peak-tflops 1 --device cuda --sample 16 --sample-prompt "line 7 of a" >"$work/sample.out" \
  2>"$work/sample.err" || fail "--sample: $(cat "$work/sample.err")"
grep -A1 '^sample (16 tokens, greedy):' "$work/sample.out" | tail -n 1 | grep -q '^line 7 of a' ||
  fail "--sample printed no continuation: $(cat "$work/sample.out")"
echo "sample: $(grep -A1 '^sample' "$work/sample.out" | tail -n 1)"

echo "== 4. a missing cuBLASLt"
if SRUNWAY_CUBLASLT_LIBRARY=$work/libcublasLt-missing.so "${run[@]}" --train-steps 1 >/dev/null 2>"$work/lt.err"; then
  fail "--device cuda without cuBLASLt trained"
fi
grep -q 'libcublasLt-missing.so' "$work/lt.err" || fail "the error should name the library tried: $(cat "$work/lt.err")"
[[ $(grep -c 'error' "$work/lt.err") == 1 ]] || fail "one error line wanted: $(cat "$work/lt.err")"
SRUNWAY_CUBLASLT_LIBRARY=$work/libcublasLt-missing.so "$train" --preset gpt-tiny "${common[@]}" --train-steps 2 \
  >"$work/auto.out" 2>"$work/auto.err" || fail "--device auto without cuBLASLt: $(cat "$work/auto.err")"
[[ $(grep -c 'training on the CPU: .*libcublasLt-missing.so' "$work/auto.err") == 1 ]] ||
  fail "--device auto should say once that it trains on the CPU: $(cat "$work/auto.err")"
echo "== 4b. SRUNWAY_ATTENTION=cudnn without cuDNN: one warning naming it, attention on the kernels"
SRUNWAY_ATTENTION=cudnn SRUNWAY_CUDNN_LIBRARY=$work/libcudnn-missing.so "${run[@]}" --train-steps 2 \
  >/dev/null 2>"$work/dnn.err" || fail "SRUNWAY_ATTENTION=cudnn without cuDNN should train: $(cat "$work/dnn.err")"
[[ $(grep -c 'SRUNWAY_ATTENTION=cudnn: .*libcudnn-missing.so.*attention runs on srunway.s kernels' \
  "$work/dnn.err") == 1 ]] || fail "one line naming the cuDNN tried wanted: $(cat "$work/dnn.err")"
grep -q 'GPU operations: attention on mma.sync tiles' "$work/dnn.err" ||
  fail "the kernels should run attention: $(grep 'operations' "$work/dnn.err")"
# A run of $4 steps under the stand-in cuDNN (and the environment after $4) in which each direction falls back to
# the kernels with one line that says "$2 causal attention <direction> at ...$3...": no descriptor left, the
# kernels' losses. Its output is $work/$1.err.
falls_back() {
  local name=$1 said=$2 why=$3 steps=$4
  shift 4
  env FAKE_CUDNN_REPORT=1 SRUNWAY_ATTENTION=cudnn SRUNWAY_CUDNN_LIBRARY="$SRUNWAY_FAKE_CUDNN" "$@" "${run[@]}" \
    --train-steps "$steps" --metrics-file "$work/$name.jsonl" >/dev/null 2>"$work/$name.err" ||
    fail "$name: should train on the kernels: $(cat "$work/$name.err")"
  for direction in forward backward; do
    [[ $(grep -c "$said causal attention $direction at .*$why.*; srunway.s attention kernels run it instead" \
      "$work/$name.err") == 1 ]] || fail "$name: one line for the $direction wanted: $(cat "$work/$name.err")"
  done
  grep -q 'fake cuDNN: 0 descriptors left' "$work/$name.err" ||
    fail "$name: descriptors left behind: $(grep 'fake cuDNN' "$work/$name.err")"
  same_losses "$work/$name.jsonl" || fail "$name: the kernels' fallback should give the losses of the plain run"
}
# The kernels' losses, to which cuDNN's and every fallback's are held from here on: the run above's where it ran
# on them (no cuDNN here), else a run with SRUNWAY_ATTENTION=mma.
if ! grep -q 'GPU operations: attention on mma.sync tiles' "$work/straight.err"; then
  env SRUNWAY_ATTENTION=mma "${run[@]}" --metrics-file "$work/kernels.jsonl" >/dev/null 2>"$work/kernels.err" ||
    fail "SRUNWAY_ATTENTION=mma: $(cat "$work/kernels.err")"
  reference=$work/kernels.jsonl
fi
if [[ -n ${SRUNWAY_FAKE_CUDNN:-} ]]; then
  echo "== 4c. a cuDNN with no engine for the shapes: told once each, attention on the kernels, the same losses"
  falls_back fallback "has no engine for" "the stand-in has no engines" 20
  grep -q 'GPU operations: attention on cuDNN 91900 from .* (else mma.sync tiles)' "$work/fallback.err" ||
    fail "the start-up line should name cuDNN: $(grep 'operations' "$work/fallback.err")"
  echo "== 4d. a cuDNN that refuses the graphs themselves: also told once each, attention on the kernels"
  falls_back refused "cuDNN 91900 could not plan" "$(printf '%s' ": finalizing the operation graph of [0-9]* " \
    "operations failed: CUDNN_STATUS_BAD_PARAM.*the stand-in refuses every operation graph")" 3 FAKE_CUDNN_BAD_GRAPH=1
  echo "== 4e. a cuDNN plan that fails to run: told once each, attention on the kernels from then on"
  falls_back broken "cuDNN 91900 failed to run" "cudnnBackendExecute failed: CUDNN_STATUS_EXECUTION_FAILED.*the stand-in.s engine is broken" 3 \
    FAKE_CUDNN_ENGINE=broken
fi
echo "== 4f. attention on cuDNN's engine: no shape falls back, the losses within bf16 noise of the kernels'"
cudnn_env=(SRUNWAY_ATTENTION=cudnn)
if [[ -n ${SRUNWAY_FAKE_CUDNN:-} ]]; then  # the emulated GPU: the stand-in's host engine runs the graphs
  cudnn_env+=(SRUNWAY_CUDNN_LIBRARY="$SRUNWAY_FAKE_CUDNN" FAKE_CUDNN_ENGINE=host)
fi
env "${cudnn_env[@]}" "${run[@]}" --metrics-file "$work/cudnn.jsonl" >/dev/null 2>"$work/cudnn.err" ||
  fail "SRUNWAY_ATTENTION=cudnn: $(cat "$work/cudnn.err")"
if grep -q 'SRUNWAY_ATTENTION=cudnn: .*attention runs on srunway.s kernels' "$work/cudnn.err"; then
  echo "skipped: $(grep 'SRUNWAY_ATTENTION=cudnn' "$work/cudnn.err")"
else
  if grep 'run it instead' "$work/cudnn.err"; then fail "cuDNN should have taken every shape"; fi
  same_losses "$work/cudnn.jsonl" 5e-3 || fail "cuDNN's attention should train as the kernels do"
fi
echo "== 4g. SRUNWAY_ATTENTION=auto: cuDNN and the kernels timed once per shape and direction, the faster kept"
env "${cudnn_env[@]/#SRUNWAY_ATTENTION=cudnn/SRUNWAY_ATTENTION=auto}" "${run[@]}" --metrics-file "$work/auto.jsonl" \
  >/dev/null 2>"$work/auto.err" || fail "SRUNWAY_ATTENTION=auto: $(cat "$work/auto.err")"
if grep -q 'SRUNWAY_ATTENTION=auto: .*attention runs on srunway.s kernels' "$work/auto.err"; then
  echo "skipped: $(grep 'SRUNWAY_ATTENTION=auto' "$work/auto.err")"
else
  grep -q 'GPU operations: attention on cuDNN [0-9]* from .* (or, where faster, mma.sync tiles)' "$work/auto.err" ||
    fail "the start-up line should name both: $(grep 'operations' "$work/auto.err")"
  for direction in forward backward; do
    [[ $(grep -cE "attention $direction at B 4 T 64 H 4 KV 4 hd 16: cuDNN [0-9.]+ ms, mma.sync tiles [0-9.]+ ms: (cuDNN|the kernels) from now on" \
      "$work/auto.err") == 1 ]] || fail "one timing line for the $direction wanted: $(cat "$work/auto.err")"
  done
  grep "from now on" "$work/auto.err" | sed 's/.*info: /  /'
  same_losses "$work/auto.jsonl" 5e-3 || fail "SRUNWAY_ATTENTION=auto should train as the kernels do"
fi
echo "== 4h. the default attention: cuDNN where it loads, else the kernels with the reason on the start-up line"
env -u SRUNWAY_ATTENTION SRUNWAY_CUDNN_LIBRARY="$work/libcudnn-missing.so" "${run[@]}" --train-steps 2 \
  >/dev/null 2>"$work/default.err" ||
  fail "the default attention without cuDNN should train: $(cat "$work/default.err")"
grep -q 'GPU operations: attention on mma.sync tiles, .*; no cuDNN attention: .*libcudnn-missing.so' \
  "$work/default.err" || fail "the start-up line should say why cuDNN is not used: $(cat "$work/default.err")"
if grep -qE 'warning|error' "$work/default.err"; then
  fail "no warning wanted without cuDNN: $(cat "$work/default.err")"
fi
env SRUNWAY_ATTENTION=mma "${run[@]}" --train-steps 2 >/dev/null 2>"$work/mma.err" ||
  fail "SRUNWAY_ATTENTION=mma: $(cat "$work/mma.err")"
grep -q 'GPU operations: attention on mma.sync tiles, [^;]*$' "$work/mma.err" ||
  fail "SRUNWAY_ATTENTION=mma should run the kernels and not look for cuDNN: $(grep 'operations' "$work/mma.err")"
if [[ ${#cudnn_env[@]} -gt 1 ]] || ! grep -q 'SRUNWAY_ATTENTION=cudnn: .*attention runs on srunway.s kernels' \
    "$work/cudnn.err"; then  # a cuDNN that runs (this GPU's, or the stand-in's host engine)
  env -u SRUNWAY_ATTENTION "${cudnn_env[@]:1}" "${run[@]}" --train-steps 5 --metrics-file "$work/default.jsonl" \
    >/dev/null 2>"$work/default.err" || fail "the default attention: $(cat "$work/default.err")"
  grep -q 'GPU operations: attention on cuDNN [0-9]* from .* (else mma.sync tiles)' "$work/default.err" ||
    fail "cuDNN should run attention by default: $(grep 'operations' "$work/default.err")"
  same_losses "$work/default.jsonl" 5e-3 || fail "the default attention should train as the kernels do"
fi
echo "== 5. a head size no GPU attention kernel takes (64 / 8 = 8)"
rc=0
"${run[@]}" --num-attention-heads 8 >/dev/null 2>"$work/heads.err" || rc=$?
((rc == 2)) || fail "head size 8 on the GPU should exit 2, not $rc: $(cat "$work/heads.err")"
grep -q 'head size 8 .*attention on the GPU takes 16, 32, 64, 96 or 128' "$work/heads.err" ||
  fail "the error should say which head sizes work: $(cat "$work/heads.err")"
echo "== 6. a model that does not fit (1,152 GiB of parameters and optimizer state)"
rc=0
"$train" --preset gpt-tiny --vocab-size 4194304 --hidden-size 65536 --ffn-hidden-size 256 --num-attention-heads 1024 \
  --seq-length 64 --micro-batch-size 4 --mock-data --train-steps 1 --device cuda >/dev/null 2>"$work/oom.err" || rc=$?
((rc == 1)) || fail "a model too large for the GPU should exit 1, not $rc: $(cat "$work/oom.err")"
[[ $(grep -c 'error' "$work/oom.err") == 1 ]] || fail "one error line wanted: $(cat "$work/oom.err")"
want='cannot allocate [0-9.]* GiB on .*: [0-9.]* of [0-9.]* GiB free: .*--micro-batch-size, --recompute-activations'
grep -q "$want" "$work/oom.err" || fail "the error should say what was asked, what is free and what to try: $(cat "$work/oom.err")"
echo "ok: srunway-train on the GPU"
