#!/usr/bin/env bash
# README command one: installs dependencies, builds, starts the local two-node cluster and runs the demo job with sbatch.
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kJobScript=$kRepo/scripts/examples/hello.sbatch
readonly kJobDir=$kRepo/build/jobs
readonly kWaitTimeoutS=300

die() { echo "quickstart: $*" >&2; exit 1; }

"$kRepo/scripts/install-deps.sh"
"$kRepo/scripts/build.sh"
"$kRepo/scripts/local-cluster.sh" up
eval "$("$kRepo/scripts/local-cluster.sh" env)"

mkdir -p "$kJobDir"
job=$(sbatch --parsable --output="$kJobDir/hello-%j.out" "$kJobScript") || die "sbatch $kJobScript failed"
job=${job%%;*}
log=$kJobDir/hello-$job.out
echo "quickstart: submitted job $job ($kJobScript)"

# Waits for the job, printing each state it passes through.
state="" last=""
deadline=$((SECONDS + kWaitTimeoutS))
while :; do
  state=$(scontrol show job "$job" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
  [[ -n $state && $state != "$last" ]] && echo "quickstart: job $job is $state"
  last=$state
  case $state in
    PENDING | CONFIGURING | RUNNING | COMPLETING | "") ;;
    *) break ;;
  esac
  ((SECONDS < deadline)) || { scancel "$job"; die "job $job did not finish within ${kWaitTimeoutS}s; cancelled it (log: $log)"; }
  sleep 0.5
done

echo "---- output of job $job ----"
cat "$log" 2>/dev/null || echo "(no output at $log)"
echo "----"
[[ $state == COMPLETED ]] || die "job $job ended $state; its output and errors are above and in $log"

cat <<EOF2
quickstart: job $job ran on both nodes; its log is $log

Go on from here:
  eval "\$(scripts/local-cluster.sh env)"        # point sbatch, srun, sinfo at the local cluster
  sinfo                                          # two nodes, 8 CPUs and 8 (fake) GPUs each
  srun -N2 --ntasks-per-node=2 --mpi=pmix hostname
  sbatch scripts/examples/hello.sbatch           # the demo job again
  scripts/test.sh                                # every test suite
  scripts/local-cluster.sh down                  # stop the cluster
EOF2
