#!/usr/bin/env bash
# srunway-launch exec mode with each bootstrap backend, for 1, 2, 4 and 16 ranks over the two nodes: every rank's
# torchrun variables agree with what Slurm says, and all ranks share one MASTER_ADDR:MASTER_PORT.
source "$(dirname "$0")/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
work_err=$(mktemp)
at_exit "rm -f '$work_err'"
# What each rank prints: the launcher's view, then Slurm's, to compare.
report='echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID"'

check_output() {
  local what=$1 ranks=$2 nodes=$3 out=$4
  expect_eq "$what: lines" "$(grep -c . <<<"$out")" "$ranks"
  expect_eq "$what: one master" "$(awk '{print $7}' <<<"$out" | sort -u | wc -l)" 1
  declare -A per_node=()
  while read -r rank size local local_size node node_count _ procid localid nodeid; do
    expect_eq "$what: RANK" "$rank" "$procid"
    expect_eq "$what: WORLD_SIZE" "$size" "$ranks"
    expect_eq "$what: LOCAL_RANK of $rank" "$local" "$localid"
    expect_eq "$what: GROUP_RANK of $rank" "$node" "$nodeid"
    expect_eq "$what: GROUP_WORLD_SIZE" "$node_count" "$nodes"
    per_node[$node]=$((${per_node[$node]:-0} + 1))
    per_node_size[$node]=$local_size
  done <<<"$out"
  local node
  for node in "${!per_node[@]}"; do
    expect_eq "$what: LOCAL_WORLD_SIZE on node $node" "${per_node_size[$node]}" "${per_node[$node]}"
  done
}

declare -A per_node_size
for shape in "1 1" "2 2" "4 2" "16 2"; do
  read -r ranks nodes <<<"$shape"
  echo "== $ranks ranks on $nodes nodes"
  out=$(timeout 120 srun --mpi=pmix -N"$nodes" -n"$ranks" --time=2 "$launch" --bootstrap=pmix -- bash -c "$report") ||
    fail "pmix: srun failed"
  check_output "pmix $ranks" "$ranks" "$nodes" "$out"
  out=$(timeout 120 srun --mpi=none -N"$nodes" -n"$ranks" --time=2 "$launch" --bootstrap=slurm -- bash -c "$report") ||
    fail "slurm: srun failed"
  check_output "slurm $ranks" "$ranks" "$nodes" "$out"
  # torchrun's variables, as a Kubernetes JobSet or torchrun would set them (here taken from Slurm's).
  port=$((24000 + RANDOM % 2000))
  out=$(timeout 120 srun --mpi=none -N"$nodes" -n"$ranks" --ntasks-per-node=$((ranks / nodes)) --time=2 bash -c \
    "RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS LOCAL_RANK=\$SLURM_LOCALID GROUP_RANK=\$SLURM_NODEID \
     LOCAL_WORLD_SIZE=$((ranks / nodes)) MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
     exec $launch --bootstrap=env -- bash -c '$report'") ||
    fail "env: srun failed"
  check_output "env $ranks" "$ranks" "$nodes" "$out"
  expect_eq "env keeps MASTER_PORT" "$(awk '{print $7}' <<<"$out" | sort -u)" "127.0.0.1:$port"
done

echo "== OMP_NUM_THREADS: --cpus-per-task, else the share of CPUs that ranks of a node may all run on"
# The local cluster does not pin tasks: without -c each of node1's 3 ranks (block distribution: 0-2 there, 3 on
# node2) sees every CPU, and a program taking a thread per CPU in each oversubscribed them. Rank 3's are its own.
threads='echo "$RANK ${OMP_NUM_THREADS-unset}"'
cpus=$(srun -N1 -n1 --time=1 nproc)
out=$(timeout 120 srun --mpi=pmix -N2 -n4 --time=2 env -u OMP_NUM_THREADS "$launch" -- bash -c "$threads" 2>"$work_err") ||
  fail "threads: srun failed"
share=$((cpus / 3 > 1 ? cpus / 3 : 1))
expect_eq "threads without -c" "$(sort <<<"$out" | paste -sd ' ')" "0 $share 1 $share 2 $share 3 unset"
grep -q "srunway-launch\[node1 rank 0\] info: OMP_NUM_THREADS=$share for the program: the ranks of a node share its CPUs" \
  "$work_err" || fail "threads: no line from rank 0: $(cat "$work_err")"
out=$(timeout 120 srun --mpi=pmix -N2 -n4 -c1 --time=2 env -u OMP_NUM_THREADS "$launch" -- bash -c "$threads") ||
  fail "threads -c1: srun failed"
expect_eq "threads with -c 1" "$(sort <<<"$out" | paste -sd ' ')" "0 1 1 1 2 1 3 1"
out=$(OMP_NUM_THREADS=5 timeout 120 srun --mpi=pmix -N2 -n4 --time=2 "$launch" -- bash -c "$threads") ||
  fail "threads given: srun failed"
expect_eq "threads the user gave" "$(sort <<<"$out" | paste -sd ' ')" "0 5 1 5 2 5 3 5"
echo "ok"
