#!/usr/bin/env bash
# Benchmark: the trainer's causal attention kernels (flash_attention_mma.cu's, and the WMMA ones of
# flash_attention.cu) and its cuDNN graphs (cudnn_attention.cc, SRUNWAY_ATTENTION=cudnn) against PyTorch's scaled_dot_product_attention on its FlashAttention-2 and cuDNN backends,
# on this GPU in one run, at GPT-2 124M's shape (B 16, T 1024, 12 heads of 64) and the 1.3B GPT's (B 8, T 2048, 16
# heads of 128), bf16: mean milliseconds and TFLOP/s of the forward and the backward, and the ratio of each
# PyTorch backend's forward + backward time to ours (above 1: ours is faster). FLOPs as FlashAttention's own
# benchmarks count them: forward 4 B H T^2 hd / 2 (causal), backward 2.5 times the forward. Asserts nothing about
# time; exits 77 without a GPU or without PyTorch with CUDA. Then at the 1.3B's shape with documents of 512 tokens
# (--reset-attention-mask): our kernels, the only ones of ours that take documents, against PyTorch's SDPA given
# the mask (FLOPs those of the causal attention, for comparison with the rows above, not the documents' fewer).
#   SRUNWAY_ATTENTION_BENCH  tests/bench/attention_bench (built with the CUDA kernels)
#   SRUNWAY_BENCH_STEPS      calls timed per kernel (default 20)
#   SRUNWAY_BENCH_TORCH      python with PyTorch (default python3)
set -euo pipefail
bench=${SRUNWAY_ATTENTION_BENCH:?SRUNWAY_ATTENTION_BENCH must name attention_bench}
python=${SRUNWAY_BENCH_TORCH:-python3}
iterations=${SRUNWAY_BENCH_STEPS:-20}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIP: no PyTorch with a CUDA GPU here ($python)"
  exit 77
fi

field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }
report() {  # report NAME FORWARD_MS BACKWARD_MS FORWARD_FLOPS OURS_TOTAL_MS
  awk -v name="$1" -v f="$2" -v b="$3" -v flops="$4" -v ours="$5" 'BEGIN {
    line = sprintf("  %-16s forward %8.3f ms %6.1f TFLOP/s   backward %8.3f ms %6.1f TFLOP/s", name, f,
                   flops / f / 1e9, b, 2.5 * flops / b / 1e9)
    if (ours > 0) line = line sprintf("   ratio %s/ours %.2f", name, (f + b) / ours)
    print line }'
}

for shape in "16 1024 12 12 64" "8 2048 16 16 128" "8 2048 16 16 128 512"; do
  read -r B T H KV hd document <<<"$shape"
  flops=$(awk -v B="$B" -v T="$T" -v H="$H" -v hd="$hd" 'BEGIN {printf "%.0f", 2 * B * H * T * T * hd}')
  echo "causal attention B ${B} T ${T} H ${H} KV ${KV} head dim ${hd}${document:+, documents of $document tokens}," \
    "bf16, ${iterations} calls each"
  ours_total=0
  kernels=(mma wmma cudnn)
  [[ -n $document ]] && kernels=(mma)
  for kernel in "${kernels[@]}"; do
    line=$(SRUNWAY_ATTENTION=$kernel "$bench" "$B" "$T" "$H" "$KV" "$hd" "$iterations" $document) || {
      rc=$?; ((rc == 77)) && { echo "SKIP: no GPU for attention_bench"; exit 77; }
      echo "  srunway $kernel: attention_bench failed (exit $rc)"; continue; }
    f=$(field forward_ms "$line") b=$(field backward_ms "$line")
    report "srunway $kernel" "$f" "$b" "$flops" 0
    [[ $kernel == mma ]] && ours_total=$(awk -v f="$f" -v b="$b" 'BEGIN {print f + b}')
  done
  while read -r line; do
    name=torch-$(field backend "$line")
    if [[ -n $(field unavailable "$line") ]]; then
      echo "  $name: unavailable ($(field unavailable "$line" | tr _ ' '))"
      continue
    fi
    report "$name" "$(field forward_ms "$line")" "$(field backward_ms "$line")" "$flops" "$ours_total"
  done < <("$python" "$here/attention_torch.py" "$B" "$T" "$H" "$KV" "$hd" "$iterations" $document)
done
