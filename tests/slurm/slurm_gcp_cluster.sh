#!/usr/bin/env bash
# A second local cluster configured as slurm-gcp configures one (blueprints/local/slurm-gcp.yaml: task/affinity,
# task/cgroup, proctrack/cgroup, the external prolog/epilog layout), in a state directory and on ports of its own,
# with srunway's plugin in its stack and the two-socket fixture topology (GPUs 0-3 by CPU 0, GPUs 4-7 by CPU 1).
# Pinning under task/affinity: with no binding asked for, each task runs on its GPU's core, not the core Slurm
# picked; a binding the user asked for (srun --cpu-bind, SLURM_CPU_BIND for srun or sbatch) wins; the plugin stays within the
# step's cpuset. Prolog and epilog scripts in slurm-gcp's directories run, per partition too.
source "$(dirname "$0")/lib.sh"
require_cluster  # the suite's own cluster: this test needs what it needs (root, Slurm's daemons, the build)
[[ -w /sys/fs/cgroup/cpuset || -f /sys/fs/cgroup/cgroup.controllers ]] ||
  { echo "SKIP: no cpuset cgroup on this machine"; exit 77; }
build=${SRUNWAY_BUILD_ROOT:?SRUNWAY_BUILD_ROOT must name the build directory}
plugin=${SRUNWAY_SPANK_PLUGIN:?SRUNWAY_SPANK_PLUGIN must name srunway.so}
helper=${SRUNWAY_TOPO_HELPER:?SRUNWAY_TOPO_HELPER must name srunway-topo-helper}
fixture=$kSourceRoot/tests/fixtures/topology/local-2cpu.xml
state=$(mktemp -d /var/tmp/srunway-gcp.XXXXXX)
chmod 0755 "$state"  # munged runs as munge and must reach its socket directory
gcp_cluster() {
  SRUNWAY_CLUSTER_DIR=$state SRUNWAY_CLUSTER_PORT_BASE=${SRUNWAY_GCP_PORT_BASE:-16917} SRUNWAY_BUILD_DIR=$build \
    SRUNWAY_BLUEPRINT_FILE=$kSourceRoot/blueprints/local/slurm-gcp.yaml \
    SRUNWAY_PLUGSTACK="required $plugin topology_xml=$fixture topo_helper=$helper" \
    "$kSourceRoot/scripts/local-cluster.sh" "$@"
}
at_exit "gcp_cluster down >/dev/null 2>&1; rm -rf '$state'"
gcp_cluster up >"$state/up.log" 2>&1 || fail "the slurm-gcp-like cluster did not start: $(tail -n 5 "$state/up.log")"
eval "$(gcp_cluster env)"
expect_eq "TaskPlugin" "$(scontrol show config | awk '$1 == "TaskPlugin" {print $3}')" "task/affinity,task/cgroup"
expect_eq "ProctrackType" "$(scontrol show config | awk '$1 == "ProctrackType" {print $3}')" "proctrack/cgroup"

# tasks_of SRUN_ARGS...: "LOCALID:NIC:CPUS:SRUNWAY_CPU_BIND" of each task of one node, in task order, where NIC is
# the first the plugin gave the task (the one by its first GPU: GPU 0 enp6s0, 1 enp7s0, 3 enp14s0, 4 enp134s0).
tasks_of() {
  srun -N1 --time=2 "$@" bash -c 'echo "$SLURM_LOCALID:${NCCL_SOCKET_IFNAME%%,*}:$(grep Cpus_allowed_list \
    /proc/self/status | cut -f2):${SRUNWAY_CPU_BIND:-}"' | sort | tr '\n' ' '
}

# batch_cpus SBATCH_ARGS...: "LOCALID:CPUS" of each task of a two-task step in a batch job.
batch_cpus() {
  sbatch --wait --output="$state/batch.out" -N1 -n2 --exclusive --gpus-per-task=1 --time=2 "$@" --wrap \
    'srun bash -c "echo \$SLURM_LOCALID:\$(grep Cpus_allowed_list /proc/self/status | cut -f2)"' >/dev/null
  sort "$state/batch.out" | tr '\n' ' '
}

echo "== no binding asked for: each task on its GPU's core"
# Slurm's own binding puts task 1 on CPU 1; its GPU 1 hangs off CPU 0, and the step's cpuset allows CPU 0.
expect_eq "Slurm alone (--gpu-affinity=none)" "$(tasks_of -n2 --exclusive --gpus-per-task=1 --gpu-affinity=none)" \
  "0:enp6s0:0: 1:enp7s0:1: "
