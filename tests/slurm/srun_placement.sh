#!/usr/bin/env bash
# srun places 8 tasks on each node, one fake GPU each, and the tasks see the identity Slurm gives them.
source "$(dirname "$0")/lib.sh"
require_cluster
out=$(srun -N2 --ntasks-per-node=8 --gpus-per-task=1 --time=2 -l \
  bash -c 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES $SLURM_NTASKS"') ||
  fail "srun failed: $out"
echo "$out"
expect_eq "task count" "$(wc -l <<<"$out")" 16
for node in node1 node2; do
  expect_eq "tasks on $node" "$(count_matching " $node " "$out")" 8
  gpus=$(grep " $node " <<<"$out" | awk '{print $6}' | sort -n | tr '\n' ' ')
  expect_eq "GPUs on $node" "$gpus" "0 1 2 3 4 5 6 7 "
done
# Block distribution: ranks 0-7 on node1 (node id 0), 8-15 on node2, local ids 0-7 on each.
while read -r label rank local node_id node gpu ntasks; do
  expect_eq "label of rank $rank" "$label" "$rank:"
  expect_eq "ntasks seen by rank $rank" "$ntasks" 16
  expect_eq "local id of rank $rank" "$local" $((rank % 8))
  expect_eq "node id of rank $rank" "$node_id" $((rank / 8))
  expect_eq "node of rank $rank" "$node" "node$((rank / 8 + 1))"
done <<<"$(sed 's/^ *//' <<<"$out")"
