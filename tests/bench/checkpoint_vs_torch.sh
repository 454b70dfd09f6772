#!/usr/bin/env bash
# Benchmark: writing and reading a training checkpoint (parameters and both AdamW moments, fp32) with srunway-train
# against torch.save and torch.load of the same three tensors, in one run, in the same directory. srunway-train's
# own figures are its log lines ("saved checkpoint ... in X s": write, checksums, fsync, manifest; "resumed ...
# read in X s": read and check every tensor); PyTorch's are torch.save then fsync, and torch.load. Both read back
# what was just written (from the page cache). Asserts nothing about time.
set -euo pipefail
train=${SRUNWAY_TRAIN:?} preset=${SRUNWAY_BENCH_PRESET:-gpt2-124m}
work=$(mktemp -d "${SRUNWAY_BENCH_DIR:-${TMPDIR:-/tmp}}/srunway-ckpt-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

args=(--preset "$preset" --mock-data --seq-length 64 --micro-batch-size 1 --global-batch-size 1 --train-steps 1
      --threads "$(nproc)")
"$train" "${args[@]}" --save "$work/ckpt" >"$work/save.log" 2>&1 || { cat "$work/save.log" >&2; exit 1; }
"$train" "${args[@]}" --load "$work/ckpt" >"$work/load.log" 2>&1 || { cat "$work/load.log" >&2; exit 1; }
save_s=$(sed -n 's/.*saved checkpoint .* in \([0-9.]*\) s)$/\1/p' "$work/save.log")
load_s=$(sed -n 's/.*resumed from .*; read in \([0-9.]*\) s)$/\1/p' "$work/load.log")
[[ -n $save_s && -n $load_s ]] || { echo "no save or load time in the logs:" >&2; cat "$work"/*.log >&2; exit 1; }
shard=$(ls "$work"/ckpt/iter_*/shard_*.ckpt)

# PyTorch: the same number of elements per tensor, read from the shard's header.
read -r numel torch_save_s torch_load_s < <(/usr/bin/python3 - "$shard" "$work/torch.pt" <<'PY'
import json, os, struct, sys, time
import torch
with open(sys.argv[1], "rb") as f:
    f.seek(16)
    length, = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(length))
numel = header["tensors"][0]["numel"]
state = {name: torch.randn(numel) for name in ("params", "exp_avg", "exp_avg_sq")}
start = time.perf_counter()
with open(sys.argv[2], "wb") as f:
    torch.save(state, f)
    f.flush()
    os.fsync(f.fileno())
saved = time.perf_counter() - start
start = time.perf_counter()
loaded = torch.load(sys.argv[2])
read = time.perf_counter() - start
assert loaded["params"].numel() == numel
print(numel, f"{saved:.2f}", f"{read:.2f}")
PY
)
gib=$(awk -v n="$numel" 'BEGIN {printf "%.2f", 3 * n * 4 / 2^30}')
echo "checkpoint of ${preset}: ${numel} parameters, 3 fp32 tensors, ${gib} GiB, one rank, in ${work%/*}"
echo "  srunway-train  save ${save_s} s   load ${load_s} s"
torch_version=$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')
echo "  PyTorch ${torch_version}  save ${torch_save_s} s   load ${torch_load_s} s"
awk -v a="$save_s" -v b="$torch_save_s" -v c="$load_s" -v d="$torch_load_s" \
  'BEGIN {printf "  ratio PyTorch/srunway time: save %.2f, load %.2f (above 1: srunway is faster)\n", b / a, d / c}'
