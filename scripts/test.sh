#!/usr/bin/env bash
# README command two: installs dependencies, builds, starts the local cluster, runs every test suite, stops the cluster.
set -uo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_BUILD_DIR:-$kRepo/build}
readonly kFuzzBuild=${SRUNWAY_FUZZ_BUILD_DIR:-$kRepo/build-fuzz}  # the clang build: scripts/build-sanitized.sh
cd "$kRepo"

# How long each part took, in the closing lines: CI's budget is 35 minutes on 2 cores, and these say where it goes.
times=()
phase_start=$SECONDS
took() {
  times+=("$1 $((SECONDS - phase_start)) s")
  phase_start=$SECONDS
}

"$kRepo/scripts/install-deps.sh" || exit 1
took "dependencies"

side=$(mktemp -d)  # the logs and exit codes of the jobs that run beside the build and the suites
cluster_up=0
# Every process this script started that is still there, parents before children (ps's parent links, which setsid
# keeps): at the end, the jobs beside the suites and their tests, which a signal to this script alone (a CI runner's
# SIGTERM) or a Ctrl-C (which meson's tests, each in a session of its own, and the background jobs do not get)
# would leave running.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}
finish() {
  local left
  left=$(descendants $$)
  [[ -z $left ]] || kill $left 2>/dev/null
  rm -rf "$side"
  if ((cluster_up)); then
    "$kRepo/scripts/local-cluster.sh" down >/dev/null || echo "test: local-cluster.sh down failed" >&2
  fi
}
trap finish EXIT

