#!/usr/bin/env bash
# Benchmark (GPU machines): how fast an NCCL communicator comes up and does its first all-reduce, srunway's launcher
# against PyTorch's ProcessGroupNCCL, in one run, one rank on one GPU (this machine's). Ours, phase by phase: the
# driver and NCCL loaded, the id exchange, ncclCommInitRankConfig and the first 4 MiB all-reduce, as
# `srunway-launch --check --comm nccl` times them. PyTorch's: set_device (its CUDA start-up),
# init_process_group("nccl") with its device given (so it builds the communicator eagerly), the first 4 MiB
# all_reduce and a synchronize, timed inside Python after `import torch`. Median of 5 fresh processes each.
# Exits 77 (skip) without a GPU, NCCL or PyTorch. Asserts nothing about time.
set -euo pipefail
launch=${SRUNWAY_LAUNCH:?} python=${SRUNWAY_BENCH_PYTHON:-python3} rounds=${SRUNWAY_BENCH_ROUNDS:-5}
unset SLURM_PROCID PMIX_RANK RANK WORLD_SIZE
if ! "$launch" --check --comm nccl >/dev/null 2>&1; then echo "SKIP: no GPU or NCCL for srunway-launch"; exit 77; fi
if ! "$python" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then echo "SKIP: no PyTorch with CUDA"; exit 77; fi

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Ours phase by phase: loading the CUDA driver and NCCL and taking the GPU, the id exchange, communicator init and
# the first all-reduce. PyTorch's over the same window: from before its first CUDA call (set_device, which starts
# the driver) to the all-reduce synchronised; `import torch`, which loads libnccl, is outside it, so PyTorch's
# window lacks NCCL's own dlopen, which ours includes.
kPhases=("driver and nccl load" "id broadcast" "communicator init" "first collective")
declare -A phase_ms
ours=() torch=()
for ((i = 0; i < rounds; i++)); do
  json=$("$launch" --check --comm nccl --bytes 4194304 --json)
  for phase in "${kPhases[@]}"; do
    phase_ms[$phase]+="$("$python" -c '
import json, sys
phases = {p["phase"]: p["max_ms"] for p in json.loads(sys.argv[1])["phases"]}
print("%.1f" % phases[sys.argv[2]])' "$json" "$phase") "
  done
  ours+=("$("$python" -c '
import json, sys
phases = {p["phase"]: p["max_ms"] for p in json.loads(sys.argv[1])["phases"]}
print("%.1f" % sum(phases[k] for k in sys.argv[2:]))' "$json" "${kPhases[@]}")")
  torch+=("$(MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29600 + i)) "$python" -c '
import time, torch, torch.distributed as dist
start = time.perf_counter()
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"{(time.perf_counter() - start) * 1e3:.1f}")
dist.destroy_process_group()' 2>/dev/null | tail -n 1)")
done
o=$(printf '%s\n' "${ours[@]}" | median) t=$(printf '%s\n' "${torch[@]}" | median)
echo "NCCL communicator up + first 4 MiB all-reduce, 1 rank, median of $rounds processes:"
for phase in "${kPhases[@]}"; do
  printf '  srunway %-22s %8s ms\n' "$phase" "$(tr ' ' '\n' <<<"${phase_ms[$phase]}" | grep . | median)"
done
echo "  srunway-launch, all of the above:            $o ms   [${ours[*]}]"
echo "  PyTorch set_device + init_process_group(nccl) + all_reduce: $t ms   [${torch[*]}]"
awk -v o="$o" -v t="$t" 'BEGIN {printf "  ratio srunway/PyTorch: %.2f (below 1: srunway is faster)\n", o / t}'
