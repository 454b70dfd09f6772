#!/usr/bin/env bash
# run-nccl-tests without a cluster: --parse on a real log (pass, below threshold, cut short, failed, a host-memory
# run against a GPU reference), --dry-run's script, --list-references, and bad flags; each with its documented exit
# code and one clear line.
# Usage: run_nccl_tests_cli.sh RUN_NCCL_TESTS FIXTURE_DIR
set -euo pipefail
readonly kTool=$1 kFixtures=$2
readonly kWork=$(mktemp -d)
trap 'rm -rf "$kWork"' EXIT
readonly kLog=$kFixtures/a3mega-all-reduce-2node.log

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect CODE PATTERN ARGS...: exit CODE, PATTERN in stdout+stderr.
expect() {
  local want=$1 pattern=$2 rc=0
  shift 2
  "$kTool" "$@" >"$kWork/out" 2>&1 || rc=$?
  [[ $rc == "$want" ]] || fail "run-nccl-tests $*: exit $rc, want $want: $(cat "$kWork/out")"
  grep -qE -- "$pattern" "$kWork/out" || fail "run-nccl-tests $*: no /$pattern/ in: $(cat "$kWork/out")"
}

expect 0 "verdict: PASS: bus bandwidth 338.82 GB/s at 8G meets the threshold 304.20" \
  --parse "$kLog" --test all_reduce --reference a3mega
grep -q "nccl-tests' average over every size 70.74 GB/s" "$kWork/out" || fail "average missing: $(cat "$kWork/out")"
expect 1 "below the threshold 350.00 GB/s \\(log: $kLog\\)" --parse "$kLog" --test all_reduce --expect-busbw 350
expect 1 '"verdict": "fail"' --parse "$kLog" --test all_reduce --expect-busbw 350 --json
# A pass mark of 0, below 0 or nan passed every run; a --reference that a log not naming its test cannot apply
# was dropped without saying how to apply it.
expect 2 "--expect-busbw: 0 is not above 0" --parse "$kLog" --expect-busbw 0
# Without --job-dir, under a working directory that was removed: one line (it aborted with an uncaught
# filesystem_error, exit 134).
mkdir "$kWork/gone"
rc=0
tool=$(realpath "$kTool")
(cd "$kWork/gone" && rmdir "$kWork/gone" && "$tool" --nodes 1) >"$kWork/out" 2>&1 || rc=$?
[[ $rc == 2 ]] && grep -q "error: the working directory, for --job-dir's default: No such file or directory" \
  "$kWork/out" || fail "a removed working directory: exit $rc: $(cat "$kWork/out")"
expect 2 "--expect-busbw: 'nan' is not a finite number" --parse "$kLog" --expect-busbw nan
expect 2 "--expect-busbw: 'inf' is not a finite number" --parse "$kLog" --expect-busbw inf
unnamed="the log does not say which test it is: give --test to judge it by --reference a3mega"
expect 0 "threshold: correctness only \($unnamed\)" --parse "$kLog" --reference a3mega
head -n 40 "$kLog" >"$kWork/cut.log"
expect 2 "truncated: the output stops after 17 rows" --parse "$kWork/cut.log"
{ cat "$kWork/cut.log"; echo "a3mega-2: Test NCCL failure common.cu:1005 'unhandled system error'"; } >"$kWork/failed.log"
expect 2 "the run failed: a3mega-2: Test NCCL failure" --parse "$kWork/failed.log"
expect 2 "no nccl-tests output found" --parse /etc/hostname
expect 2 "open $kWork/missing.log" --parse "$kWork/missing.log"
expect 2 "unknown test 'all_scatter'" --test all_scatter --dry-run
# The network profile and the published figure are two options now; the old one says so.
expect 2 "--profile h100-single-node: the option is now two: --network-profile h100-single-node \\(what srun gets\\) and --reference NAME" \
  --profile h100-single-node --dry-run
expect 2 "--reference a3: no such published figure \\(see --list-references\\)" --reference a3 --dry-run
expect 2 "--reference a3mega is a GPU figure; with --gpus-per-node 0 the ranks run on host memory" \
  --reference a3mega --gpus-per-node 0 --dry-run
expect 2 "--requeue-job needs --isolate" --requeue-job 7 --nodes 1 --dry-run
# Options that only mean something beside another were taken and ignored; --dry-run checks them too.
expect 2 "--drain needs --isolate or --dcgm-level" --drain --dry-run
expect 2 "--tasks-per-node 4 goes with --gpus-per-node 0 \\(with GPUs, one task per GPU\\)" --tasks-per-node 4 --dry-run
expect 2 "--order-source requires --order-hosts" --order-source slurm --dry-run
# Counts no node has went into the script as they were, and --order-hosts wrote a hostfile line per task.
expect 2 "--gpus-per-node: Value 2147483647 not in range 0 to 1024" --gpus-per-node 2147483647 --dry-run
expect 2 "--tasks-per-node: Value 0 not in range 1 to 4096" --gpus-per-node 0 --tasks-per-node 0 --dry-run
expect 0 "^a3mega +all_gather +188 GB/s  2 or more nodes" --list-references
grep -q "one node alone is judged by: h100-single-node" "$kWork/out" && grep -qE "^h100-single-node +all_reduce +460 GB/s  1 node$" "$kWork/out" ||
  fail "--list-references: $(cat "$kWork/out")"