expect_eq "one GPU per task" "$(tasks_of -n2 --exclusive --gpus-per-task=1)" "0:enp6s0:0:0 1:enp7s0:0:0 "
expect_eq "four GPUs per task" "$(tasks_of -n2 --exclusive --gpus-per-task=4)" "0:enp6s0:0:0 1:enp134s0:1:1 "
expect_eq "all GPUs seen by each task" "$(tasks_of -n2 --exclusive --gpus=2)" "0:enp6s0:0:0 1:enp7s0:0:0 "
expect_eq "sbatch without --cpu-bind" "$(batch_cpus)" "0:0 1:0 "

echo "== ConstrainDevices numbers a step's GPUs from 0: the plugin maps them back to the node's"
holder=$(sbatch --parsable --output=/dev/null -w node1 -n1 --gpus=3 --time=2 --wrap 'sleep 60')
at_exit "scancel $holder 2>/dev/null"
out=$(tasks_of -w node1 -n1 --gpus-per-task=2)  # GPUs 3 and 4, seen as 0,1
expect_eq "a step on GPUs 3,4" "${out%%:*}:$(cut -d: -f2 <<<"$out")" "0:enp14s0"
scancel "$holder"

echo "== the user's binding wins"
expect_eq "srun --cpu-bind=cores" "$(tasks_of -n2 --exclusive --gpus-per-task=1 --cpu-bind=cores)" \
  "0:enp6s0:0: 1:enp7s0:1: "
expect_eq "srun --cpu-bind=none" "$(tasks_of -n2 --exclusive --gpus-per-task=1 --cpu-bind=none)" \
  "0:enp6s0:0-1: 1:enp7s0:0-1: "
expect_eq "SLURM_CPU_BIND=none" "$(SLURM_CPU_BIND=none tasks_of -n2 --exclusive --gpus-per-task=1)" \
  "0:enp6s0:0-1: 1:enp7s0:0-1: "
# sbatch of Slurm 22.05 has no --cpu-bind; SLURM_CPU_BIND in the submit environment reaches the job's steps.
expect_eq "SLURM_CPU_BIND=none sbatch" "$(SLURM_CPU_BIND=none batch_cpus)" "0:0-1 1:0-1 "

echo "== within the step's cpuset"
# One task on one CPU: task/cgroup confines the step to it; GPUs 4-7 want CPU 1, which the step may not use.
out=$(srun -N1 -n1 -c1 --gpus-per-task=8 --time=2 bash -c \
  'echo "$(grep Cpus_allowed_list /proc/self/status | cut -f2) $(cat /sys/fs/cgroup/cpuset$(grep cpuset /proc/self/cgroup | cut -d: -f3)/cpuset.cpus)"')
read -r mask cpuset <<<"$out"
expect_eq "a one-CPU step stays on its cpuset" "$mask" "$cpuset"

echo "== slurm-gcp's prolog and epilog directories"
adm=$state/adm/slurm
mkdir -p "$adm/partition-debug-prolog_slurmd.d" "$adm/partition-other-prolog_slurmd.d"
printf '#!/bin/sh\necho "$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID $(hostname)" >>%s/ran\n' "$state" >"$adm/record"
chmod +x "$adm/record"
ln -s ../record "$adm/prolog_slurmd.d/10-record.prolog_slurmd"
ln -s ../record "$adm/epilog_slurmd.d/10-record.epilog_slurmd"
ln -s ../record "$adm/partition-debug-prolog_slurmd.d/20-record.prolog_slurmd"
printf '#!/bin/sh\necho other >>%s/ran\n' "$state" >"$adm/partition-other-prolog_slurmd.d/x"
chmod +x "$adm/partition-other-prolog_slurmd.d/x"
job=$(sbatch --parsable --wait -N2 -n2 --time=2 --output=/dev/null --wrap 'srun true')
for _ in $(seq 50); do [[ $(grep -c "^epilog_slurmd $job " "$state/ran" 2>/dev/null) == 2 ]] && break; sleep 0.2; done
expect_eq "prologs of job $job (global and partition, on both nodes)" "$(grep -c "^prolog_slurmd $job " "$state/ran")" 4
expect_eq "epilogs of job $job" "$(grep -c "^epilog_slurmd $job " "$state/ran")" 2
if grep -q other "$state/ran"; then fail "another partition's prolog ran"; fi
echo "ok"
