#!/usr/bin/env bash
# Supervised exec mode on both nodes: a rank's program killed with -9, crashing with SIGSEGV, exiting non-zero
# with a PyTorch error file, or hanging after it showed progress ends the step on every rank within the timeout,
# each rank printing one line that names the rank, its host and how the program ended. SIGTERM from scancel
# reaches every program and their exit codes come back; --log-dir and --tee keep each rank's output; what a program
# leaves running is ended (its output kept, one warning).
source "$(dirname "$0")/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
# The programs here run no threads: given a count, rank 0 does not say that it set one for ranks sharing CPUs, and
# srunway-launch's stderr holds only what supervision says.
export OMP_NUM_THREADS=1
work=$(mktemp -d)
at_exit "rm -rf '$work'"

# step NAME PROGRAM [LAUNCH OPTIONS...]: 4 ranks on 2 nodes (block distribution: ranks 0-2 on node1, 3 on
# node2), every rank running PROGRAM under bash with $RANK set; exit code in $work/NAME.rc. The outer timeout only
# guards against a hang: the programs sleep for 120 s unless the step is ended.
step() {
  local name=$1 program=$2 rc=0
  shift 2
  timeout 100 srun --mpi=pmix -N2 -n4 --time=3 -l "$launch" --timeout 10 "$@" -- bash -c "$program" \
    >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  echo "$rc" >"$work/$name.rc"
  ((rc != 124)) || fail "$name: the step hung past the guard: $(cat "$work/$name.err")"
  grep srunway-launch "$work/$name.err" || true
}

# every_rank_names NAME WHO HOW: each rank printed exactly one line naming WHO (e.g. "rank 3 on node2") and HOW.
every_rank_names() {
  local name=$1 who=$2 how=$3 r
  for r in 0 1 2 3; do
    expect_eq "$name: lines of rank $r" \
      "$(grep -cE "^ *$r: srunway-launch: (rank $r on node[12]: )?$who $how" "$work/$name.err")" 1
  done
}

echo "== rank 3's program is killed with SIGKILL mid-run"
step kill 'if [ $RANK = 3 ]; then sleep 2; kill -9 $$; fi; sleep 120'
every_rank_names kill "rank 3 on node2" "was killed by SIGKILL after [0-9]+s$"
[[ $(cat "$work/kill.rc") != 0 ]] || fail "kill: the step succeeded"

echo "== rank 1's program crashes with SIGSEGV"
step segv 'if [ $RANK = 1 ]; then sleep 1; kill -SEGV $$; fi; sleep 120'
every_rank_names segv "rank 1 on node1" "was killed by SIGSEGV after [0-9]+s$"

echo "== rank 2's program exits 3, leaving a PyTorch error file (as @record does); its tab is quoted escaped"
step error 'if [ $RANK = 2 ]; then
  echo "{\"message\": {\"message\": \"ValueError: bad batch\\tat step 7\", \"extraInfo\": {}}}" >"$TORCHELASTIC_ERROR_FILE"
  exit 3
fi; sleep 120'
every_rank_names error "rank 2 on node1" "exited with code 3 after [0-9]+s: ValueError: bad batch\\\\tat step 7$"

echo "== rank 3's program shows progress once, then hangs"
# As a progress bar writes it: the \r is quoted escaped, not sent to the terminal over the line.
step hang 'if [ $RANK = 3 ]; then printf "41\r42\n" >"$SRUNWAY_HEARTBEAT"; sleep 120; fi; sleep 120' --hang-timeout 3
every_rank_names hang "rank 3 on node2" "hung: no progress for [0-9]+s \(last progress '41\\\\r42'\) after [0-9]+s$"
grep -q "^ *3: srunway-launch: rank 3 on node2 hung" "$work/hang.err" || fail "rank 3 did not name itself"

