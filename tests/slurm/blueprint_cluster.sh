#!/usr/bin/env bash
# The cluster this suite runs on was rendered from blueprints/local/local.yaml by srunway-blueprint up, and what
# it runs matches the blueprint: the nodes, GPUs and partition of its modules.
source "$(dirname "$0")/lib.sh"
require_cluster
head -n 1 "$SLURM_CONF" | grep -q "^# slurm.conf rendered by srunway-blueprint from .*blueprints/local/local.yaml$" ||
  fail "$SLURM_CONF was not rendered from blueprints/local/local.yaml: $(head -n 1 "$SLURM_CONF")"
expect_eq "nodes" "$(sinfo -h -N -o '%N' | sort -u | tr '\n' ' ')" "node1 node2 "
expect_eq "gres" "$(sinfo -h -N -o '%G' | sort -u)" "gpu:8"
expect_eq "partition" "$(sinfo -h -o '%P')" "debug*"
expect_eq "MPI default" "$(scontrol show config | awk '$1 == "MpiDefault" {print $3}')" "pmix"
# The script that starts it names a command it does not have (it printed its usage alone).
rc=0
out=$("$kSourceRoot/scripts/local-cluster.sh" stat 2>&1) || rc=$?
expect_eq "local-cluster.sh stat: exit code" "$rc" 2
expect_eq "local-cluster.sh stat" "$out" \
  "local-cluster: unknown command 'stat' (expected up, down, status or env; see --help)"
echo "ok"
