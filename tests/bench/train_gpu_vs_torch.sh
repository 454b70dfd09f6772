#!/usr/bin/env bash
# Benchmark: srunway-train on one GPU against PyTorch (torch.compile, and eager) in the same run, with the same
# GPT, batch and sequence length: bf16 autocast over fp32 weights, fused AdamW, flash SDPA on PyTorch's side.
# For each size: tokens/s (median of the timed steps, the first ones excluded on both sides), MFU against the
# GPU's dense bf16 peak (the figure srunway-train's start-up line names), and peak memory (srunway-train's
# buffers; PyTorch's max_memory_allocated), then the ratios. FLOPs per token = 6 N + 12 L T d (N: the parameters
# that take part in matrix products, i.e. all but the position table; PaLM's appendix B). Asserts nothing about
# time; exits 77 without a GPU or without PyTorch with CUDA.
#   SRUNWAY_BENCH_SIZES   which sizes (default "gpt2-124m gpt3-1.3b")
#   SRUNWAY_BENCH_STEPS   timed steps per run (default 20; the first 3 of srunway-train's are dropped)
#   SRUNWAY_BENCH_TORCH   python with PyTorch (default python3)
#   SRUNWAY_BENCH_TORCH_MODES  PyTorch's runs: "compile" (the goal's peer), "eager"; default "compile eager"
#   SRUNWAY_BENCH_ATTENTION  srunway-train's attention paths, each its own run against the same PyTorch figures:
#                         "kernels" (SRUNWAY_ATTENTION=mma), "cudnn" (the default where cuDNN loads), "auto"
#                         (the faster of the two per shape), "heuristic" (cudnn, each GEMM's algorithm the
#                         heuristic's first instead of the fastest of its candidates, timed: SRUNWAY_GEMM_TUNE=0),
#                         "wheels" (cudnn on PyTorch's own cuDNN and cuBLASLt, from its nvidia-* wheels, where the
#                         site's are another version), "nobgradb" (cudnn, the weight gradients' bias sums by
#                         srunway's kernel, not cuBLASLt's BGRADB: SRUNWAY_BGRADB=0), "sinks" (the model with
#                         --softmax-type learnable, whose attention runs on the mma.sync kernels: against "kernels",
#                         what the sinks cost), "window" (--window-size 256,0 in every layer, the same kernels);
#                         default "kernels cudnn". PyTorch's model has neither sinks nor a window. A
#                         cudnn, heuristic, wheels or nobgradb run in which cuDNN did not run all of attention (none
#                         found, a shape refused) says so; the cudnn run says how many GEMMs it timed
#                         and how many split k (adding the parts in bf16 or fp32).
set -euo pipefail
train=${SRUNWAY_TRAIN:?SRUNWAY_TRAIN must name srunway-train}
python=${SRUNWAY_BENCH_TORCH:-python3}
steps=${SRUNWAY_BENCH_STEPS:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIP: no PyTorch with a CUDA GPU here ($python)"
  exit 77
fi

# The cuDNN 9 and cuBLASLt (13 on) in the nvidia/*/lib folders of the Python that runs PyTorch ("-" where none).
readonly kWheelLibraries='
import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
def found(pattern):
    hits = [h for d in dirs for h in glob.glob(os.path.join(d, "nvidia", "*", "lib", pattern))]
    return sorted(hits)[-1] if hits else "-"
print(found("libcudnn.so.9"), found("libcublasLt.so.1[3-9]"))'
# size -> layers hidden heads seq vocab batch (the issue's: GPT-2 124M at 16 x 1024, a 1.3B GPT at 8 x 2048)
declare -A shapes=([gpt2-124m]="12 768 12 1024 50304 16" [gpt3-1.3b]="24 2048 16 2048 50304 8")
for size in ${SRUNWAY_BENCH_SIZES:-gpt2-124m gpt3-1.3b}; do
  [[ -n ${shapes[$size]:-} ]] || { echo "unknown size $size (${!shapes[*]})" >&2; exit 2; }
  read -r layers hidden heads seq vocab batch <<<"${shapes[$size]}"
  flops=$("$python" -c "
L, d, T, V = $layers, $hidden, $seq, $vocab
params = V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d
print(6 * (params - T * d) + 12 * L * T * d)")
  echo "== $size: $layers layers, hidden $hidden, $heads heads, batch $batch x $seq, vocab $vocab; $flops FLOPs/token"

  labels=() ours=() peak=989400
  for attention in ${SRUNWAY_BENCH_ATTENTION:-kernels cudnn}; do
    model=()  # flags that change srunway-train's model
    case $attention in
      kernels) choice=(SRUNWAY_ATTENTION=mma) label="srunway-train, mma.sync attn" ;;
      cudnn) choice=(SRUNWAY_ATTENTION=cudnn SRUNWAY_LOG=debug) label="srunway-train, cuDNN attn" ;;
      auto) choice=(SRUNWAY_ATTENTION=auto) label="srunway-train, auto attn" ;;
      heuristic) choice=(SRUNWAY_ATTENTION=cudnn SRUNWAY_GEMM_TUNE=0)
                 label="srunway-train, cuDNN, GEMMs untimed" ;;
      nobgradb) choice=(SRUNWAY_ATTENTION=cudnn SRUNWAY_BGRADB=0) label="srunway-train, cuDNN, no BGRADB" ;;
      sinks) choice=(SRUNWAY_ATTENTION=cudnn) model=(--softmax-type learnable)
             label="srunway-train, learned sinks" ;;
      window) choice=(SRUNWAY_ATTENTION=cudnn) model=(--window-size 256,0) label="srunway-train, window 256" ;;
      wheels)
        # PyTorch's own cuDNN and cuBLASLt (its nvidia-* wheels), where the site's are older: the same libraries
        # on both sides.
        read -r cudnn_lib cublaslt_lib <<<"$("$python" -c "$kWheelLibraries")"
        if [[ $cudnn_lib == - || $cublaslt_lib == - ]]; then
          echo "  (wheels: no nvidia/*/lib cuDNN and cuBLASLt beside $python's PyTorch: skipped)"
          continue
        fi
        choice=(SRUNWAY_ATTENTION=cudnn SRUNWAY_CUDNN_LIBRARY="$cudnn_lib" SRUNWAY_CUBLASLT_LIBRARY="$cublaslt_lib")
        label="srunway-train, PyTorch's cuDNN+cuBLASLt" ;;
      *) echo "unknown attention path $attention (kernels, cudnn, auto, heuristic, wheels, nobgradb, sinks," \
           "window)" >&2; exit 2 ;;
    esac
    run=$work/$size-$attention
    if ! env "${choice[@]}" "$train" --preset "$size" "${model[@]}" --micro-batch-size "$batch" --seq-length "$seq" \
      --mock-data --device cuda --train-steps $((steps + 3)) --log-interval 1 --metrics-file "$run.jsonl" >"$run.out" \
      2>"$run.err"; then
      echo "  $label failed: $(grep -m1 error "$run.err" || tail -n 1 "$run.err")"
      continue
    fi
    if [[ $attention == cudnn || $attention == heuristic || $attention == wheels || $attention == nobgradb ]] &&
      grep -qE "run it instead|attention runs on srunway.s kernels" "$run.err"; then
      echo "  ($label: cuDNN did not run all of attention: $(grep -m1 -E "run it instead|srunway.s kernels" "$run.err"))"
    fi
    if [[ $attention == cudnn ]]; then  # matmul.cc's debug lines per product timed and per product split
      echo "  ($label: $(grep -c 'algorithms timed' "$run.err") GEMM products timed," \
        "$(grep -cE 'kept #[1-9]' "$run.err") kept another algorithm than the heuristic's first;" \
        "$(grep -c 'k split in' "$run.err") split k, $(grep -c 'parts added in bf16' "$run.err") adding the parts in" \
        "bf16, which --disable-bf16-reduced-precision-matmul forbids)"
    fi
    found=$(grep -oE 'MFU against the GPU.s dense bf16 peak [0-9.]+ GFLOP/s' "$run.err" | grep -oE '[0-9.]+ GFLOP' |
      cut -d' ' -f1)
    peak=${found:-989400}
    read -r tokens memory <<<"$("$python" -c "
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l][3:]
print(f'{statistics.median(r[\"tokens_per_s\"] for r in rows):.1f}', f'{rows[-1][\"peak_memory_gib\"]:.2f}')" \
      "$run.jsonl")"
    labels+=("$label")
    ours+=("$tokens")
    printf '  %-26s %10.0f tokens/s  MFU %5.1f%%  peak %6.2f GiB\n' "$label" "$tokens" \
      "$(awk -v t="$tokens" -v f="$flops" -v p="$peak" 'BEGIN {print 100 * t * f / (p * 1e9)}')" "$memory"
  done
  for mode in ${SRUNWAY_BENCH_TORCH_MODES:-compile eager}; do
    [[ $mode == compile || $mode == eager ]] || { echo "unknown PyTorch mode $mode (compile, eager)" >&2; exit 2; }
    if ! line=$("$python" "$here/torch_train_gpu.py" "$layers" "$hidden" "$heads" "$seq" "$vocab" "$batch" "$steps" \
      5 "$mode" 2>"$work/torch.err"); then
      echo "  PyTorch $mode failed: $(tail -n 1 "$work/torch.err")"
      continue
    fi
    theirs=$(grep -oE 'tokens_per_s=[0-9.]+' <<<"$line" | cut -d= -f2)
    their_mem=$(grep -oE 'peak_gib=[0-9.]+' <<<"$line" | cut -d= -f2)
    version=$(grep -oE 'torch=[^ ]+' <<<"$line" | cut -d= -f2)
    printf '  %-26s %10.0f tokens/s  MFU %5.1f%%  peak %6.2f GiB\n' "PyTorch $version $mode" "$theirs" \
      "$(awk -v t="$theirs" -v f="$flops" -v p="$peak" 'BEGIN {print 100 * t * f / (p * 1e9)}')" "$their_mem"
    for i in "${!labels[@]}"; do
      echo "  ratio ${labels[i]} / PyTorch $mode = $(awk -v a="${ours[i]}" -v b="$theirs" \
        'BEGIN {printf "%.2f", a / b}') (goal >= 1.1 against compile)"
    done
  done
done
