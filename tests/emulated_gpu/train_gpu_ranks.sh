#!/usr/bin/env bash
# Several GPUs, emulated: `srunway-train --device cuda` as two ranks of one job, which one real GPU cannot host
# (NCCL refuses two ranks on one GPU). Each rank is a process with torchrun's environment on its own stand-in GPU
# (FAKE_CUDA_DEVICES=2: local ranks 0 and 1 take GPUs 0 and 1), running the kernels on the emulated GPU, and the
# stand-in NCCL's collectives meet in shared memory (FAKE_NCCL_SHARED=1) and really add the ranks' gradients:
#   1. two ranks of micro-batch 2 train as one rank accumulating the same 4 samples per step: every step's loss
#      and gradient norm within 1e-4 relative (only the order of the gradients' sums differs), dropout on (each
#      sample's masks are drawn at its global index: a rank 1 drawing rank 0's masks is 4% off);
#   2. the same with --use-distributed-optimizer (ZeRO-1: each bucket reduce-scattered, each rank's AdamW on its
#      shard of the fp32 parameters and moments, the new bf16 weights all-gathered, all on the device), whose peak
#      memory is 6 bytes per parameter below the replicas';
#   3. the two ZeRO-1 ranks' checkpoint of step 3 (one shard each, written from device memory) resumes on one
#      rank, whose steps 4-6 match the two ranks' own; so does the checkpoint of case 1's two replicas, each rank
#      bringing only its shard's ranges of its whole buffers to the host;
#   4. their export (--export) gathers the ranks' fp32 slices: the same bytes as one rank's export after loading
#      their final checkpoint;
#   5. each rank's GEMM algorithms, chosen by timing (the default), are kept in its shard and taken again on
#      resuming, where timing would now choose others (the stand-in's algorithms made to differ in their last bits):
#      the resumed ranks' steps are the uninterrupted ones' bit for bit, where the heuristic's first algorithm gives
#      other losses;
#   6. --check-weight-hash-across-dp-replicas-interval: replicas that hash alike train on; a bit flipped in one
#      rank's weights ends both at the next check, exit 3, unsaved, rank 0 naming both ranks' hashes; and
#      --deterministic-mode is refused on a GPU;
#   7. --grad-reduce-in-bf16: the buckets summed in bf16 train within bf16's noise of case 1, not its bits, and
#      ZeRO-1's reduce-scatter of them gives the all-reduce's steps.
# Usage: train_gpu_ranks.sh SRUNWAY_TRAIN (the emulated GPU's build: tests/emulated_gpu/meson.build)
set -euo pipefail
train=${1:?usage: train_gpu_ranks.sh SRUNWAY_TRAIN}
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset SLURM_PROCID SLURM_JOB_ID SLURM_STEP_ID PMIX_RANK PMIX_NAMESPACE RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE

export FAKE_CUDA_DEVICES=2 FAKE_NCCL_SHARED=1 FAKE_NCCL_TIMEOUT=120
common=(--preset gpt-tiny --seq-length 32 --micro-batch-size 2 --global-batch-size 4 --mock-data --lr 3e-3
        --warmup-steps 2 --train-steps 6 --log-interval 1 --peak-tflops 1 --bucket-size-mb 0.05 --device cuda
        --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm --log-num-zeros-in-grad)