# The clang build (build-fuzz/: its libraries carry ASan, UBSan and libFuzzer's coverage; the asan suite's programs
# and the libFuzzer targets link them) runs beside everything from here on, at the lowest priority: it takes what
# build/'s compile and then the suites leave of the cores, and the slurm suite, which runs one test at a time and
# mostly waits on its jobs, leaves one. The asan suite's programs first, then the fuzzers'. Their output goes to logs
# shown only if they fail, their exit codes to files that the side chain below waits for. meson starts each test
# in a session of its own, which the kernel's autogroup scheduling weighs as an equal of this script's whole
# session, whatever the nice values: a build at nice 19 took a third of the cores from the unit suite (389 s
# instead of 236). So it runs in a session of its own whose autogroup is at nice 19 too, where the kernel has
# autogroups.
lowest() { setsid --wait bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' lowest "$@"; }
{
  for part in asan-tests fuzzers; do
    lowest "$kRepo/scripts/build-sanitized.sh" "$part" >"$side/$part.log" 2>&1
    echo $? >"$side/$part.rc"
    echo "$SECONDS" >"$side/$part.end"
  done
} &

# -g1: line tables (all that backtraces and sanitizer reports need) instead of full debug information: an eighth
# less compile time for the plain build. No ASan copies here: the clang build has them.
"$kRepo/scripts/build.sh" -Dwerror=true -Dcpp_args=-g1 -Dsanitized_tests=disabled || exit 1
took "build"

cluster_up=1
"$kRepo/scripts/local-cluster.sh" up || exit 1
took "cluster start"

# The slurm suite fails instead of skipping if the cluster went away.
export SRUNWAY_REQUIRE_CLUSTER=1
# The tests' OpenMP threads (srunway-train's, OpenBLAS's, PyTorch's) sleep while they wait instead of spinning: meson
# runs two tests at a time on CI's 2 cores, and spinning threads took the cores from each other. On 2026-12-03
# train_cli took 297 s beside three other tests and 28 s with this, steps_vs_torch 308 s and 72 s, and the unit
# suite 6.5 minutes (15 in an earlier run here). The wait policy changes no result.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# The unit and gpu suites first, two tests at a time.
meson test -C "$kBuild" --suite unit --suite gpu --print-errorlogs --logbase testlog-unit
unit_rc=$?
took "unit and gpu suites"
logs=("$kBuild/meson-logs/testlog-unit.json")

# The slurm suite's one test that compiles (site_install builds the plugin twice) first, alone.
meson test -C "$kBuild" --suite slurm-build --no-rebuild --print-errorlogs --logbase testlog-slurm-build
slurm_rc=$?
took "site_install"
logs+=("$kBuild/meson-logs/testlog-slurm-build.json")

# The side chain, beside the rest of the slurm suite, which runs one test at a time and mostly waits on its jobs:
# the unit tests again with sanitizers at a lower priority, first build/'s ThreadSanitizer copies, then, once the
# clang build has them, its ASan/UBSan copies; then, once their build is done, the libFuzzer targets for a bounded
# time each, two side by side, at the lowest (a crash fails the run). They fill the idle core instead of adding to
# the run where the machine leaves time for it. On this project's 2-core machine it does not quite: on 2026-12-05
# the fuzzers' build was done 22 s after the slurm suite and their 122 s at 12 s a target ended the run (a clean
# clone, 2129 s): 6 s a target then, and 3 s since 2026-12-07, when the run was at 32 of its 35 minutes (the sixteen
# took 73 s at 6 s, 49 s at 3 s, 36 s at 1 s here). Each run replays its whole committed corpus first, however long
# that takes (blueprint_validate's 975 inputs take about 12 s), so a target's seconds are what is left of them for
# new inputs: CI's fuzzing is the corpus's regression check, the search for new inputs is scripts/fuzz.sh --long's.
# Their output goes to logs, shown after the slurm suite's.
# sanitized_suite NAME BUILD_DIR NOTE [ARGS]: the asan setup's tests of BUILD_DIR that ARGS choose, at nice 10;
# NOTE follows its time in the closing line.
# The list is read whole: `meson test --list | grep -q` under pipefail failed whenever grep's early exit made meson
# die of a broken pipe (4 times in 10 on a busy machine), which skipped that suite without a word.
sanitized_suite() {
  local name=$1 build=$2 note=$3 list start=$SECONDS
  shift 3
  if ! list=$(meson test -C "$build" --setup asan --no-rebuild --list "$@" 2>&1); then
    echo "test: meson could not list the $name suite's tests in $build: $(tail -n 1 <<<"$list")" >"$side/$name.log"
    echo 1 >"$side/$name.rc"
  elif ! grep -q -e "-$name\$" <<<"$list"; then
    echo "test: $build has no $name copies of the unit tests (the compiler cannot build them); that suite is" \
      "skipped" >"$side/$name.log"
    echo 0 >"$side/$name.rc"
  else
    nice -n 10 meson test -C "$build" --setup asan --no-rebuild --print-errorlogs "$@" >"$side/$name.log" 2>&1
    echo $? >"$side/$name.rc"
    echo "$build/meson-logs/testlog-asan.json" >>"$side/testlogs"  # meson adds the setup's name
  fi
  echo "$name suite $((SECONDS - start)) s$note" >>"$side/times"
}
# Waits for a part of the clang build; true if it was built.
built() {
  until [[ -s $side/$1.end || ! -d $side ]]; do sleep 1; done
  [[ $(<"$side/$1.rc") == 0 ]]
}
{
  sanitized_suite tsan "$kBuild" "" --suite tsan
  if built asan-tests; then
    sanitized_suite asan "$kFuzzBuild" " (its build done $(<"$side/asan-tests.end") s into the run)"
  fi
  if built fuzzers; then
    fuzz_start=$SECONDS
    lowest "$kRepo/scripts/fuzz.sh" -j 2 "${SRUNWAY_FUZZ_SECONDS:-3}" >"$side/fuzz.log" 2>&1
    echo $? >"$side/fuzz.rc"
    echo "fuzzers $((SECONDS - fuzz_start)) s (their build done $(<"$side/fuzzers.end") s into the run)" >>"$side/times"
  fi
} &
side_pid=$!

meson test -C "$kBuild" --suite slurm --no-suite slurm-build --no-rebuild --print-errorlogs --logbase testlog-slurm
((slurm_rc |= $?))
took "slurm suite"
logs+=("$kBuild/meson-logs/testlog-slurm.json")
wait "$side_pid"
took "the rest beside it"
sanitized_rc=0
for name in tsan asan; do
  if [[ -f $side/$name.log ]]; then
    echo "test: the $name suite (run beside the slurm suite):"
    cat "$side/$name.log"
    [[ $(<"$side/$name.rc") == 0 ]] || sanitized_rc=1
  fi
done
[[ ! -f $side/testlogs ]] || mapfile -t -O "${#logs[@]}" logs <"$side/testlogs"
for part in asan-tests fuzzers; do
  if [[ $(<"$side/$part.rc") != 0 ]]; then
    cat "$side/$part.log" >&2
    sanitized_rc=1
  fi
done
fuzz_rc=1
if [[ -f $side/fuzz.rc ]]; then
  echo "test: the fuzzers (run beside the slurm suite):"
  cat "$side/fuzz.log"
  fuzz_rc=$(<"$side/fuzz.rc")
fi

# One plain closing line over both runs, for people and for CI.
python3 - "${logs[@]}" <<'PY'
import json, os, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for path in sys.argv[1:]:
    if not os.path.exists(path):  # a suite without tests here (no Slurm, no sanitizers) writes no log
        continue
    for line in open(path):
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            counts["passed"] += 1
        elif result == "SKIP":
            counts["skipped"] += 1
        else:
            counts["failed"] += 1
print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
PY
echo "test: took ${times[*]/%/,} in all $SECONDS s; beside the slurm suite: $(paste -sd, "$side/times" | sed 's/,/, /g')"
((unit_rc == 0 && slurm_rc == 0 && sanitized_rc == 0 && fuzz_rc == 0))
