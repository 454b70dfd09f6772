#!/usr/bin/env bash
# srunway-launch's exec mode drives a real torch.distributed gloo group over both nodes to a correct all-reduce.
source "$(dirname "$0")/lib.sh"
require_cluster
launch=${SRUNWAY_LAUNCH:?SRUNWAY_LAUNCH must name srunway-launch}
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || {
  [[ ${SRUNWAY_REQUIRE_CLUSTER:-0} == 1 ]] && fail "python3-torch is not installed (scripts/install-deps.sh)"
  echo "SKIP: python3-torch is not installed"; exit 77
}
script='
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and size == int(os.environ["WORLD_SIZE"])
t = torch.full((1000,), float(rank + 1))
dist.all_reduce(t)
assert torch.all(t == size * (size + 1) / 2), t[:4]
local = os.environ["LOCAL_RANK"]
print(f"gloo ok rank {rank} of {size} local {local} sum {t[0].item():.0f}")
dist.destroy_process_group()
'
out=$(timeout 180 srun --mpi=pmix -N2 -n4 --time=3 "$launch" -- /usr/bin/python3 -c "$script") ||
  fail "torch gloo group failed: $out"
echo "$out"
expect_eq "ranks that all-reduced" "$(grep -c '^gloo ok rank [0-3] of 4 local [0-2] sum 10$' <<<"$out")" 4
echo "ok"
