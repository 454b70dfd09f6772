#!/usr/bin/env bash
# README command two: installs dependencies, builds, starts the local cluster, runs every test suite, stops the cluster.
set -uo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_BUILD_DIR:-$kRepo/build}
cd "$kRepo"

"$kRepo/scripts/install-deps.sh" || exit 1
# -g1: line tables (all that backtraces and sanitizer reports need) instead of full debug information: an eighth
# less compile time for the plain build.
"$kRepo/scripts/build.sh" -Dwerror=true -Dcpp_args=-g1 || exit 1

"$kRepo/scripts/local-cluster.sh" up || exit 1
trap '"$kRepo/scripts/local-cluster.sh" down >/dev/null || echo "test: local-cluster.sh down failed" >&2' EXIT

# The libFuzzer targets are built with clang beside the suites, at the lowest priority: the slurm suite runs one
# test at a time and mostly waits on its jobs, so the build (3.4 minutes on CI's two cores) fills the idle core
# instead of adding to the run. Its output goes to a log shown only if it fails. meson starts each test in a session
# of its own, which the kernel's autogroup scheduling weighs as an equal of this script's whole session, whatever
# the nice values: the build (nice 19) took a third of the cores from the unit suite (389 s instead of 236). So
# it runs in a session of its own whose autogroup is at nice 19 too, where the kernel has autogroups.
fuzz_build_log=$(mktemp)
setsid --wait bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$0" --build-only' \
  "$kRepo/scripts/fuzz.sh" >"$fuzz_build_log" 2>&1 &
fuzz_build_pid=$!

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
logs=("$kBuild/meson-logs/testlog-unit.json")

# The slurm suite's one test that compiles (site_install builds the plugin twice) first, alone.
meson test -C "$kBuild" --suite slurm-build --no-rebuild --print-errorlogs --logbase testlog-slurm-build
slurm_rc=$?
logs+=("$kBuild/meson-logs/testlog-slurm-build.json")

# The unit tests again, built with AddressSanitizer and UBSan (absent where the compiler cannot build them), at a
# lower priority beside the rest of the slurm suite, which runs one test at a time and mostly waits on its jobs:
# the sanitized tests (4 minutes of both of CI's cores alone) fill the idle core instead of adding to the run.
# Their output goes to a log, shown after the slurm suite's. The list is read whole: `meson test --list | grep -q`
# under pipefail failed whenever grep's early exit made meson die of a broken pipe (4 times in 10 on a busy
# machine), which skipped this suite without a word.
asan_rc=0
asan_pid=
asan_log=$(mktemp)
if ! asan_tests=$(meson test -C "$kBuild" --setup asan --list 2>&1); then
  echo "test: meson could not list the asan setup's tests: $(tail -n 1 <<<"$asan_tests")" >&2
  asan_rc=1
elif grep -q 'asan' <<<"$asan_tests"; then
  # Its log is testlog-asan.json (meson adds the setup's name).
  nice -n 10 meson test -C "$kBuild" --setup asan --no-rebuild --print-errorlogs >"$asan_log" 2>&1 &
  asan_pid=$!
  logs+=("$kBuild/meson-logs/testlog-asan.json")
else
  echo "test: this build has no ASan/UBSan unit tests (the compiler cannot build them); that suite is skipped"
fi

meson test -C "$kBuild" --suite slurm --no-suite slurm-build --no-rebuild --print-errorlogs --logbase testlog-slurm
((slurm_rc |= $?))
logs+=("$kBuild/meson-logs/testlog-slurm.json")
if [[ -n $asan_pid ]]; then
  wait "$asan_pid"
  asan_rc=$?
  echo "test: the asan suite (run beside the slurm suite):"
  cat "$asan_log"
fi
rm -f "$asan_log"

# The libFuzzer targets, built with clang, for a bounded time each, two side by side (a crash fails the run): 20 s
# each keeps the whole run under 35 minutes on CI's two cores (30 s each made it 35.9 at 931c359).
fuzz_rc=0
if ! wait "$fuzz_build_pid"; then
  cat "$fuzz_build_log" >&2
  fuzz_rc=1
elif ! "$kRepo/scripts/fuzz.sh" -j 2 "${SRUNWAY_FUZZ_SECONDS:-20}"; then
  fuzz_rc=1
fi
rm -f "$fuzz_build_log"

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
((unit_rc == 0 && slurm_rc == 0 && asan_rc == 0 && fuzz_rc == 0))
