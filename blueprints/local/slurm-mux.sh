#!/usr/bin/env bash
# Prolog and Epilog of local clusters rendered with external_prolog_epilog: true, laid out as slurm-gcp lays out
# its external prologs and epilogs (/opt/apps/adm/slurm there, adm/slurm in the cluster's state directory here).
# slurmd runs it as root for each job on each node; SLURM_SCRIPT_CONTEXT says which (prolog_slurmd or
# epilog_slurmd). It runs the executable files of adm/slurm/CONTEXT.d, then those of
# adm/slurm/partition-PARTITION-CONTEXT.d, each in name order, and stops at the first that fails, with that
# script's exit status and one line on stderr naming it: a failed prolog makes Slurm drain the node and requeue the
# job, as on slurm-gcp.
set -uo pipefail

readonly kRoot=$(cd "$(dirname "${BASH_SOURCE[0]}")/../adm/slurm" 2>/dev/null && pwd)
context=${SLURM_SCRIPT_CONTEXT:-}
case $context in
  prolog_slurmd | epilog_slurmd) ;;
  *) echo "slurm-mux: SLURM_SCRIPT_CONTEXT is '$context', not prolog_slurmd or epilog_slurmd" >&2; exit 1 ;;
esac
[[ -n $kRoot ]] || exit 0

for dir in "$kRoot/$context.d" "$kRoot/partition-${SLURM_JOB_PARTITION:-}-$context.d"; do
  [[ -d $dir ]] || continue
  for script in "$dir"/*; do
    [[ -f $script && -x $script ]] || continue
    "$script"
    rc=$?
    if ((rc != 0)); then
      echo "slurm-mux: $script failed with exit status $rc (job $SLURM_JOB_ID, $context)" >&2
      exit "$rc"
    fi
  done
done
exit 0
