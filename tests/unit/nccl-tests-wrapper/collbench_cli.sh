#!/usr/bin/env bash
# srunway-collbench alone (one rank, the self communicator): nccl-tests' table for the sizes asked and its -J file;
# and each malformed flag refused before anything runs, one line and exit 2 (a -J path that cannot be written
# failed after the whole sweep; -f 0 or -i 0 measured one size of the range; --timeout 0 was taken).
#   collbench_cli.sh SRUNWAY_COLLBENCH
set -euo pipefail
readonly kBench=${1:?usage: collbench_cli.sh SRUNWAY_COLLBENCH}
readonly kWork=$(mktemp -d)
trap 'rm -rf "$kWork"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# refused PATTERN ARGS...: exit 2, one line on stderr matching PATTERN, no row measured.
refused() {
  local pattern=$1 rc=0
  shift
  "$kBench" "$@" >"$kWork/out" 2>"$kWork/err" || rc=$?
  [[ $rc == 2 && $(wc -l <"$kWork/err") == 1 ]] && grep -qE -- "$pattern" "$kWork/err" ||
    fail "srunway-collbench $*: exit $rc, want 2 and one line /$pattern/: $(cat "$kWork/err")"
  grep -qE '^ +[0-9]+ +[0-9]+ ' "$kWork/out" && fail "srunway-collbench $*: measured before refusing: $(cat "$kWork/out")"
  return 0
}
readonly kSelf=(--comm self -n 1 -w 0)

"$kBench" all_reduce "${kSelf[@]}" -b 1K -e 4K -f 2 -J "$kWork/run.json" >"$kWork/out" 2>"$kWork/err" ||
  fail "a run on the self communicator: $(cat "$kWork/err")"
[[ $(grep -cE '^ +[0-9]+ +[0-9]+ +float +sum ' "$kWork/out") == 3 ]] || fail "want rows for 1K, 2K, 4K: $(cat "$kWork/out")"
grep -q '^# Collective test concluded: all_reduce_perf$' "$kWork/out" || fail "no closing line: $(cat "$kWork/out")"
python3 - "$kWork/run.json" <<'PY' || fail "-J file: $(cat "$kWork/run.json")"
import json, sys
run = json.load(open(sys.argv[1]))
sizes = [row["size"] for row in run["results"]]
assert sizes == [1024, 2048, 4096], sizes
PY
echo "ok: one rank measures 1K, 2K, 4K and writes -J"

refused "-b 1G is larger than -e 1M" all_reduce "${kSelf[@]}" -b 1G -e 1M
refused "^srunway-collbench: --stepfactor: Value 0 not in range 1 to 1048576 \(see --help\)$" all_reduce -f 0
refused "-i 0 with -f 1 never gets from -b 1M to -e 4M: give -i or -f" all_reduce "${kSelf[@]}" -i 0 -b 1M -e 4M
refused "^srunway-collbench: --timeout: 0 is not above 0 \(see --help\)$" all_reduce --timeout 0
refused "-J $kWork/none/run.json: cannot write in $kWork/none: No such file or directory" \
  all_reduce "${kSelf[@]}" -b 1K -e 1K -J "$kWork/none/run.json"
refused "-J $kWork is a directory: name the file to write" all_reduce "${kSelf[@]}" -b 1K -e 1K -J "$kWork"
refused "-o prod: not a supported reduction \(sum, max, min\)" all_reduce "${kSelf[@]}" -o prod
refused "-d fp8: not a supported type" all_reduce "${kSelf[@]}" -d fp8
refused "-g 2 -t 1: one device per process only" all_reduce "${kSelf[@]}" -g 2
refused "unknown test 'all_scatter'" all_scatter "${kSelf[@]}"
refused "-r 5: no such rank \(the job has 1\)" broadcast "${kSelf[@]}" -b 1K -e 1K -r 5
echo "ok: malformed flags are refused before anything runs"
