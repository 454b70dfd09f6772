#!/usr/bin/env bash
# What every program says to --version (its name and srunway's version, then what the build has: whether
# srunway-train carries its CUDA kernels), and srunway-launch's refusal of an option it does not know before the
# command (it used to run it as the program: "cannot run '--hang-timout'" on every rank).
#   programs_cli.sh VERSION CUDA(yes|no) PROGRAM...
set -euo pipefail
version=${1:?usage: programs_cli.sh VERSION CUDA PROGRAM...} cuda=${2:?}
shift 2
fail() { echo "FAIL: $*" >&2; exit 1; }
want_cuda=$([[ $cuda == yes ]] && echo "CUDA kernels for sm_80 and sm_90 \(nvcc [0-9.]+\)" ||
  echo "no CUDA kernels \(no nvcc when it was built: srunway-train trains on CPUs only\)")

launch=""
for program in "$@"; do
  name=$(basename "$program")
  [[ $name == srunway-launch ]] && launch=$program
  out=$("$program" --version 2>&1) || fail "$name --version: exit $?: $out"
  [[ $(sed -n 1p <<<"$out") == "$name $version" ]] || fail "$name --version, first line: $out"
  sed -n 2p <<<"$out" | grep -Eq "^built with: $want_cuda, " || fail "$name --version, second line: $out"
  (($(wc -l <<<"$out") == 2)) || fail "$name --version: not two lines: $out"
  echo "ok: $name --version: $(sed -n 1p <<<"$out")"
done

[[ -n $launch ]] || fail "no srunway-launch among the programs"
rc=0
out=$("$launch" --hang-timout 900 -- true 2>&1) || rc=$?
[[ $rc == 2 ]] || fail "srunway-launch with a mistyped option: exit $rc, want 2: $out"
[[ $out == "srunway-launch: unknown option '--hang-timout' (see --help; the command goes after --)" ]] ||
  fail "srunway-launch with a mistyped option said: $out"
rc=0
out=$("$launch" --timeout 0 -- true 2>&1) || rc=$?
[[ $rc == 2 && $(sed -n 1p <<<"$out") == "--timeout: 0 is not above 0" ]] || fail "srunway-launch --timeout 0: exit $rc: $out"
rc=0
out=$("$launch" --timeout 5 true --not-an-option-of-ours 2>&1) || rc=$?
[[ $rc == 0 ]] || fail "a program's own options after its name: exit $rc: $out"
echo "ok: srunway-launch refuses an unknown option before the command, and passes the command's own on"