echo "== a program that keeps making progress is not a hang, and every rank's clean exit is a clean step"
# Even ranks rewrite the file; odd ranks append lines longer than the launcher reads of it (it compared the file's
# first 256 bytes, which stop changing, and killed such a program as hung).
step progress 'pad=$(printf "%0300d" 0)
for i in 1 2 3 4 5 6; do
  if ((RANK % 2)); then echo "step $i $pad" >>"$SRUNWAY_HEARTBEAT"; else echo $i >"$SRUNWAY_HEARTBEAT"; fi; sleep 1
done; echo "done $RANK"' --hang-timeout 3
expect_eq "progress: exit code" "$(cat "$work/progress.rc")" 0
expect_eq "progress: ranks done" "$(grep -c 'done [0-3]$' "$work/progress.out")" 4
[[ ! -s $work/progress.err ]] || fail "progress: $(cat "$work/progress.err")"

echo "== scancel's SIGTERM reaches every program and their exit code comes back"
# signalled NAME SIGNAL PROGRAM: 4 ranks on 2 nodes run PROGRAM, which says 'ready RANK' and then loops; once all
# four are ready, scancel --signal=SIGNAL reaches the step. srun's output (its -l labels) in $work/NAME.out, ending
# with 'srun exit CODE'; srun's and the launchers' stderr in $work/NAME.err.
signalled() {
  local name=$1 signal=$2 program=$3 job
  job=$(sbatch --parsable -N2 -n4 --time=3 --output="$work/$name.out" --error="$work/$name.err" --wrap \
    "srun --mpi=pmix -l '$launch' --timeout 10 -- bash -c '$program'; echo \"srun exit \$?\"")
  for _ in $(seq 1 300); do [[ $(grep -c '^ *[0-3]: ready' "$work/$name.out" 2>/dev/null || echo 0) == 4 ]] && break; sleep 0.2; done
  expect_eq "$name: ranks ready" "$(grep -c '^ *[0-3]: ready' "$work/$name.out")" 4
  scancel --signal="$signal" "$job.0"
  for _ in $(seq 1 300); do grep -q '^srun exit' "$work/$name.out" 2>/dev/null && break; sleep 0.2; done
  scancel "$job" 2>/dev/null || true
}
# slurmstepd signals the processes one by one: a program may end before its srunway-launch has the signal (which
# must still not count as a failure that ends the other ranks). The program loops rather than ending with
# 'sleep & wait': bash, its last command done when its sleep dies first, may exit 0 without running the trap.
signalled term TERM 'trap "echo got TERM \$RANK; exit 7" TERM; echo ready \$RANK; while :; do sleep 1; done'
expect_eq "term: programs that got SIGTERM" "$(grep -cE '^ *[0-3]: got TERM [0-3]$' "$work/term.out")" 4
grep -q '^srun exit 7$' "$work/term.out" || fail "term: $(cat "$work/term.out" "$work/term.err")"
! grep -q srunway-launch "$work/term.err" || fail "term: a program's answer to the signal was named as a failure: $(cat "$work/term.err")"
# Programs without a handler die of the TERM: that is the cancellation working, which Slurm reports; a line from
# each rank's launcher ("was killed by SIGTERM", one per rank of the step) only buried it. Nor is what survives the
# TERM worth a warning (a loop's next sleep, started between its last one's signal and the shell's, as in CI; here a
# loop that ignores it): it is ended with the step. A USR1 meant as a warning that kills the program is named on
# every rank.
signalled untrapped TERM '(trap "" TERM; while :; do sleep 1.2345; done) & echo ready \$RANK; while :; do sleep 1; done'
grep -q '^srun exit 143$' "$work/untrapped.out" || fail "untrapped: $(cat "$work/untrapped.out" "$work/untrapped.err")"
! grep -q srunway-launch "$work/untrapped.err" || fail "untrapped: a death by scancel's TERM was reported: $(cat "$work/untrapped.err")"
! pgrep -f 'sleep 1.2345' >/dev/null || fail "untrapped: what ignored the TERM still runs"
signalled usr1 USR1 'echo ready \$RANK; while :; do sleep 1; done'
grep -q '^srun exit 138$' "$work/usr1.out" || fail "usr1: $(cat "$work/usr1.out" "$work/usr1.err")"
# Each rank names its own program's death, or a peer's where that rank's word came first (its launcher may get
# Slurm's USR1 only after the program died of it).
expect_eq "usr1: ranks naming it" "$(grep -cE '^ *[0-3]: srunway-launch: (rank [0-3] on node[12]: )?rank [0-3] on node[12] was killed by SIGUSR1 after [0-9]+s$' "$work/usr1.err")" 4