# ranks NAME FLAGS...: two ranks of one job; rank 0 writes $work/NAME.jsonl, each rank's stderr is NAME.RANK.err.
# rank_env[R]: VAR=value words added to rank R's environment; each rank must exit $want_rc (0 unless set).
rank_env=("" "")
ranks() {
  local name=$1 r rc=0 want=${want_rc:-0} bad=0
  shift
  # MASTER_PORT and the next port (srunway's exchange) both free.
  local port
  port=$(python3 "$(dirname "$0")/../free_port.py")
  local pids=()
  for r in 0 1; do
    # shellcheck disable=SC2086  # rank_env's words are separate VAR=value arguments
    env ${rank_env[$r]} RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$train" "${common[@]}" --metrics-file "$work/$name.jsonl" "$@" >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
    pids+=($!)
  done
  for r in 0 1; do
    rc=0
    wait "${pids[$r]}" || rc=$?
    ((rc == want)) || { echo "rank $r of $name exited $rc, not $want:" >&2; cat "$work/$name.$r.err" >&2; bad=1; }
  done
  ((bad == 0)) || fail "$name: a rank exited otherwise"
}
# one NAME FLAGS...: one rank alone.
one() {
  local name=$1
  shift
  "$train" "${common[@]}" --metrics-file "$work/$name.jsonl" "$@" >"$work/$name.out" 2>"$work/$name.err" ||
    fail "$name: exit $?: $(cat "$work/$name.err")"
}
# same NAME EXPECTED.jsonl GOT.jsonl [FIRST_STEP]: GOT's losses, gradient norms and parameter norms (under ZeRO-1
# each rank's slices summed over the ranks) from FIRST_STEP on are EXPECTED's within 1e-4 relative, and its counts
# of zero gradients the same.
same() {
  python3 - "$@" <<'PY'
import json, sys
name, expected_path, got_path = sys.argv[1:4]
first = int(sys.argv[4]) if len(sys.argv) > 4 else 1
read = lambda p: {r["step"]: r for r in map(json.loads, open(p)) if "loss" in r and r["step"] >= first}
expected, got = read(expected_path), read(got_path)
assert expected and sorted(expected) == sorted(got), f"{name}: steps {sorted(got)}, expected {sorted(expected)}"
worst = max(abs(got[s][k] - expected[s][k]) / abs(expected[s][k])
            for s in expected for k in ("loss", "grad_norm", "params_norm"))
last = max(expected)
print(f"{name}: steps {first}-{last}, last loss {got[last]['loss']:.6f} (expected {expected[last]['loss']:.6f}), "
      f"worst relative gap {worst:.2e} (allowed 1e-4)")
assert worst <= 1e-4, f"{name}: {worst:.2e} from the expected losses, gradient and parameter norms"
# --log-num-zeros-in-grad: gpt-tiny's 128 learned positions, 32 used, leave 96 x 64 gradients zero at every step;
# under ZeRO-1 the ranks' slices' counts summed: the same count as one rank's.
for s in expected:
    assert got[s]["num_zeros"] == expected[s]["num_zeros"] >= 96 * 64, (name, s, got[s]["num_zeros"],
                                                                        expected[s]["num_zeros"])
PY
}

echo "== 1. two GPUs against one accumulating the same samples"
one single
ranks two --save "$work/replicas" --save-interval 3
grep -q "training on Fake GPU (0000:1b:00.0)" "$work/two.0.err" ||
  fail "no line from rank 0 naming its GPU: $(cat "$work/two.0.err")"
same "two ranks" "$work/single.jsonl" "$work/two.jsonl"

