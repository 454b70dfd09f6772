#!/usr/bin/env bash
# srunway-launch's scratch directory (the program's heartbeat and TORCHELASTIC_ERROR_FILE) on one rank of torchrun's
# environment: gone after a run; named with the supervisor's host, PID namespace and process, so that one left by a
# supervisor killed with SIGKILL (as Slurm ends a step after PMIx_Abort) is removed by the next supervisor on the
# host, while a live process's and another host's stay; a TMPDIR that names no directory falls back to /tmp, and
# one where no directory can be made runs the program without them, each with one warning.
#   scratch_cli.sh SRUNWAY_LAUNCH
set -euo pipefail
launch=${1:?usage: scratch_cli.sh SRUNWAY_LAUNCH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
port=$(python3 "$(dirname "$0")/../../free_port.py")
# supervise TMPDIR COMMAND...: srunway-launch runs COMMAND as rank 0 of 1; output in $work/out, exit code echoed.
supervise() {
  local tmp=$1 rc=0
  shift
  env TMPDIR="$tmp" RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 60 "$launch" \
    --bootstrap=env -- "$@" >"$work/out" 2>&1 || rc=$?
  echo "$rc"
}
tmp=$work/tmp
mkdir "$tmp"

# A run that ends well leaves nothing; its directory held the heartbeat and error file the program was given.
rc=$(supervise "$tmp" sh -c 'echo "$SRUNWAY_HEARTBEAT $TORCHELASTIC_ERROR_FILE"')
[[ $rc == 0 ]] || fail "a plain run: exit $rc: $(cat "$work/out")"
mark="$(hostname)\.$(stat -L -c %i /proc/self/ns/pid)\.[0-9]+\.[A-Za-z0-9]{6}"
grep -qE "^$tmp/srunway-launch\.$mark/heartbeat $tmp/srunway-launch\.$mark/error.json$" "$work/out" ||
  fail "the scratch directory's name: $(cat "$work/out")"
[[ -z $(ls "$tmp") ]] || fail "a plain run left $(ls "$tmp")"

# A supervisor killed by SIGKILL leaves its directory, which the next one on this host removes; a live process's
# (this shell's) and another host's stay.
rc=$(supervise "$tmp" sh -c 'kill -9 "$PPID"; sleep 1')
[[ $rc == 137 ]] || fail "the killed supervisor: exit $rc: $(cat "$work/out")"
left=$(ls "$tmp")
[[ $left =~ ^srunway-launch\.$mark$ ]] || fail "the killed supervisor left '$left'"
here=$(hostname).$(stat -L -c %i /proc/self/ns/pid)
live=srunway-launch.$here.$$.abcdef
elsewhere=srunway-launch.no-such-host.4026531836.1.abcdef
mkdir "$tmp/$live" "$tmp/$elsewhere"
# A dead process's name on a link, or on another user's directory, is not removed either: /tmp is everyone's.
sh -c 'exit 0' &
dead=$!
wait "$dead"
mkdir -p "$work/target" && touch "$work/target/kept"
link=srunway-launch.$here.$dead.linkxx
ln -s "$work/target" "$tmp/$link"
keep=("$elsewhere" "$live" "$link")
if [[ $(id -u) == 0 ]]; then
  foreign=srunway-launch.$here.$dead.otherx
  mkdir "$tmp/$foreign" && chown 65534 "$tmp/$foreign"
  keep+=("$foreign")
fi
rc=$(supervise "$tmp" true)
[[ $rc == 0 ]] || fail "the run after: exit $rc: $(cat "$work/out")"
[[ $(ls "$tmp" | sort) == "$(printf '%s\n' "${keep[@]}" | sort)" ]] ||
  fail "after the next run: $(ls "$tmp") (want ${keep[*]} alone)"
[[ -e $work/target/kept ]] || fail "a link's target was emptied"
echo "ok: a killed supervisor's scratch directory is removed by the next; a live process's, another host's, another" \
  "user's and a link stay"

# TMPDIR that is no directory: /tmp instead, one warning; one where nothing can be made: no heartbeat, one warning.
rc=$(supervise "$work/none" sh -c 'echo "error file $TORCHELASTIC_ERROR_FILE"')
[[ $rc == 0 ]] || fail "TMPDIR missing: exit $rc: $(cat "$work/out")"
grep -q "warning: TMPDIR $work/none: No such file or directory: the program's heartbeat and error files go in /tmp" \
  "$work/out" || fail "TMPDIR missing: $(cat "$work/out")"
grep -qE "^error file /tmp/srunway-launch\.$mark/error.json$" "$work/out" || fail "TMPDIR missing: $(cat "$work/out")"
rc=$(supervise /proc sh -c 'echo "heartbeat [$SRUNWAY_HEARTBEAT]"')
[[ $rc == 0 ]] || fail "TMPDIR /proc: exit $rc: $(cat "$work/out")"
grep -q "warning: cannot create a directory in /proc: .*: the program runs without a heartbeat file (no --hang-timeout)" \
  "$work/out" || fail "TMPDIR /proc: $(cat "$work/out")"
grep -q "^heartbeat \[\]$" "$work/out" || fail "TMPDIR /proc: $(cat "$work/out")"
[[ $(grep -c warning "$work/out") == 1 ]] || fail "TMPDIR /proc: $(cat "$work/out")"
echo "ok: a TMPDIR that is no directory falls back to /tmp; one where none can be made runs without, each said once"