echo "== --log-dir keeps each rank's output; --tee prints it too"
step logs 'echo "out of $RANK"; echo "err of $RANK" >&2' --log-dir "$work/logs"
expect_eq "logs: exit code" "$(cat "$work/logs.rc")" 0
for r in 0 1 2 3; do
  expect_eq "rank_$r.out" "$(cat "$work/logs/rank_$r.out")" "out of $r"
  expect_eq "rank_$r.err" "$(cat "$work/logs/rank_$r.err")" "err of $r"
done
[[ ! -s $work/logs.out ]] || fail "without --tee the output went to the terminal: $(cat "$work/logs.out")"
step tee 'echo "out of $RANK"' --log-dir "$work/tee" --tee
expect_eq "tee: lines printed" "$(grep -cE '^ *[0-3]: out of [0-3]$' "$work/tee.out")" 4
expect_eq "tee: rank_3.out" "$(cat "$work/tee/rank_3.out")" "out of 3"

# A requeued job (SLURM_RESTART_COUNT, which Slurm sets on each restart) adds to its earlier attempt's logs: they
# were truncated, and with them why the first attempt failed. A job that is not a restart starts them afresh.
log_step() { timeout 60 srun -n1 -w node1 --time=1 "$launch" --log-dir "$work/requeue" -- bash -c "$1" 2>/dev/null; }
log_step 'echo "attempt 1"; echo "why it failed" >&2; exit 3' && fail "requeue: the first attempt's exit 3 was lost"
SLURM_RESTART_COUNT=1 log_step 'echo "attempt 2"' || fail "requeue: the second attempt failed"
expect_eq "requeue: rank_0.out of both attempts" "$(cat "$work/requeue/rank_0.out")" $'attempt 1\nattempt 2'
expect_eq "requeue: rank_0.err keeps the first attempt's" "$(cat "$work/requeue/rank_0.err")" "why it failed"
log_step 'echo "a new job"' || fail "requeue: the new job failed"
expect_eq "requeue: a new job's rank_0.out" "$(cat "$work/requeue/rank_0.out")" "a new job"

# With --tee, the launcher's own stdout going away (here `| head -1`) killed it with SIGPIPE (exit 141) and cut the
# program and its log short; the copy is best effort, the log file gets everything.
rc=$("$launch" --log-dir "$work/piped" --tee -- bash -c 'seq 1 100000' | head -1 >/dev/null; echo "${PIPESTATUS[0]}")
expect_eq "tee into a closed pipe: exit" "$rc" 0
expect_eq "tee into a closed pipe: lines logged" "$(wc -l <"$work/piped/rank_0.out")" 100000

