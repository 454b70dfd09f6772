#!/usr/bin/env bash
# What every program says to --version (its name and srunway's version, then what the build has: whether
# srunway-train carries its CUDA kernels) and to an option it does not have (one line naming the program and the
# option, exit 2; CLI11 alone says it in two lines without the program's name, and names a missing required
# argument instead where there is one), and srunway-launch's refusal of an
# option it does not know before the command (it used to run it as the program: "cannot run '--hang-timout'" on
# every rank).
#   programs_cli.sh VERSION CUDA(yes|no) PROGRAM...
set -euo pipefail
version=${1:?usage: programs_cli.sh VERSION CUDA PROGRAM...} cuda=${2:?}
shift 2
fail() { echo "FAIL: $*" >&2; exit 1; }
want_cuda=$([[ $cuda == yes ]] && echo "CUDA kernels for sm_80 and sm_90 \(nvcc [0-9.]+\)" ||
  echo "no CUDA kernels \(no nvcc when it was built: srunway-train trains on CPUs only\)")

launch="" train=""
for program in "$@"; do
  name=$(basename "$program")
  [[ $name == srunway-launch ]] && launch=$program
  [[ $name == srunway-train ]] && train=$program
  out=$("$program" --version 2>&1) || fail "$name --version: exit $?: $out"
  [[ $(sed -n 1p <<<"$out") == "$name $version" ]] || fail "$name --version, first line: $out"
  sed -n 2p <<<"$out" | grep -Eq "^built with: $want_cuda, " || fail "$name --version, second line: $out"
  (($(wc -l <<<"$out") == 2)) || fail "$name --version: not two lines: $out"
  echo "ok: $name --version: $(sed -n 1p <<<"$out")"
  # Output that cannot be written (a full disk) is one line and a failure: it was exit 0 with the output lost, or,
  # past stdio's buffer, an abort (exit 134) from the exception fmt::print throws.
  rc=0
  out=$("$program" --help 2>&1 >/dev/full) || rc=$?
  want_rc=$([[ $name == run-nccl-tests ]] && echo 2 || echo 1)
  [[ $rc == "$want_rc" && $(wc -l <<<"$out") == 1 &&
     $out =~ ^$name\[[^]]*\]\ error:\ cannot\ write\ to\ stdout:\ .*\;\ the\ output\ is\ incomplete$ ]] ||
    fail "$name --help >/dev/full: exit $rc, want $want_rc and one line: $out"
  echo "ok: $name --help >/dev/full: $out"
  [[ $name == srunway-launch ]] && continue  # its own line, below
  rc=0
  out=$("$program" --no-such-option 2>&1) || rc=$?
  # The option is named even where a required argument is missing too (srunway-collbench's test,
  # srunway-blueprint's subcommand and file): CLI11 alone reports only the missing one.
  [[ $rc == 2 && $(wc -l <<<"$out") == 1 &&
     $out == "$name: The following argument was not expected: --no-such-option (see --help)" ]] ||
    fail "$name --no-such-option: exit $rc, want 2 and one line naming $name and the option: $out"
  echo "ok: $out"
  if [[ $name == srunway-blueprint ]]; then
    rc=0
    out=$("$program" validate --no-such-option 2>&1) || rc=$?
    [[ $rc == 2 && $out == "$name: The following argument was not expected: --no-such-option (see --help)" ]] ||
      fail "$name validate --no-such-option (no file): exit $rc: $out"
    echo "ok: $out"
  fi
done

# 64-bit integer options: CLI11 kept what strtoll/strtoull returned, saturated past 64 bits and, for an unsigned
# option, "-1" wrapped to 2^64 - 1 ("--seed -1" trained with seed 18446744073709551615, without a word).
[[ -n $train ]] || fail "no srunway-train among the programs"
while IFS='|' read -r args want; do
  rc=0
  read -ra words <<<"$args"
  out=$("$train" --mock-data --train-steps 1 "${words[@]}" 2>&1) || rc=$?
  [[ $rc == 2 && $out == "srunway-train: $want (see --help)" ]] || fail "srunway-train $args: exit $rc: $out"
done <<'CASES'
--seed -1|--seed: -1 is negative
--seed 18446744073709551616|--seed: 18446744073709551616 is more than 18446744073709551615
--train-steps 99999999999999999999|--train-steps: 99999999999999999999 is outside [-9223372036854775808, 9223372036854775807]
--lr 1e300|--lr: 1e300 is beyond a 32-bit float's range (3.4e38)
--init-std 1e39|--init-std: 1e39 is beyond a 32-bit float's range (3.4e38)
--adam-eps 1e-50|--adam-eps: 1e-50 is 0 as a 32-bit float
CASES
echo "ok: srunway-train refuses 64-bit integers out of range instead of saturating or wrapping them, and numbers" \
  "a 32-bit float option cannot hold (--lr 1e300 was refused as '--lr inf'; --adam-eps 1e-50 became 0)"

[[ -n $launch ]] || fail "no srunway-launch among the programs"
rc=0
out=$("$launch" --hang-timout 900 -- true 2>&1) || rc=$?
[[ $rc == 2 ]] || fail "srunway-launch with a mistyped option: exit $rc, want 2: $out"
[[ $out == "srunway-launch: unknown option '--hang-timout' (see --help; the command goes after --)" ]] ||
  fail "srunway-launch with a mistyped option said: $out"
rc=0
out=$("$launch" --timeout 0 -- true 2>&1) || rc=$?
[[ $rc == 2 && $out == "srunway-launch: --timeout: 0 is not above 0 (see --help)" ]] ||
  fail "srunway-launch --timeout 0: exit $rc: $out"
rc=0
out=$("$launch" --timeout 5 true --not-an-option-of-ours 2>&1) || rc=$?
[[ $rc == 0 ]] || fail "a program's own options after its name: exit $rc: $out"
# Options of one mode given in the other were taken and ignored: --log-dir under --no-supervise wrote no log.
while IFS='|' read -r args want; do
  rc=0
  read -ra words <<<"$args"
  out=$("$launch" "${words[@]}" 2>&1) || rc=$?
  [[ $rc == 2 && $out == "srunway-launch: $want (see --help)" ]] || fail "srunway-launch $args: exit $rc: $out"
done <<'CASES'
--no-supervise --log-dir /tmp -- true|--no-supervise excludes --log-dir
--no-supervise --hang-timeout 5 -- true|--no-supervise excludes --hang-timeout
--check --log-dir /tmp|--check excludes --log-dir
--check --hang-timeout 5|--check excludes --hang-timeout
--json -- true|--json requires --check
--comm mpi -- true|--comm requires --check
--bytes 64 -- true|--bytes requires --check
--tee -- true|--tee requires --log-dir
CASES
echo "ok: srunway-launch refuses an unknown option before the command or an option of another mode, and passes the command's own on"
