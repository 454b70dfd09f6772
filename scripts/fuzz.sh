#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for a bounded time over its seed corpus.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 20). Exits 1 on any crash, leak or sanitizer report.
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_FUZZ_BUILD_DIR:-$kRepo/build-fuzz}
readonly kSeconds=${1:-20}
readonly kTargets=(hostlist plugin_args topology_xml tcp_frame megatron_idx nccl_tests_log blueprint_validate)

if [[ ! -f $kBuild/build.ninja ]]; then
  CC=clang CXX=clang++ meson setup "$kBuild" "$kRepo" -Dfuzz=enabled -Dcuda=disabled -Dsanitized_tests=disabled \
    -Dbuildtype=debugoptimized >"$kRepo/.meson-fuzz-setup.log" 2>&1 || {
    tail -n 20 "$kRepo/.meson-fuzz-setup.log" >&2
    echo "fuzz: meson setup with clang failed" >&2
    exit 1
  }
  rm -f "$kRepo/.meson-fuzz-setup.log"
fi
ninja -C "$kBuild" $(printf 'tests/fuzz/%s_fuzzer ' "${kTargets[@]}") >"$kBuild/ninja-fuzz.log" 2>&1 || {
  grep -E 'error' -A 5 "$kBuild/ninja-fuzz.log" | head -n 40 >&2
  echo "fuzz: build failed (log: $kBuild/ninja-fuzz.log)" >&2
  exit 1
}

failed=0
for target in "${kTargets[@]}"; do
  corpus=$(mktemp -d)  # new inputs go here; the committed seeds stay as they are
  log=$kBuild/fuzz-$target.log
  if "$kBuild/tests/fuzz/${target}_fuzzer" -max_total_time="$kSeconds" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$kBuild/fuzz-$target-" "$corpus" "$kRepo/tests/fuzz/corpus/$target" >"$log" 2>&1; then
    echo "fuzz: $target: no crash in ${kSeconds}s ($(grep -o 'Done [0-9]* runs' "$log" | tail -n 1))"
  else
    echo "fuzz: $target: FAILED; crash input and report in $kBuild (log: $log)" >&2
    grep -E 'ERROR|SUMMARY|==[0-9]+==' "$log" | head -n 10 >&2
    failed=1
  fi
  rm -rf "$corpus"
done
exit $failed
