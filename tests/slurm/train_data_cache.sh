#!/usr/bin/env bash
# srunway-train --data-cache-path on 2 nodes x 2 ranks: each node's first rank builds the sample index into the
# directory (one file for training, one for validation) and the node's ranks map it; the losses are those of a run
# that builds the index in every rank's memory, the first time and when the files are found; a file cut short is
# rebuilt; a read-only directory that holds the files is used; a directory that cannot be written where the run
# must write is one line from rank 0, and every rank exits 1.
source "$(dirname "$0")/lib.sh"
require_cluster
train=${SRUNWAY_TRAIN:?} prep=${SRUNWAY_PREP:?}
work=$(mktemp -d)
at_exit "rm -rf '$work'"
for i in $(seq 1 400); do printf 'document %d says alpha beta gamma %d times\n\n' "$i" $((i % 13)); done >"$work/corpus.txt"
"$prep" --input "$work/corpus.txt" --output-prefix "$work/data" --train-vocab 300 --quiet >/dev/null ||
  fail "srunway-prep failed"
common=(--preset gpt-tiny --vocab-size 300 --seq-length 32 --micro-batch-size 2 --global-batch-size 8
        --train-steps 6 --eval-interval 3 --eval-iters 2 --data-path "$work/data" --split 90,10 --peak-tflops 1)
# run NAME [FLAGS...]: 2 nodes x 2 ranks; output in NAME.log, losses (training and validation) in NAME.losses.
run() {
  local name=$1
  shift
  srun --mpi=pmix -N2 --ntasks-per-node=2 -c1 env OMP_NUM_THREADS=1 "$train" "${common[@]}" "$@" \
    >"$work/$name.log" 2>&1 || return
  grep -oE '(^step +[0-9]+/[0-9]+|^validation at step [0-9]+) \| loss [0-9.]+' "$work/$name.log" >"$work/$name.losses"
}

run memory || fail "$(cat "$work/memory.log")"
run built --data-cache-path "$work/cache" || fail "$(cat "$work/built.log")"
expect_eq "cache files" "$(cd "$work/cache" && ls | sed 's/^[0-9a-f]\{16\}-//' | sort | tr '\n' ' ')" "train.sidx valid.sidx "
run found --data-cache-path "$work/cache" || fail "$(cat "$work/found.log")"
expect_eq "lines of losses" "$(wc -l <"$work/memory.losses")" 8
diff "$work/memory.losses" "$work/built.losses" || fail "the index built into --data-cache-path gave other losses"
diff "$work/memory.losses" "$work/found.losses" || fail "the index found in --data-cache-path gave other losses"
# Built by each node's first rank into the one directory (both nodes are this machine): rank 0 may find the file
# node2's rank 0 wrote a moment before; the second run must find it.
grep -qE "info: sample index $work/cache/[0-9a-f]*-train.sidx (built|found) in" "$work/built.log" ||
  fail "$(cat "$work/built.log")"
grep -q "info: sample index $work/cache/[0-9a-f]*-train.sidx found in" "$work/found.log" || fail "$(cat "$work/found.log")"
echo "ok: the index built into and found in --data-cache-path: the losses of the in-memory index"

# A cache built beforehand that the run may not write in (an admin's, read-only to users; here an immutable
# directory, which root cannot write in either) is used as it is; a run that needs another file is told.
chattr +i "$work/cache" || fail "chattr +i: this test needs a file system with immutable directories (ext4, xfs)"
at_exit "chattr -i '$work/cache'"
run readonly --data-cache-path "$work/cache" || fail "$(cat "$work/readonly.log")"
diff "$work/memory.losses" "$work/readonly.losses" || fail "the index found in a read-only directory gave other losses"
rc=0
run readonly_new --data-cache-path "$work/cache" --seed 7 || rc=$?
chattr -i "$work/cache"
expect_eq "exit with files to build in a read-only --data-cache-path" "$rc" 1
grep -q "rank 0\] error: --data-cache-path $work/cache: cannot write in the directory: Operation not permitted" \
  "$work/readonly_new.log" || fail "$(cat "$work/readonly_new.log")"
echo "ok: a read-only --data-cache-path that holds the run's files is used; one that must take new ones is refused"

train_file=$(echo "$work"/cache/*-train.sidx)
truncate -s 100 "$train_file"
run rebuilt --data-cache-path "$work/cache" || fail "$(cat "$work/rebuilt.log")"
diff "$work/memory.losses" "$work/rebuilt.losses" || fail "the rebuilt index gave other losses"
(($(stat -c %s "$train_file") > 100)) || fail "the file cut short was not rebuilt"
# Rebuilt by each node's first rank: rank 0 may find the file node2's rank 0 has just written.
grep -qE "info: sample index $train_file (built|found) in" "$work/rebuilt.log" || fail "$(cat "$work/rebuilt.log")"
echo "ok: a cache file cut short is rebuilt"

rc=0
run unwritable --data-cache-path "$work/data.bin/cache" || rc=$?
expect_eq "exit with an unwritable --data-cache-path" "$rc" 1
expect_eq "error lines" "$(count_matching 'srunway-train.* error:' "$(cat "$work/unwritable.log")")" 1
grep -q "rank 0\] error: --data-cache-path $work/data.bin/cache: cannot create the directory: Not a directory" \
  "$work/unwritable.log" || fail "$(cat "$work/unwritable.log")"
echo "ok: an unwritable --data-cache-path: one line, every rank exits 1"