echo "== 2. ZeRO-1 on two GPUs"
ranks zero --use-distributed-optimizer --save "$work/ckpt" --save-interval 3 --export "$work/zero.safetensors"
same "ZeRO-1, two ranks" "$work/single.jsonl" "$work/zero.jsonl"
# Each rank holds half the fp32 parameters and half the moments: 6 bytes per parameter less than a replica
# (4 with the parameters whole), so its peak is lower by at least 5.5 bytes a parameter.
python3 - "$work/two.jsonl" "$work/zero.jsonl" "$work/zero.safetensors" <<'PY'
import json, math, struct, sys
peak = [max(r.get("peak_memory_gib", 0) for r in map(json.loads, open(p))) * 2**30 for p in sys.argv[1:3]]
with open(sys.argv[3], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
n = sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
saved = (peak[0] - peak[1]) / n
print(f"ZeRO-1 peak {peak[1]:.0f} bytes, all-reduce {peak[0]:.0f}: {saved:.2f} bytes less per parameter")
assert saved >= 5.5, f"ZeRO-1 saves {saved:.2f} bytes per parameter, want >= 5.5 (fp32 parameters sharded too)"
PY
grep -q "optimizer state [0-9.]* MB per rank (ZeRO-1: 1/2 of it); fp32 parameters [0-9.]* MB per rank (1/2 of them" \
  "$work/zero.0.err" || fail "rank 0 does not say the fp32 parameters are sharded: $(cat "$work/zero.0.err")"

echo "== 3. the two ranks' checkpoint of step 3 resumed on one GPU"
shards=$(find "$work/ckpt/iter_0000003" -name 'shard_*.ckpt' | wc -l)
((shards == 2)) || fail "iter_0000003 holds $shards shards, not one per rank"
one resumed --load "$work/ckpt/iter_0000003"
same "resumed on one rank" "$work/zero.jsonl" "$work/resumed.jsonl" 4
# Without ZeRO-1 each rank holds the whole state on its GPU and brings only its shard's ranges (its slices of every
# bucket) to the host: a rank 1 writing rank 0's ranges, or the ranges at the wrong offsets, resumes other weights.
one resumed-replicas --load "$work/replicas/iter_0000003"
same "the replicas' checkpoint resumed on one rank" "$work/two.jsonl" "$work/resumed-replicas.jsonl" 4
echo "== 4. the ZeRO-1 ranks' export gathers every rank's fp32 slices"
one loaded --load "$work/ckpt/iter_0000006" --export "$work/loaded.safetensors"
cmp -s "$work/zero.safetensors" "$work/loaded.safetensors" ||
  fail "the two ZeRO-1 ranks exported other weights than their final checkpoint holds"
echo "ok: the two ranks' export equals, byte for byte, one rank's export of their final checkpoint"
echo "== 5. each rank's timed GEMM choices come back with its shard"
# Algorithm i of the stand-in computes (1 + i 2^-20) times algorithm 0's products, so a choice shows in the losses;
# rank 0 times algorithm 1 fastest, rank 1 algorithm 2. Resumed, both would time algorithm 0 fastest. The emulator
# runs every launch's blocks in order here: it alternates their order from launch to launch, which makes the
# embedding backward's atomics add up in an order that depends on how many kernels ran before (not the same in a
# run resumed at step 3; since AdamW's updates split at the word embeddings, 2026-12-06, it showed in the last bits
# of the gradients' norm), and the GPU's atomics promise no order at all.
export FAKE_CUBLASLT_DISTINCT_ALGORITHMS=1 FAKE_GPU_BLOCKS_IN_ORDER=1
rank_env=("FAKE_CUBLASLT_SLOW_ALGORITHM=0,2" "FAKE_CUBLASLT_SLOW_ALGORITHM=0,1")
ranks timed --save "$work/timed" --save-interval 3
rank_env=("FAKE_CUBLASLT_SLOW_ALGORITHM=1,2" "FAKE_CUBLASLT_SLOW_ALGORITHM=1,2")
ranks timed-resumed --load "$work/timed/iter_0000003"
rank_env=("SRUNWAY_GEMM_TUNE=0" "SRUNWAY_GEMM_TUNE=0")
ranks heuristic-resumed --load "$work/timed/iter_0000003"
# Choices made on another GPU are timed anew, said once: the shards' headers (not under their checksums) edited to
# name another GPU, at the same length.
for shard in "$work"/timed/iter_0000003/shard_*.ckpt; do
  python3 - "$shard" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
assert data.count(b'"gpu":"Fake GPU"') == 1, "no GPU named in the shard's timed choices"
open(sys.argv[1], "wb").write(data.replace(b'"gpu":"Fake GPU"', b'"gpu":"Fake XPU"'))
PY
done
rank_env=("FAKE_CUBLASLT_SLOW_ALGORITHM=1,2" "FAKE_CUBLASLT_SLOW_ALGORITHM=1,2")
ranks elsewhere-resumed --load "$work/timed/iter_0000003"
grep -q "iter_0000003: the GEMM choices were made on Fake XPU with cuBLASLt 130100, this is Fake GPU with cuBLASLt 130100: timing them anew" \
  "$work/elsewhere-resumed.0.err" || fail "no line saying another GPU's choices are timed anew: $(cat "$work/elsewhere-resumed.0.err")"
! grep -q "timing them anew" "$work/elsewhere-resumed.1.err" || fail "rank 1 said it too"
python3 - "$work"/{timed,timed-resumed,heuristic-resumed,elsewhere-resumed}.jsonl <<'PY'
import json, sys
read = lambda p: {r["step"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if "loss" in r and r["step"] > 3}
straight, resumed, heuristic, elsewhere = map(read, sys.argv[1:5])
assert sorted(resumed) == [4, 5, 6] == sorted(heuristic) == sorted(elsewhere), (sorted(resumed), sorted(heuristic))
assert all(resumed[s] == straight[s] for s in resumed), f"resumed {resumed}, uninterrupted {straight}"
assert any(heuristic[s] != straight[s] for s in heuristic), "the algorithms should give other losses: no check"
# Timed anew, the resumed ranks take the fastest algorithm now, the heuristic's first.
assert elsewhere == heuristic, f"another GPU's choices timed anew {elsewhere}, the heuristic's {heuristic}"
print(f"resumed steps 4-6 equal the uninterrupted run's bit for bit (loss {resumed[6][0]!r}); the heuristic's "
      f"algorithm gives {heuristic[6][0]!r}, as does the run that timed another GPU's choices anew")
PY
unset FAKE_CUBLASLT_DISTINCT_ALGORITHMS FAKE_GPU_BLOCKS_IN_ORDER
rank_env=("" "")
echo "== 6. --check-weight-hash-across-dp-replicas-interval: the replicas' weights compared, a flipped bit found"
# The GPUs' bf16 weights and fp32 parameters (ZeRO-1: the gathered bf16 weights) hash the same on both ranks at
# every check. A bit of rank 1's fp32 parameters flipped after step 3 (SRUNWAY_TRAIN_FLIP_WEIGHT, as a memory fault
# would) lasts to the check after it; under ZeRO-1, where each step's gather writes the weights anew, the bit
# flipped after step 4 is there at its check. Both ranks end at step 4, exit 3, unsaved; rank 0 alone says so.
for zero in "" --use-distributed-optimizer; do
  ranks "hashed$zero" --check-weight-hash-across-dp-replicas-interval 1 $zero
  same "hashed at every step $zero" "$work/single.jsonl" "$work/hashed$zero.jsonl"
  rank_env=("" "SRUNWAY_TRAIN_FLIP_WEIGHT=1:$([[ -z $zero ]] && echo 3 || echo 4)")
  want_rc=3 ranks "flipped$zero" --check-weight-hash-across-dp-replicas-interval 2 --save "$work/flipped$zero" \
    --save-interval 2 $zero
  rank_env=("" "")
  grep -q "error: step 4: the ranks' weights differ, where data parallelism keeps them the same bit for bit: no hash is held by more than half of the ranks: rank 0 on [^ ]* has hash [0-9a-f]\{16\}; rank 1 on [^ ]* has hash [0-9a-f]\{16\}; a fault in a GPU's or a host's memory or on the network? Stopping without saving (the last good checkpoint in $work/flipped$zero is kept)" \
    "$work/flipped$zero.0.err" || fail "no line naming both ranks' hashes at step 4 $zero: $(cat "$work/flipped$zero.0.err")"
  ! grep -q "error" "$work/flipped$zero.1.err" || fail "rank 1 said it too: $(cat "$work/flipped$zero.1.err")"
  [[ $(cat "$work/flipped$zero/latest_checkpointed_iteration.txt") == 2 && ! -e $work/flipped$zero/iter_0000004 ]] ||
    fail "the checkpoint of step 2 should be the last: $(ls "$work/flipped$zero")"
done
# Megatron's --deterministic-mode, which the CPU path takes (train_cli), is refused on a GPU with why, exit 2.
rc=0
"$train" "${common[@]}" --deterministic-mode >"$work/deterministic.out" 2>"$work/deterministic.err" || rc=$?
[[ $rc == 2 ]] && grep -q "error: --deterministic-mode: the GPU path adds gradients with atomics" \
  "$work/deterministic.err" || fail "--deterministic-mode on a GPU: exit $rc: $(cat "$work/deterministic.err")"
echo "== 7. --grad-reduce-in-bf16: the buckets reduced in bf16"
# Each bucket cast to bf16 on the GPU, summed in bf16 by the stand-in NCCL (rounded after each addition, as NCCL's),
# cast back: every step's loss within bf16's noise of case 1's fp32 reduction (2e-3 relative), its gradients not the
# same bits (rounded to bf16); the ZeRO-1 ranks' reduce-scatter of the same bf16 buckets gives case 1's all-reduce.
ranks bf16 --grad-reduce-in-bf16
ranks bf16-zero --grad-reduce-in-bf16 --use-distributed-optimizer
grep -q "gradients in [0-9]* buckets overlapped with the backward in bf16" "$work/bf16.0.err" ||
  fail "rank 0 does not say the gradients are reduced in bf16: $(cat "$work/bf16.0.err")"
same "ZeRO-1 in bf16 against all-reduce in bf16" "$work/bf16.jsonl" "$work/bf16-zero.jsonl"
python3 - "$work/two.jsonl" "$work/bf16.jsonl" <<'PY'
import json, sys
read = lambda p: {r["step"]: r for r in map(json.loads, open(p)) if "loss" in r}
fp32, bf16 = map(read, sys.argv[1:3])
assert sorted(fp32) == sorted(bf16), (sorted(fp32), sorted(bf16))
gap = max(abs(bf16[s]["loss"] - fp32[s]["loss"]) / fp32[s]["loss"] for s in fp32)
norms = [abs(bf16[s]["grad_norm"] - fp32[s]["grad_norm"]) / fp32[s]["grad_norm"] for s in fp32]
print(f"reduced in bf16: losses within {gap:.2e} of fp32's (allowed 2e-3); gradient norms {min(norms):.2e} to "
      f"{max(norms):.2e} from fp32's")
assert gap <= 2e-3, f"the losses of the bf16 reduction are {gap:.2e} from fp32's"
assert min(norms) > 0, "a gradient norm equal to fp32's: the reduction did not round to bf16"
PY
# Megatron's --accumulate-allreduce-grads-in-fp32 asks for the opposite: both are one line, exit 2.
rc=0
"$train" "${common[@]}" --grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32 >"$work/both.out" \
  2>"$work/both.err" || rc=$?
[[ $rc == 2 ]] && grep -q "error: --grad-reduce-in-bf16 reduces the gradients in bf16, --accumulate-allreduce-grads-in-fp32 in fp32: give one$" \
  "$work/both.err" || fail "--grad-reduce-in-bf16 with --accumulate-allreduce-grads-in-fp32: exit $rc: $(cat "$work/both.err")"
echo "ok: srunway-train on two emulated GPUs"