# A --log-dir that fills up (a 64 KiB tmpfs in node1's mount namespace: each local node has its slurmd's): the
# program wrote straight into the files, so its writes failed, its output was lost and the step said nothing. Now
# one line per stream names the file, and the rest follows on the step's own output: the log and what srun
# printed together are the whole output, in order.
node1_slurmd=$(pgrep -f '^slurmd -N node1( |$)' | head -1 || true)
mkdir "$work/full"
if [[ -n $node1_slurmd ]] && nsenter --mount="/proc/$node1_slurmd/ns/mnt" mount -t tmpfs -o size=64k tmpfs "$work/full"; then
  at_exit "nsenter --mount=/proc/$node1_slurmd/ns/mnt umount '$work/full'"
  program='for i in $(seq 1 20000); do echo "line $i"; done; echo "the end" >&2'
  bash -c "$program" >"$work/full.want" 2>/dev/null
  rc=0
  timeout 100 srun -n1 -w node1 --time=1 "$launch" --log-dir "$work/full/logs" -- bash -c "$program" \
    >"$work/full.out" 2>"$work/full.err" || rc=$?
  expect_eq "full log dir: exit code" "$rc" 0
  for stream in out err; do
    grep -qE "^srunway-launch.* warning: cannot write $work/full/logs/rank_0.$stream after [0-9]+ bytes: No space left on device; the rest of the program's std$stream follows on this task's std$stream$" "$work/full.err" ||
      fail "full log dir: no line for rank_0.$stream: $(cat "$work/full.err")"
  done
  nsenter --mount="/proc/$node1_slurmd/ns/mnt" cat "$work/full/logs/rank_0.out" "$work/full.out" >"$work/full.got"
  cmp -s "$work/full.want" "$work/full.got" ||
    fail "full log dir: the log and the step's output are not the whole output ($(wc -c <"$work/full.got") of $(wc -c <"$work/full.want") bytes)"
  grep -q "^the end$" "$work/full.err" || fail "full log dir: stderr's last line was lost: $(cat "$work/full.err")"
else
  echo "ok (skipped): cannot mount a tmpfs in node1's mount namespace here for the full log dir"
fi

echo "== what a program leaves running is ended, its output kept"
# A background writer that outlives its program: its line died of SIGPIPE once srunway-launch exited (it stopped
# reading --log-dir's pipes when the program ended); now the program's group gets a moment to finish.
rc=0
timeout 60 srun -n1 -w node1 --time=1 "$launch" --log-dir "$work/late" -- bash -c '(sleep 0.3; echo late) & echo early' \
  2>"$work/late.err" || rc=$?
expect_eq "late writer: exit code" "$rc" 0
expect_eq "late writer: rank_0.out" "$(cat "$work/late/rank_0.out")" $'early\nlate'
[[ ! -s $work/late.err ]] || fail "late writer: a finished background process was reported: $(cat "$work/late.err")"
# Outside Slurm (whose slurmstepd kills a step's leftovers) a background process ran on after srunway-launch had
# exited; now it is ended (SIGTERM, SIGKILL 3 s later for one that ignores it) and one warning names it.
left_over() {  # PROGRAM: the exit code in $rc, srunway-launch's stderr in $work/left.err
  rc=0
  timeout 60 "$launch" -- bash -c "$1" 2>"$work/left.err" || rc=$?
}
left_over 'sleep 1234.5 & exit 3'
expect_eq "leftover: the program's exit code" "$rc" 3
grep -qE '^srunway-launch\[.*\] warning: the program ended and left 1 process \(sleep [0-9]+\) running: ended it with SIGTERM$' \
  "$work/left.err" || fail "leftover: no warning: $(cat "$work/left.err")"
! pgrep -f 'sleep 1234.5' >/dev/null || fail "leftover: still running after srunway-launch exited"
left_over '(trap "" TERM; sleep 1234.6) & (trap "" TERM; sleep 1234.6) & true'
expect_eq "leftovers that ignore SIGTERM: exit code" "$rc" 0
grep -qE '^srunway-launch\[.*\] warning: the program ended and left [0-9]+ processes \((bash|sleep) [0-9]+, .*\) running: ended them with SIGKILL, 3s after SIGTERM$' \
  "$work/left.err" || fail "leftovers that ignore SIGTERM: no warning: $(cat "$work/left.err")"
! pgrep -f 'sleep 1234.6' >/dev/null || fail "leftovers that ignore SIGTERM: still running"
# A daemon that leaves the program's process group (its own session, or a double fork) was out of reach and ran on,
# outside Slurm and under proctrack/linuxproc (the local cluster's), which follows parents; srunway-launch adopts
# the program's orphans (a child subreaper) and ends them too.
left_over 'setsid sleep 1234.7 </dev/null >/dev/null 2>&1 & exit 0'
expect_eq "a daemon of its own session: exit code" "$rc" 0
grep -qE '^srunway-launch\[.*\] warning: the program ended and left 1 process \(sleep [0-9]+\) running: ended it with SIGTERM$' \
  "$work/left.err" || fail "a daemon of its own session: no warning: $(cat "$work/left.err")"
