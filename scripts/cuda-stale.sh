#!/usr/bin/env bash
# Removes the CUDA objects of a build folder that are older than a CUDA source or header here, so that ninja
# builds them again. meson 1.0 has nvcc write no dependency file, so ninja rebuilds a CUDA object only when its own
# input changes: never for a header (common.cuh, kernels.h), and never at all in a unity build, whose input is a
# file meson generates that includes the .cu files. Without this, an edited kernel could go unbuilt into a GPU
# bundle or a test run.
#   scripts/cuda-stale.sh BUILD_DIR      prints how many objects it removed, if any
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($# == 1)) || { echo "cuda-stale: usage: scripts/cuda-stale.sh BUILD_DIR" >&2; exit 2; }
build=$1
[[ -d $build ]] || exit 0

# What nvcc reads of ours: the .cu and .cuh files and the headers they include, followed to the end.
mapfile -t inputs < <(find "$kRepo/trainer/ops/cuda" "$kRepo/tests/gpu" -type f \( -name '*.cu' -o -name '*.cuh' \))
for ((i = 0; i < ${#inputs[@]}; ++i)); do
  while read -r header; do
    [[ -f $kRepo/$header && " ${inputs[*]} " != *" $kRepo/$header "* ]] && inputs+=("$kRepo/$header")
  done < <(sed -n 's/^#include "\(.*\)"/\1/p' "${inputs[i]}")
done
newest=$(find "${inputs[@]}" -maxdepth 0 -printf '%T@\n' | sort -n | tail -n 1)
[[ -n $newest ]] || exit 0
removed=$(find "$build" -name '*.cu.o' ! -newermt "@$newest" -print -delete | wc -l)
((removed == 0)) || echo "cuda-stale: $removed CUDA object(s) in $build older than their sources, to be built again"
