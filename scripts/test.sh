#!/usr/bin/env bash
# README command two: installs dependencies, builds, starts the local cluster, runs every test suite, stops the cluster.
set -uo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kBuild=${SRUNWAY_BUILD_DIR:-$kRepo/build}
cd "$kRepo"

"$kRepo/scripts/install-deps.sh" || exit 1
# -g1: line tables (all that backtraces and sanitizer reports need) instead of full debug information, which made
# compiling a quarter longer.
"$kRepo/scripts/build.sh" -Dwerror=true -Dcpp_args=-g1 || exit 1

# What runs in the background runs in a session of its own, so that stopping it stops its children too.
background=()
cleanup() {
  local pid
  for pid in "${background[@]}"; do
    kill -- "-$pid" 2>/dev/null
  done
  "$kRepo/scripts/local-cluster.sh" down >/dev/null || echo "test: local-cluster.sh down failed" >&2
}
"$kRepo/scripts/local-cluster.sh" up || exit 1
trap cleanup EXIT

# The unit tests again, built with AddressSanitizer and UBSan (absent where the compiler cannot build them). The
# list is read whole: `meson test --list | grep -q` under pipefail failed whenever grep's early exit made meson
# die of a broken pipe (4 times in 10 on a busy machine), which skipped this suite without a word.
asan_rc=0 sanitized=0
if ! asan_tests=$(meson test -C "$kBuild" --setup asan --list 2>&1); then
  echo "test: meson could not list the asan setup's tests: $(tail -n 1 <<<"$asan_tests")" >&2
  asan_rc=1
elif grep -q 'asan' <<<"$asan_tests"; then
  sanitized=1
else
  echo "test: this build has no ASan/UBSan unit tests (the compiler cannot build them); that suite is skipped"
fi

# Beside the main suite, at idle priority (SCHED_IDLE: a core only when nothing else wants it, so the slurm
# suite's timed tests keep the machine): the emulated GPU's sanitized runs (suite `emulated`: computation with
# no deadline inside, about 3 minutes of a core) and the fuzzers' clang build (5 minutes of both). The main
# suite's serial tests leave a core or more idle for most of its 12 minutes; one after the other, these took 8.
readonly kAside=$kBuild/meson-logs/test-aside
mkdir -p "$kAside"
if ((sanitized)); then
  setsid chrt --idle 0 meson test -C "$kBuild" --setup asan --suite emulated --no-rebuild --logbase testlog-emulated \
    --timeout-multiplier 4 --print-errorlogs >"$kAside/emulated.out" 2>&1 &
  emulated_pid=$!
  background+=("$emulated_pid")
fi
setsid chrt --idle 0 "$kRepo/scripts/fuzz.sh" --build-only >"$kAside/fuzz-build.out" 2>&1 &
fuzz_build_pid=$!
background+=("$fuzz_build_pid")

# The slurm suite fails instead of skipping if the cluster went away.
export SRUNWAY_REQUIRE_CLUSTER=1
meson test -C "$kBuild" --no-rebuild --print-errorlogs
main_rc=$?
logs=("$kBuild/meson-logs/testlog.json")

if ((sanitized)); then
  meson test -C "$kBuild" --setup asan --no-suite emulated --no-rebuild --print-errorlogs
  asan_rc=$?
  logs+=("$kBuild/meson-logs/testlog-asan.json")
  wait "$emulated_pid" || asan_rc=1
  echo "test: the emulated GPU's sanitized runs, beside the main suite:"
  cat "$kAside/emulated.out"
  logs+=("$kBuild/meson-logs/testlog-emulated-asan.json")
fi

# The libFuzzer targets for a bounded time each, two side by side (a crash fails the run), once their build is
# done (a failed build is built again here, which prints its errors).
wait "$fuzz_build_pid"
background=()
fuzz_rc=0
"$kRepo/scripts/fuzz.sh" -j 2 "${SRUNWAY_FUZZ_SECONDS:-30}" || fuzz_rc=1

# One plain closing line over both runs, for people and for CI.
python3 - "${logs[@]}" <<'PY'
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for path in sys.argv[1:]:
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
((main_rc == 0 && asan_rc == 0 && fuzz_rc == 0))