[[ $(grep -c "source: " "$kWork/out") == 4 && $(grep -c "machine: " "$kWork/out") == 4 ]] || fail "--list-references: $(cat "$kWork/out")"
# CPU ranks run on MPI, named in the script; a host-memory log is never judged by a GPU figure.
expect 0 "srunway-collbench all_gather --comm mpi -g 1" --dry-run --gpus-per-node 0
{ echo "# Collective test starting: all_reduce_perf"; echo "# Communicator: mpi (host memory)"; sed -n '/^# nThread/,$p' "$kLog"; } >"$kWork/host.log"
expect 0 "threshold: a host-memory run \\(mpi communicator\\) is not judged against a GPU figure" --parse "$kWork/host.log" --reference a3mega
expect 2 "--max-bytes '8Q': unknown size suffix 'Q'" --max-bytes 8Q --dry-run
# Refused before a job is submitted (a factor of 1 would have been 8185 sizes; --iters 0 a failed job).
expect 2 "^run-nccl-tests: --step-factor: Value 1 not in range 2 to 1024 \\(see --help\\)$" --step-factor 1 --dry-run
expect 2 "^run-nccl-tests: --iters: Value 0 not in range 1 to 16777216 \\(see --help\\)$" --iters 0 --dry-run
expect 2 "^run-nccl-tests: --warmup: Value -1 not in range 0 to 16777216 \\(see --help\\)$" --warmup -1 --dry-run
expect 2 "^run-nccl-tests: --time: Value 0 not in range 1 to 1048576 \\(see --help\\)$" --time 0 --dry-run
expect 2 "^run-nccl-tests: --wait-limit: 0 is not above 0 \\(see --help\\)$" --wait-limit 0 --dry-run
expect 2 "^run-nccl-tests: --run-timeout: 'soon' is not a number \\(see --help\\)$" --run-timeout soon --dry-run
# --nodelist: --nodes follows its count (sbatch refuses fewer, "invalid number of nodes"), a malformed list is
# named before anything is submitted.
expect 0 "^# Written by run-nccl-tests: all_gather over 4 nodes\.$" --nodelist 'a3m-[001-004]' --dry-run
grep -q '^#SBATCH --nodes=4$' "$kWork/out" && grep -q '^#SBATCH --nodelist=a3m-\[001-004\]$' "$kWork/out" ||
  fail "--nodelist: $(cat "$kWork/out")"
expect 0 "^#SBATCH --nodes=6$" --nodelist 'a3m-[001-004]' --nodes 6 --dry-run
expect 2 "--nodes 2 is fewer than the 4 nodes --nodelist a3m-\[001-004\] names \(Slurm would refuse the job\)" \
  --nodelist 'a3m-[001-004]' --nodes 2 --dry-run
expect 2 "--nodelist a3m-\[004-001\]: invalid range \`004-001' in \`a3m-\[004-001\]': start is after end" \
  --nodelist 'a3m-[004-001]' --dry-run
expect 0 "srun --mpi=pmix --kill-on-bad-exit=1 --network-profile=a3mega .*/srunway-collbench all_gather --comm nccl -g 1 -b 8388608 -e 8589934592" \
  --dry-run --nodes 4 --network-profile a3mega --reference a3mega
grep -q '^#SBATCH --nodes=4$' "$kWork/out" && grep -q '^#SBATCH --gpus-per-node=8$' "$kWork/out" ||
  fail "script: $(cat "$kWork/out")"
expect 0 "/opt/nccl-tests/build/all_reduce_perf -g 1" --dry-run --test all_reduce --binary /opt/nccl-tests/build
# What goes into the job script is quoted there (a --binary with a space ran a program named by half of it), the
# network profile is one the plugin knows (';rm -rf ~' went into the srun line), a line break cannot go in, a '%'
# in --job-dir would be read by Slurm as a pattern in the log's name, and sizes from 0 would never grow.
expect 0 "^srun --mpi=pmix --kill-on-bad-exit=1 '/opt/my tests/\\\$x/all_reduce_perf' -g 1 " \
  --dry-run --test all_reduce --binary '/opt/my tests/$x'