! pgrep -f 'sleep 1234.7' >/dev/null || fail "a daemon of its own session: still running after srunway-launch exited"
rc=0
timeout 60 srun -n1 -w node1 --time=1 "$launch" -- bash -c \
  '(trap "" TERM; setsid sleep 1234.8 </dev/null >/dev/null 2>&1 &); exit 5' 2>"$work/left.err" || rc=$?
expect_eq "a double-forked daemon under srun: exit code" "$rc" 5
grep -qE '^srunway-launch\[node1 rank 0\] warning: the program ended and left 1 process \(sleep [0-9]+\) running: ended it with SIGKILL, 3s after SIGTERM$' \
  "$work/left.err" || fail "a double-forked daemon under srun: no warning: $(cat "$work/left.err")"
! pgrep -f 'sleep 1234.8' >/dev/null || fail "a double-forked daemon under srun: still running after the step"
# srunway-launch itself killed with -9 (or by the OOM killer): its program ran on as init's child, out of reach of
# proctrack/linuxproc; now the kernel kills it with its parent (PR_SET_PDEATHSIG).
timeout 60 srun -n1 -w node1 --time=1 "$launch" -- sleep 1234.9 2>/dev/null &
for _ in $(seq 1 100); do pgrep -f '^sleep 1234.9' >/dev/null && break; sleep 0.1; done
supervisor=$(pgrep -f "^$launch -- sleep 1234.9") || fail "killed supervisor: no srunway-launch found"
kill -9 "$supervisor"
wait || true
for _ in $(seq 1 50); do pgrep -f '^sleep 1234.9' >/dev/null || break; sleep 0.1; done
! pgrep -f '^sleep 1234.9' >/dev/null || fail "killed supervisor: its program runs on"

echo "== the program's own exit code and torchrun's variables"
step code 'echo "$TORCHELASTIC_RUN_ID $TORCHELASTIC_RESTART_COUNT $SLURM_JOB_ID"; exit 0'
expect_eq "code: exit" "$(cat "$work/code.rc")" 0
expect_eq "code: run id is the job" "$(awk '$2 == $4 && $3 == 0' "$work/code.out" | wc -l)" 4
rc=0
srun -n1 --time=1 "$launch" -- bash -c 'exit 9' 2>/dev/null || rc=$?
expect_eq "one rank's exit code" "$rc" 9
rc=0
srun -n1 --time=1 "$launch" -- /no/such/program 2>"$work/missing.err" || rc=$?
expect_eq "a missing program" "$rc" 127
grep -q "srunway-launch: rank 0 on node1: cannot run '/no/such/program': No such file or directory" "$work/missing.err" ||
  fail "missing program: $(cat "$work/missing.err")"
# A directory, or a file without execute permission, says so (exec's "Permission denied" read as a rights problem).
touch "$work/not-executable"
for program in "$work" "$work/not-executable"; do
  rc=0
  srun -n1 --time=1 "$launch" -- "$program" 2>"$work/noexec.err" || rc=$?
  expect_eq "$program as the program" "$rc" 126
  grep -qE "srunway-launch: rank 0 on node1: cannot run '$program': it is (a directory|not executable \\(chmod \\+x\\))$" \
    "$work/noexec.err" || fail "$program: $(cat "$work/noexec.err")"
done
# A --log-dir no rank can write ends the step before the bootstrap, on every rank, one line each (exit 2; it was
# found only when the program was about to start, and exited 126 as if the program could not be executed).
rc=0
srun -N2 -n2 --time=1 "$launch" --log-dir /proc/srunway-logs -- true 2>"$work/logdir.err" || rc=$?
expect_eq "an unwritable --log-dir" "$rc" 2
expect_eq "its lines" "$(grep -c "^srunway-launch: --log-dir /proc/srunway-logs: cannot create the directory: " \
  "$work/logdir.err")" 2
echo "ok"
