#!/usr/bin/env bash
# Configures (once) and builds the clang build in build-fuzz/ (or $SRUNWAY_FUZZ_BUILD_DIR), whose libraries carry
# AddressSanitizer, UBSan and libFuzzer's coverage: the libFuzzer targets and the unit tests' ASan/UBSan copies
# link them, so they are compiled once for both.
# Usage: scripts/build-sanitized.sh TARGET...
#   TARGET  a ninja target: asan-tests (the asan suite's programs), fuzzers (every libFuzzer target), or one
#           of them (tests/fuzz/hostlist_fuzzer)
# Exits 1 if the setup or the build fails (the errors on stderr), 2 on a bad argument.
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_FUZZ_BUILD_DIR:-$kRepo/build-fuzz}

(($#)) || { echo "build-sanitized: name the targets to build (asan-tests, fuzzers)" >&2; exit 2; }

# -g1: line tables, all that a sanitizer report's stack needs, for less compile time than full debug information.
# ThreadSanitizer's copies are build/'s: gcc's, as they always were.
if [[ ! -f $kBuild/build.ninja ]]; then
  CC=clang CXX=clang++ meson setup "$kBuild" "$kRepo" -Dfuzz=enabled -Dcuda=disabled \
    -Dthread_sanitized_tests=disabled -Dbuildtype=debugoptimized -Dcpp_args=-g1 \
    >"$kRepo/.meson-fuzz-setup.log" 2>&1 || {
    tail -n 20 "$kRepo/.meson-fuzz-setup.log" >&2
    echo "build-sanitized: meson setup with clang failed" >&2
    exit 1
  }
  rm -f "$kRepo/.meson-fuzz-setup.log"
fi
log=$kBuild/ninja-${1//\//-}.log
ninja -C "$kBuild" "$@" >"$log" 2>&1 || {
  grep -E 'error' -A 5 "$log" | head -n 40 >&2
  echo "build-sanitized: building $* failed (log: $log)" >&2
  exit 1
}
