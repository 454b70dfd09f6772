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

option_value() {  # NAME: the value of a meson option in the build
  meson introspect --buildoptions "$kBuild" 2>/dev/null | python3 -c \
    'import json, sys; print(*(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}

# -g1: line tables, all that a sanitizer report's stack needs, for less compile time than full debug information.
# ThreadSanitizer's copies are build/'s: gcc's, as they always were. Linked by lld where it is installed
# (scripts/install-deps.sh installs it): it linked the asan suite's programs and the fuzzers 3 to 4 times faster
# than ld.bfd (cuda-ops-emulated-asan 3.9 s -> 0.8 s, a unit test 2.4 s -> 0.7 s, a fuzzer 0.8 s -> 0.4 s).
if [[ ! -f $kBuild/build.ninja ]]; then
  linker=()
  command -v ld.lld >/dev/null && linker=(CC_LD=lld CXX_LD=lld)
  env CC=clang CXX=clang++ "${linker[@]}" meson setup "$kBuild" "$kRepo" -Dfuzz=enabled -Dcuda=disabled \
    -Dthread_sanitized_tests=disabled -Dbuildtype=debugoptimized -Dcpp_args=-g1 \
    >"$kRepo/.meson-fuzz-setup.log" 2>&1 || {
    tail -n 20 "$kRepo/.meson-fuzz-setup.log" >&2
    echo "build-sanitized: meson setup with clang failed" >&2
    exit 1
  }
  rm -f "$kRepo/.meson-fuzz-setup.log"
elif [[ $(option_value sanitized_tests) == disabled ]]; then
  # A build-fuzz/ that fuzz.sh configured before 2026-12-06 has no ASan copies of the tests (no asan-tests).
  meson configure "$kBuild" -Dsanitized_tests=auto >/dev/null
fi
log=$kBuild/ninja-${1//\//-}.log
ninja -C "$kBuild" "$@" >"$log" 2>&1 || {
  grep -E 'error' -A 5 "$log" | head -n 40 >&2
  echo "build-sanitized: building $* failed (log: $log)" >&2
  exit 1
}
