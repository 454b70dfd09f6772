#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ (scripts/build-sanitized.sh) and runs each for a bounded
# time over its seed corpus.
# Usage: scripts/fuzz.sh [--long | --build-only] [-j JOBS] [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 20 (scripts/test.sh runs 3); TARGET names as in kTargets, default all of them.
#   --long              600 s per target unless SECONDS is given, a 30 s limit per input instead of 10 (a busy
#                       machine must not pass for a slow input), and the inputs that reach new code are merged
#                       into tests/fuzz/corpus/TARGET (commit them). Each target's run count goes to
#                       build-fuzz/fuzz-summary.txt with the date.
#   --build-only        builds the targets and runs none
#   -j JOBS             targets run side by side (default 1)
# Exits 1 on any crash, leak, timeout or sanitizer report, 2 on a bad argument.
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_FUZZ_BUILD_DIR:-$kRepo/build-fuzz}
readonly kTargets=(hostlist plugin_args topology_xml tcp_frame megatron_idx nccl_tests_log blueprint_validate
                   checkpoint_header safetensors_header prep_jsonl train_config hf_config
                   tokenizer_files hf_tokenizer sentencepiece_model sample_cache layer_pattern)

long=0 jobs=1 build_only=0
while [[ ${1:-} == --long || ${1:-} == --build-only || ${1:-} == -j ]]; do
  if [[ $1 == --long ]]; then
    long=1
    shift
  elif [[ $1 == --build-only ]]; then
    build_only=1
    shift
  else
    [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: -j needs a number of jobs" >&2; exit 2; }
    jobs=$2
    shift 2
  fi
done
seconds=$((long ? 600 : 20))
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
elif [[ -n ${1:-} && ${1:-} != [a-z]* ]]; then
  echo "fuzz: '$1' is neither a number of seconds nor a target" >&2
  exit 2
fi
targets=("$@")
((${#targets[@]})) || targets=("${kTargets[@]}")
for target in "${targets[@]}"; do
  if [[ " ${kTargets[*]} " != *" $target "* ]]; then
    echo "fuzz: unknown target '$target' (known: ${kTargets[*]})" >&2
    exit 2
  fi
done

"$kRepo/scripts/build-sanitized.sh" $(printf 'tests/fuzz/%s_fuzzer ' "${targets[@]}") || exit 1
((build_only)) && exit 0

# Runs one target; its result lines go to stdout/stderr, its exit code says whether it stayed clean.
run_target() {
  local target=$1 seeds=$kRepo/tests/fuzz/corpus/$1 corpus log runs before after rc=0
  mkdir -p "$seeds"
  corpus=$(mktemp -d)  # new inputs go here; the committed seeds stay as they are unless --long merges them
  log=$kBuild/fuzz-$target.log
  if "$kBuild/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=$((long ? 30 : 10)) -rss_limit_mb=2048 \
      -artifact_prefix="$kBuild/fuzz-$target-" "$corpus" "$seeds" >"$log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -n 1 | grep -o '[0-9]*' || echo '?')
    echo "fuzz: $target: no crash in ${seconds}s ($runs runs)"
    if ((long)); then
      before=$(find "$seeds" -type f | wc -l)
      "$kBuild/tests/fuzz/${target}_fuzzer" -merge=1 "$seeds" "$corpus" >>"$log" 2>&1 || {
        echo "fuzz: $target: merging the new inputs into $seeds failed (log: $log)" >&2
        rc=1
      }
      after=$(find "$seeds" -type f | wc -l)
      echo "$(date -u +%Y-%m-%d) $target ${seconds}s $runs runs, clean; corpus $before -> $after" \
        >>"$kBuild/fuzz-summary.txt"
    fi
  else
    echo "fuzz: $target: FAILED; crash input and report in $kBuild (log: $log)" >&2
    grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -n 10 >&2
    ((long)) && echo "$(date -u +%Y-%m-%d) $target FAILED after $(grep -o '#[0-9]*' "$log" | tail -n 1) runs" \
      >>"$kBuild/fuzz-summary.txt"
    rc=1
  fi
  rm -rf "$corpus"
  return $rc
}

failed=0
running=0
for target in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || failed=1
    ((running--))
  fi
  run_target "$target" &
  ((++running))
done
while ((running > 0)); do
  wait -n || failed=1
  ((running--))
done
exit $failed
