#!/usr/bin/env bash
# README command one: installs dependencies, builds, starts the local two-node cluster, prepares a text corpus
# that a Debian package ships (the fortune cookie files) with srunway-prep, and trains a small GPT on it with
# sbatch: the loss falls and the job ends with a sample of generated text.
set -euo pipefail

readonly kRepo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kJobScript=$kRepo/scripts/examples/train-gpt.sbatch
readonly kJobDir=$kRepo/build/jobs
readonly kFortunes=/usr/share/games/fortunes
readonly kWaitTimeoutS=1200

die() { echo "quickstart: $*" >&2; exit 1; }

"$kRepo/scripts/install-deps.sh"
"$kRepo/scripts/build.sh"
"$kRepo/scripts/local-cluster.sh" up
eval "$("$kRepo/scripts/local-cluster.sh" env)"

mkdir -p "$kJobDir/data"
# Every fortune file (not the .dat indexes or .u8 links), documents separated by lines holding '%'.
corpus=$kJobDir/data/fortunes.txt
find "$kFortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort | xargs cat >"$corpus" ||
  die "could not read the fortune files in $kFortunes (Debian package 'fortunes')"
"$kRepo/build/trainer/srunway-prep" --input "$corpus" --output-prefix "$kJobDir/data/fortunes" \
  --train-vocab 1024 --document-separator % --workers "$(nproc)" --quiet || die "srunway-prep failed"

run_dir=$kJobDir/train-gpt
rm -rf "$run_dir"  # a fresh run each time (the checkpoints would otherwise resume the last one)
job=$(SRUNWAY_TRAIN=$kRepo/build/trainer/srunway-train SRUNWAY_LAUNCH=$kRepo/build/launcher/srunway-launch sbatch --parsable --output="$kJobDir/train-gpt-%j.out" \
  "$kJobScript" "$kJobDir/data/fortunes" "$run_dir") || die "sbatch $kJobScript failed"
job=${job%%;*}
log=$kJobDir/train-gpt-$job.out
echo "quickstart: submitted job $job ($kJobScript)"
# Ctrl-C (or a closed terminal) while it runs ends the job too, rather than leaving it on the cluster.
trap 'scancel "$job" 2>/dev/null; echo "quickstart: stopped; cancelled job $job (log: $log)" >&2; exit 130' INT TERM HUP

# Waits for the job, printing each state it passes through and its output as it grows.
state="" last="" shown=0
show_new_output() {
  [[ -f $log ]] || return 0
  local lines
  lines=$(wc -l <"$log")
  ((lines > shown)) && sed -n "$((shown + 1)),${lines}p" "$log"
  shown=$lines
}
deadline=$((SECONDS + kWaitTimeoutS))
while :; do
  state=$(scontrol show job "$job" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 || true)
  [[ -n $state && $state != "$last" ]] && echo "quickstart: job $job is $state"
  last=$state
  show_new_output
  case $state in
    PENDING | CONFIGURING | RUNNING | COMPLETING | "") ;;
    *) break ;;
  esac
  ((SECONDS < deadline)) || { scancel "$job"; die "job $job did not finish within ${kWaitTimeoutS}s; cancelled it (log: $log)"; }
  sleep 1
done
trap - INT TERM HUP
sleep 0.5
show_new_output
[[ $state == COMPLETED ]] || die "job $job ended $state; its output and errors are above and in $log"

summary=$(python3 - "$run_dir/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
train = [r for r in rows if "loss" in r]
valid = [r for r in rows if "valid_loss" in r]
print(f"training loss {train[0]['loss']:.3f} at step {train[0]['step']} -> {train[-1]['loss']:.3f} at step {train[-1]['step']}", end="")
if len(valid) > 1:
    print(f"; validation loss {valid[0]['valid_loss']:.3f} -> {valid[-1]['valid_loss']:.3f}", end="")
print()
PY
) || die "no metrics in $run_dir/metrics.jsonl"
cat <<EOF2
quickstart: job $job trained a GPT on the fortune cookie corpus: $summary
  log: $log
  metrics (JSON lines): $run_dir/metrics.jsonl
  checkpoints: $run_dir/checkpoints

Go on from here:
  eval "\$(scripts/local-cluster.sh env)"        # point sbatch, srun, sinfo at the local cluster
  sinfo                                          # two nodes, 8 CPUs and 8 (fake) GPUs each
  srun -N2 --ntasks-per-node=2 --mpi=pmix hostname
  sbatch scripts/examples/hello.sbatch           # 8 tasks on 2 nodes say who they are
  build/trainer/srunway-train --help             # every training flag
  scripts/test.sh                                # every test suite
  scripts/local-cluster.sh down                  # stop the cluster
EOF2
