#!/usr/bin/env bash
# Configures (once) and builds srunway in build/ (or $SRUNWAY_BUILD_DIR); extra arguments go to `meson setup`.
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_BUILD_DIR:-$kRepo/build}

die() { echo "build: $*" >&2; exit 1; }
source "$kRepo/scripts/site-lib.sh"
use_cuda_toolkit auto  # nvcc lives outside PATH in the CUDA images; meson finds it only on PATH

if [[ ! -f $kBuild/build.ninja ]]; then
  echo "build: configuring $kBuild"
  if ! meson setup "$kBuild" "$kRepo" "$@" >"$kRepo/.meson-setup.log" 2>&1; then
    tail -n 30 "$kRepo/.meson-setup.log" >&2
    echo "build: meson setup failed (full log: $kRepo/.meson-setup.log)" >&2
    exit 1
  fi
  sed -n '/^srunway /,$p' "$kRepo/.meson-setup.log"
  rm -f "$kRepo/.meson-setup.log"
fi
"$kRepo/scripts/cuda-stale.sh" "$kBuild"
echo "build: compiling in $kBuild ($(nproc) jobs)"
if ! ninja -C "$kBuild" >"$kBuild/ninja.log" 2>&1; then
  grep -E 'error|FAILED' -A 5 "$kBuild/ninja.log" | head -n 60 >&2
  echo "build: compilation failed (full log: $kBuild/ninja.log)" >&2
  exit 1
fi
if grep -q 'warning:' "$kBuild/ninja.log"; then
  grep 'warning:' "$kBuild/ninja.log" | head -n 20 >&2
fi
echo "build: done"