expect 0 '^#SBATCH --partition="gpu \\"a\\""$' --dry-run --partition 'gpu "a"'
expect 2 "^run-nccl-tests\[.*\] error: --network-profile: unknown network profile ';rm -rf ~' \(expected auto, a3mega" \
  --dry-run --network-profile ';rm -rf ~'
expect 2 "error: --partition: a line break cannot go into the job script$" --dry-run --partition $'gpu\nhostname'
expect 2 "error: --job-dir $kWork/100%: Slurm would read its '%' as a pattern in the job's log name$" \
  --dry-run --job-dir "$kWork/100%"
expect 2 "error: --min-bytes 0: the sizes grow from it by --step-factor, so it is at least 1$" --dry-run --min-bytes 0
# Topology order: the script collects placement and launches with --distribution=arbitrary; --order-hosts makes the
# SLURM_HOSTFILE inside the job.
expect 0 "srun --mpi=pmix --kill-on-bad-exit=1 \\$\\{distribution:-\\} " --dry-run --topology-order metadata
grep -q 'order=metadata' "$kWork/out" && grep -q 'export SLURM_HOSTFILE=\$hostfile' "$kWork/out" || fail "ordered script: $(cat "$kWork/out")"
expect 2 "--topology-order rack: expected auto, metadata, slurm or none" --topology-order rack --dry-run
expect 2 "--compare-order needs --topology-order auto, metadata or slurm" --compare-order --dry-run
expect 0 "env -u SLURM_HOSTFILE srun --mpi=pmix .*srunway-collbench" --topology-order slurm --compare-order --dry-run
printf 'node1 /B/R1/H1\nnode2 /A/R9/H3\n' >"$kWork/answers"
SLURM_JOB_NODELIST='node[1-3]' expect 0 "topology order \\(metadata\\): node2 node1 node3\\(unplaced\\)" \
  --order-hosts "$kWork/answers" --gpus-per-node 2
grep -c . "$kWork/out" | grep -qx 7 || fail "hostfile: $(cat "$kWork/out")"
printf 'SwitchName=l1 Level=0 Nodes=node[2-3]\nSwitchName=l0 Level=0 Nodes=node1\n' >"$kWork/topo"
SLURM_JOB_NODELIST='node[1-3]' expect 0 "topology order \\(slurm\\): node1 node2 node3" --order-hosts "$kWork/topo" --order-source slurm
expect 2 "SLURM_JOB_NODELIST is not set" --order-hosts "$kWork/answers"
expect 0 "dcgmi diag -r 3 2>&1" --dry-run --dcgm-level 3
expect 2 "--dcgm-level: Value 5 not in range 1 to 4" --dry-run --dcgm-level 5
# srunway-collbench (beside run-nccl-tests) checks NCCL_TESTS_MIN_BW before running: one line, exit 2.
collbench=$(dirname "$kTool")/srunway-collbench
rc=0
NCCL_TESTS_MIN_BW=abc "$collbench" all_reduce -b 8 -e 8 >"$kWork/out" 2>&1 || rc=$?
[[ $rc == 2 ]] && grep -q "NCCL_TESTS_MIN_BW='abc' is not a number" "$kWork/out" || fail "bad NCCL_TESTS_MIN_BW: $rc $(cat "$kWork/out")"
rc=0
NCCL_TESTS_MIN_BW=1e9 "$collbench" all_reduce -b 8 -e 8 >"$kWork/out" 2>&1 || rc=$?
[[ $rc == 1 ]] && grep -q '^# Avg bus bandwidth    : .* FAILED$' "$kWork/out" || fail "NCCL_TESTS_MIN_BW=1e9: $rc $(cat "$kWork/out")"
# --report DIR: Markdown, JSON, the plot's data and script, and the plot where gnuplot is installed.
expect 0 "report in $kWork/report: report.md, report.json" --parse "$kLog" --test all_reduce --reference a3mega --report "$kWork/report"
grep -qx '# run-nccl-tests: all_reduce on 2 nodes (16 ranks)' "$kWork/report/report.md" || fail "report.md: $(head -3 "$kWork/report/report.md")"
grep -qx '| 8G | 47535.00 | 338.82 | 0 | 47743.00 | 337.35 | 0 |' "$kWork/report/report.md" || fail "report.md row: $(tail -5 "$kWork/report/report.md")"
grep -q '"verdict": "pass"' "$kWork/report/report.json" || fail "report.json: no pass verdict"
grep -qx '8589934592 338.82 337.35' "$kWork/report/busbw.dat" || fail "busbw.dat: $(tail -2 "$kWork/report/busbw.dat")"
if command -v gnuplot >/dev/null; then
  [[ $(head -c 4 "$kWork/report/busbw.png" | od -An -c | tr -d ' ') == '211PNG' ]] || fail "busbw.png is not a PNG"
fi
echo "ok: run-nccl-tests --parse, --dry-run, --order-hosts, --report and bad flags"
