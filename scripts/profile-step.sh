#!/usr/bin/env bash
# Profile of one training step on a GPU: srunway-train (the benchmark's shapes: gpt2-124m at 16 x 1024, gpt3-1.3b
# at 8 x 2048) with --profile-step on its fourth step, and the top kernels with their share of the step's GPU time
# (scripts/kernel_shares.py). The first of these that is here records it:
#   nsys      each kernel's time as it ran on the timeline;
#   timeline  the same from tests/bench/cupti_timeline.cc's CUPTI injection library (libsrunway-timeline.so, beside
#             srunway-train or in the build tree), and where the GPU sat idle within the step;
#   ncu       each kernel timed alone, serialized, at the GPU's own clocks and with the caches as the previous kernel
#             left them, so that the sum comes close to a step run free (shares of the summed kernel time, not of
#             the wall clock).
#   scripts/profile-step.sh [SIZE [TOP]]     exit 77 without a GPU or a profiler
# SRUNWAY_TRAIN names the srunway-train to profile (default: the build tree's, else the one on PATH);
# SRUNWAY_PROFILER=nsys|timeline|ncu picks one.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
train=${SRUNWAY_TRAIN:-$here/../build/trainer/srunway-train}
[[ -x $train ]] || train=$(command -v srunway-train) || { echo "profile-step: no srunway-train (set SRUNWAY_TRAIN)" >&2; exit 2; }
size=${1:-gpt2-124m}
top=${2:-15}
declare -A shapes=([gpt2-124m]="16 1024" [gpt3-1.3b]="8 2048")
[[ -n ${shapes[$size]:-} ]] || { echo "profile-step: unknown size $size (${!shapes[*]})" >&2; exit 2; }
read -r batch seq <<<"${shapes[$size]}"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "SKIP: no GPU here"; exit 77; }
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -n 1)
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute*/ncu 2>/dev/null | head -n 1)
timeline=$(ls "$(dirname "$train")/libsrunway-timeline.so" "$here/../build/tests/bench/libsrunway-timeline.so" \
  2>/dev/null | head -n 1)
case ${SRUNWAY_PROFILER:-} in
  "") ;;
  nsys) timeline="" ncu="" ;;
  timeline) nsys="" ncu="" ;;
  ncu) nsys="" timeline="" ;;
  *) echo "profile-step: SRUNWAY_PROFILER is nsys, timeline or ncu, not '$SRUNWAY_PROFILER'" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=("$train" --preset "$size" --micro-batch-size "$batch" --seq-length "$seq" --mock-data --device cuda
     --train-steps 4 --profile-step 4 --log-interval 1)

echo "== $size: batch $batch x $seq, step 4 of 4 captured"
if [[ -n $nsys ]]; then
  "$nsys" profile --capture-range=cudaProfilerApi --capture-range-end=stop --trace=cuda --sample=none \
    --force-overwrite=true -o "$work/step" "${run[@]}" >"$work/run.log" 2>&1 ||
    { echo "nsys profile failed: $(tail -n 5 "$work/run.log")"; exit 1; }
  csv=""
  for report in cuda_gpu_kern_sum gpukernsum; do  # the report's name in newer and older nsys
    if "$nsys" stats --report "$report" --format csv --output "$work/kern" "$work/step.nsys-rep" >>"$work/run.log" 2>&1; then
      csv=$(ls "$work"/kern_*.csv 2>/dev/null | head -n 1)
      [[ -n $csv ]] && break
    fi
  done
  [[ -n $csv ]] || { echo "nsys stats wrote no kernel summary: $(tail -n 5 "$work/run.log")"; exit 1; }
  echo "profiler: $("$nsys" --version 2>/dev/null | head -n 1) (timeline)"
  python3 "$here/kernel_shares.py" nsys "$csv" "$top"
elif [[ -n $timeline ]]; then
  CUDA_INJECTION64_PATH=$timeline SRUNWAY_TIMELINE=$work/step.csv "${run[@]}" >"$work/run.log" 2>&1 ||
    { echo "srunway-train under the CUPTI timeline failed: $(tail -n 5 "$work/run.log")"; exit 1; }
  [[ -s $work/step.csv ]] || { echo "the CUPTI timeline wrote nothing: $(tail -n 5 "$work/run.log")"; exit 1; }
  echo "profiler: CUPTI activity timeline ($(basename "$timeline"); each kernel as it ran)"
  python3 "$here/kernel_shares.py" timeline "$work/step.csv" "$top"
elif [[ -n $ncu ]]; then
  "$ncu" --profile-from-start off --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --print-units base --csv \
    --log-file "$work/ncu.csv" "${run[@]}" >"$work/run.log" 2>&1 ||
    { echo "ncu failed: $(tail -n 5 "$work/run.log") $(tail -n 5 "$work/ncu.csv" 2>/dev/null)"; exit 1; }
  echo "profiler: $("$ncu" --version 2>/dev/null | tail -n 1) (each kernel alone, serialized, own clocks, caches kept)"
  python3 "$here/kernel_shares.py" ncu "$work/ncu.csv" "$top"
else
  echo "SKIP: no profiler here (nsys, libsrunway-timeline.so, ncu)"
  exit 77
fi
grep -E '^step +4/4' "$work/run.log" | sed 's/^/srunway-train: /'
