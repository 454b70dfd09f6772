#!/usr/bin/env bash
# Benchmark (GPU machines): how fast an NCCL communicator comes up and does its first all-reduce, srunway's launcher
# against PyTorch's ProcessGroupNCCL, in one run, one rank on one GPU (this machine's). Ours: the id exchange,
# ncclCommInitRankConfig and the first 4 MiB all-reduce, as `srunway-launch --check --comm nccl` times them.
# PyTorch's: init_process_group("nccl") with its device given (so it builds the communicator eagerly), the first
# 4 MiB all_reduce and a synchronize, timed inside Python after `import torch`. Median of 5 fresh processes each.
# Exits 77 (skip) without a GPU, NCCL or PyTorch. Asserts nothing about time.
set -euo pipefail
launch=${SRUNWAY_LAUNCH:?} python=${SRUNWAY_BENCH_PYTHON:-python3} rounds=${SRUNWAY_BENCH_ROUNDS:-5}
unset SLURM_PROCID PMIX_RANK RANK WORLD_SIZE
if ! "$launch" --check --comm nccl >/dev/null 2>&1; then echo "SKIP: no GPU or NCCL for srunway-launch"; exit 77; fi
if ! "$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then echo "SKIP: no PyTorch with CUDA"; exit 77; fi

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ours=() torch=()
for ((i = 0; i < rounds; i++)); do
  ours+=("$("$launch" --check --comm nccl --bytes 4194304 --json | "$python" -c '
import json, sys
phases = {p["phase"]: p["max_ms"] for p in json.load(sys.stdin)["phases"]}
print("%.1f" % (phases["id broadcast"] + phases["communicator init"] + phases["first collective"]))')")
  torch+=("$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29600 + i)) "$python" -c '
import time, torch, torch.distributed as dist
torch.cuda.set_device(0)
start = time.perf_counter()
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"{(time.perf_counter() - start) * 1e3:.1f}")
dist.destroy_process_group()' 2>/dev/null | tail -n 1)")
done
o=$(printf '%s\n' "${ours[@]}" | median) t=$(printf '%s\n' "${torch[@]}" | median)
echo "NCCL communicator up + first 4 MiB all-reduce, 1 rank, median of $rounds processes:"
echo "  srunway-launch (id exchange, ncclCommInitRankConfig, all-reduce): $o ms   [${ours[*]}]"
echo "  PyTorch init_process_group(nccl) + all_reduce:                    $t ms   [${torch[*]}]"
awk -v o="$o" -v t="$t" 'BEGIN {printf "  ratio srunway/PyTorch: %.2f (below 1: srunway is faster)\n", o / t}'
