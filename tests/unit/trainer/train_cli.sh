#!/usr/bin/env bash
# srunway-train as a user runs it: a model overfits one batch; save -> load -> continue gives bit-identical
# losses; a YAML config; and bad input (corrupt dataset, token beyond the vocabulary, another model's checkpoint,
# unknown preset or flag, a full disk, divergence, SIGTERM) each give one clear line and the documented exit code.
# Usage: train_cli.sh SRUNWAY_TRAIN SRUNWAY_PREP
set -euo pipefail

readonly kTrain=$1 kPrep=$2
readonly kWork=$(mktemp -d)
trap 'rm -rf "$kWork"; [[ -z ${cgroup:-} ]] || rmdir "$cgroup" 2>/dev/null || true' EXIT
# Two threads: the resume check then also holds only if results do not depend on how work is shared out.
export OMP_NUM_THREADS=2

fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_exit CODE PATTERN COMMAND...: runs COMMAND, wants exit CODE and PATTERN in its stderr, and exactly one
# error line there.
expect_exit() {
  local want=$1 pattern=$2 rc=0
  shift 2
  "$@" >"$kWork/out" 2>"$kWork/err" || rc=$?
  [[ $rc == "$want" ]] || fail "$*: exit $rc, want $want; stderr: $(cat "$kWork/err")"
  grep -qE -- "$pattern" "$kWork/err" || fail "$*: stderr lacks /$pattern/: $(cat "$kWork/err")"
  local errors
  errors=$(grep -cE 'error|Error' "$kWork/err" || true)
  [[ $errors -le 1 ]] || fail "$*: $errors error lines, want one: $(cat "$kWork/err")"
}
common=(--preset gpt-tiny --seq-length 32 --micro-batch-size 2 --peak-tflops 1)

# 1. Overfitting one batch drives the loss to near zero (from ln 512 = 6.2).
"$kTrain" "${common[@]}" --mock-data --overfit-batch --train-steps 120 --lr 1e-2 --warmup-steps 10 \
  --log-interval 10 --metrics-file "$kWork/overfit.jsonl" >"$kWork/out" 2>>"$kWork/log"
last=$(tail -n 1 "$kWork/overfit.jsonl")
python3 -c "import json,sys; m=json.loads(sys.argv[1]); sys.exit(0 if m['loss'] < 0.05 else 1)" "$last" \
  || fail "overfitting one batch ended at $last"
for key in step loss lr grad_norm ms tokens_per_s mfu; do
  grep -q "\"$key\"" <<<"$last" || fail "metrics line lacks $key: $last"
done
echo "ok: one batch overfits: $last"

# OpenMP threads that wait sleep at once unless the user chose otherwise: libgomp's default spin (3 ms at each
# barrier) made a step 15 times slower beside one busy process. GOMP_SPINCOUNT is what tells the policies apart in
# libgomp's report (OMP_WAIT_POLICY reads PASSIVE unset too). Only where libgomp is linked into the program.
spin() { env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$@" OMP_DISPLAY_ENV=verbose "$kTrain" --version 2>&1 |
           sed -n "s/^ *GOMP_SPINCOUNT = '\(.*\)'/\1/p"; }
if ldd "$kTrain" 2>/dev/null | grep -q libgomp; then
  echo "skipped: $kTrain links libgomp as a shared library, which reads its policy before the program can set one"
elif [[ -z $(spin) ]]; then
  echo "skipped: $kTrain has no libgomp (built without OpenMP)"
else
  [[ $(spin) == 0 && $(spin OMP_WAIT_POLICY=active) == 30000000000 && $(spin GOMP_SPINCOUNT=1000) == 1000 ]] ||
    fail "OpenMP's spin count: $(spin) by default (want 0), $(spin OMP_WAIT_POLICY=active) with" \
      "OMP_WAIT_POLICY=active, $(spin GOMP_SPINCOUNT=1000) with GOMP_SPINCOUNT=1000"
  echo "ok: OpenMP's waiting threads sleep unless OMP_WAIT_POLICY or GOMP_SPINCOUNT says otherwise"
fi

# srunway-prep's exit codes: 2 for a command line without one tokenizer (or half of one), 1 for bad input (a malformed JSONL line
# named by file:line; an input that is not there).
printf '{"text": "one"}\n{"text": \n' >"$kWork/bad.jsonl"
expect_exit 2 "give one tokenizer: --vocab-file and --merge-file, --tokenizer-model \(a Hugging Face tokenizer.json or a SentencePiece model, or its directory\), or --train-vocab N" \
  "$kPrep" --input "$kWork/bad.jsonl" --output-prefix "$kWork/prep"
expect_exit 2 "--vocab-file and --merge-file go together" \
  "$kPrep" --input "$kWork/bad.jsonl" --output-prefix "$kWork/prep" --vocab-file x.json
expect_exit 1 "bad.jsonl:2" "$kPrep" --input "$kWork/bad.jsonl" --output-prefix "$kWork/prep" --train-vocab 300 --quiet
# The input is named by its flag (it said "read DIR: Is a directory").
expect_exit 1 "error: --input $kWork/missing.jsonl: No such file or directory" \
  "$kPrep" --input "$kWork/missing.jsonl" --output-prefix "$kWork/prep" --train-vocab 300
expect_exit 1 "error: --input $kWork: Is a directory" "$kPrep" --input "$kWork" --output-prefix "$kWork/prep" --train-vocab 300
# An output prefix that cannot be written is refused before tokenizing (it failed at the first write, after the
# whole corpus), and one naming a directory no longer writes DIR/.bin.
expect_exit 2 "--output-prefix $kWork/none/prep: $kWork/none is not a directory" \
  "$kPrep" --input "$kWork/bad.jsonl" --output-prefix "$kWork/none/prep" --train-vocab 300 --quiet
expect_exit 2 "--output-prefix $kWork/: names a directory" \
  "$kPrep" --input "$kWork/bad.jsonl" --output-prefix "$kWork/" --train-vocab 300 --quiet
# Options of the other input kind were ignored (--json-keys on a text file tokenized every line), and the last of
# --append-eod/--no-append-eod won.
printf 'one\n\ntwo\n' >"$kWork/plain.txt"
expect_exit 2 "--json-keys: $kWork/plain.txt is read as text \\(JSONL input ends in .jsonl or .json, or give --input-format jsonl\\)" \
  "$kPrep" --input "$kWork/plain.txt" --output-prefix "$kWork/prep" --train-vocab 300 --json-keys body
expect_exit 2 "--document-separator: $kWork/bad.jsonl is JSONL, one document per line" \
  "$kPrep" --input "$kWork/bad.jsonl" --output-prefix "$kWork/prep" --train-vocab 300 --document-separator %
expect_exit 2 "--append-eod excludes --no-append-eod" \
  "$kPrep" --input "$kWork/plain.txt" --output-prefix "$kWork/prep" --train-vocab 300 --append-eod --no-append-eod
[[ ! -e $kWork/prep.bin && ! -e $kWork/prep.idx ]] || fail "srunway-prep left a dataset behind after bad input"

# 2. A dataset from srunway-prep; 20 steps straight vs 10 + resume + 10: the same losses, bit for bit.
for i in $(seq 1 300); do echo "line $i of a small corpus, with words that repeat: alpha beta gamma $((i % 7))"; done \
  >"$kWork/corpus.txt"
"$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/data" --train-vocab 400 --quiet >/dev/null
# Megatron's preprocess_data.py flags, as its scripts pass them, make the same dataset bit for bit; the rest are
# one line each (each was an unknown argument).
"$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/ours" --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt" --quiet >/dev/null || fail "srunway-prep with the data's tokenizer"
"$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/megatron" --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt" --tokenizer-type GPT2BPETokenizer --dataset-impl mmap --append-eod \
  --workers 2 --partitions 2 --log-interval 100 --keep-sequential-samples --keep-newlines --lang english \
  --quiet >/dev/null || fail "srunway-prep with Megatron's flags"
cmp -s "$kWork/ours.bin" "$kWork/megatron.bin" && cmp -s "$kWork/ours.idx" "$kWork/megatron.idx" ||
  fail "Megatron's preprocessing flags changed the dataset"
expect_exit 2 "error: --tokenizer-type SentencePieceTokenizer: srunway-prep reads BPE only: GPT2BPETokenizer \(--vocab-file and --merge-file, or --train-vocab\), HuggingFaceTokenizer \(--tokenizer-model: a tokenizer.json\), Llama2Tokenizer or GPTSentencePieceTokenizer \(--tokenizer-model: a SentencePiece BPE model\)" \
  "$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/megatron" --train-vocab 300 \
  --tokenizer-type SentencePieceTokenizer
expect_exit 2 "error: --tokenizer-type HuggingFaceTokenizer needs --tokenizer-model" \
  "$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/megatron" --train-vocab 300 \
  --tokenizer-type HuggingFaceTokenizer
expect_exit 2 "error: give one tokenizer: --vocab-file and --merge-file, --tokenizer-model" \
  "$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/megatron" --train-vocab 300 \
  --tokenizer-type HuggingFaceTokenizer --tokenizer-model "$kWork"
expect_exit 2 "error: --split-sentences: srunway-prep does not split documents into sentences" \
  "$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/megatron" --train-vocab 300 --split-sentences
expect_exit 2 "--dataset-impl: lazy not in \{mmap\}" \
  "$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/megatron" --train-vocab 300 --dataset-impl lazy
echo "ok: srunway-prep takes Megatron's preprocessing flags and refuses the rest by name"
# --decode: a dataset back to its documents as JSONL, with the tokenizer beside it or the one given (the Hugging
# Face files' decoding is hf_tokenizer_reference's); bad uses are one line each.
python3 -c "
import json
for doc in ['alpha beta', ' two  spaces\nand a line', 'caf\u00e9 \u65e5\u672c \u00a0nbsp', '']:
    print(json.dumps({'text': doc}))" >"$kWork/docs.jsonl"
"$kPrep" --input "$kWork/docs.jsonl" --output-prefix "$kWork/docs" --train-vocab 300 --quiet >/dev/null
"$kPrep" --decode "$kWork/docs" >"$kWork/decoded.jsonl" || fail "srunway-prep --decode"
"$kPrep" --decode "$kWork/docs" --vocab-file "$kWork/docs.vocab.json" --merge-file "$kWork/docs.merges.txt" |
  cmp -s - "$kWork/decoded.jsonl" || fail "srunway-prep --decode with the tokenizer given decoded otherwise"
python3 -c "
import json, sys
want = [json.loads(line)['text'] for line in open(sys.argv[1])]
got = [json.loads(line)['text'] for line in open(sys.argv[2])]
sys.exit(0 if got == want else f'decoded {got}, want {want}')" "$kWork/docs.jsonl" "$kWork/decoded.jsonl" ||
  fail "srunway-prep --decode did not give the documents back"
expect_exit 2 "--decode excludes --input" "$kPrep" --decode "$kWork/docs" --input "$kWork/docs.jsonl"
expect_exit 2 "error: --decode: give one tokenizer, --vocab-file and --merge-file or --tokenizer-model" \
  "$kPrep" --decode "$kWork/docs" --vocab-file "$kWork/docs.vocab.json"
expect_exit 1 "error: $kWork/missing: no such dataset \\(looked for $kWork/missing.bin \\+ $kWork/missing.idx and" \
  "$kPrep" --decode "$kWork/missing"
cp "$kWork/docs.bin" "$kWork/bare.bin" && cp "$kWork/docs.idx" "$kWork/bare.idx"
expect_exit 1 "error: $kWork/bare: no tokenizer beside the dataset" "$kPrep" --decode "$kWork/bare"
rc=0
"$kPrep" --decode "$kWork/docs" >/dev/full 2>"$kWork/err" || rc=$?
[[ $rc == 1 && $(cat "$kWork/err") == *"error: cannot write to stdout: No space left on device; the output is incomplete" &&
   $(wc -l <"$kWork/err") == 1 ]] || fail "srunway-prep --decode >/dev/full: exit $rc: $(cat "$kWork/err")"
# Tokens the tokenizer does not have: another tokenizer than the dataset's (one of 257 tokens has no 257, the
# end of document of docs' 258).
echo '{"text": "a"}' >"$kWork/one.jsonl"
"$kPrep" --input "$kWork/one.jsonl" --output-prefix "$kWork/one" --train-vocab 257 --quiet >/dev/null
expect_exit 1 "error: $kWork/docs: token 257 \\(document 0, token 10\\) is outside the tokenizer's vocabulary of 257" \
  "$kPrep" --decode "$kWork/docs" --vocab-file "$kWork/one.vocab.json" --merge-file "$kWork/one.merges.txt"
# llm.c's shards: the same documents as one stream, the end of document before each (as llm.c's fineweb.py
# writes them), the second document cut by the end of the first shard; and a shard with a token past the vocabulary.
python3 - "$kWork/docs" "$kWork/shard" <<'PY'
import struct, sys
idx = open(sys.argv[1] + '.idx', 'rb').read()
count = struct.unpack_from('<Q', idx, 18)[0]
assert idx[17] == 8, 'not uint16 tokens'
lengths = struct.unpack_from(f'<{count}i', idx, 34)
pointers = struct.unpack_from(f'<{count}q', idx, 34 + 4 * count)
tokens = open(sys.argv[1] + '.bin', 'rb').read()
stream = []
for n, at in zip(lengths, pointers):
    document = list(struct.unpack_from(f'<{n}H', tokens, at))
    stream += document[-1:] + document[:-1]  # srunway-prep puts the end of document after a document
cut = stream.index(stream[0], 1) + 2
shards = {'000000': stream[:cut], '000001': stream[cut:], 'bad': [stream[0], 60000]}
for name, part in shards.items():
    with open(f'{sys.argv[2]}_{name}.bin', 'wb') as f:
        f.write(struct.pack('<3i', 20240520, 1, len(part)) + bytes(1012) + struct.pack(f'<{len(part)}H', *part))
PY
"$kPrep" --decode "$kWork/shard_0*.bin" --vocab-file "$kWork/docs.vocab.json" --merge-file "$kWork/docs.merges.txt" |
  cmp -s - "$kWork/decoded.jsonl" || fail "srunway-prep --decode of llm.c shards did not give the documents back"
expect_exit 1 "error: $kWork/shard_0\\*.bin: llm.c shards carry no tokenizer: give --vocab-file and --merge-file" \
  "$kPrep" --decode "$kWork/shard_0*.bin"
expect_exit 1 "error: $kWork/shard_bad.bin: token 60000 \\(shard 1 of 1, token 1\\) is outside the tokenizer's" \
  "$kPrep" --decode "$kWork/shard_bad.bin" --vocab-file "$kWork/docs.vocab.json" --merge-file "$kWork/docs.merges.txt"
# A signal while it decodes stops it. Between documents it says after how many, its lines whole (data_test's
# DecodeStoppedBetweenDocumentsSaysAfterHowMany); while a write waits on a slow reader (here a FIFO read only after
# the signal; /proc/PID/wchan says (anon_)pipe_write while it waits), it says so, and what came out is the start of
# the documents' lines. It said "cannot write to stdout: Interrupted system call", as if the disk had failed.
python3 -c "
import json
for i in range(3000):
    print(json.dumps({'text': f'document {i}: alpha beta gamma delta epsilon zeta eta theta'}, separators=(',', ':')))" \
  >"$kWork/many.jsonl"
"$kPrep" --input "$kWork/many.jsonl" --output-prefix "$kWork/many" --vocab-file "$kWork/docs.vocab.json" \
  --merge-file "$kWork/docs.merges.txt" --quiet >/dev/null || fail "srunway-prep of 3000 documents"
mkfifo "$kWork/decode.fifo"
"$kPrep" --decode "$kWork/many" >"$kWork/decode.fifo" 2>"$kWork/decode.err" &
pid=$!
exec 3<"$kWork/decode.fifo"
for _ in $(seq 200); do [[ $(cat "/proc/$pid/wchan" 2>/dev/null) == *pipe_write ]] && break; sleep 0.05; done
kill -INT "$pid"
# Nothing is read until it has said why it stopped: a read at once could make room in the pipe before the woken
# write looks again, and the write would finish (the stop then comes between documents, as CI once saw).
for _ in $(seq 200); do [[ -s $kWork/decode.err ]] && break; sleep 0.05; done
cat <&3 >"$kWork/partial.jsonl"
exec 3<&-
rc=0
wait "$pid" || rc=$?
[[ $rc == 130 && $(cat "$kWork/decode.err") == *"error: stopped by SIGINT while writing to stdout; the output is incomplete" &&
   $(wc -l <"$kWork/decode.err") == 1 ]] ||
  fail "srunway-prep --decode after SIGINT: exit $rc, want 130 and one line: $(cat "$kWork/decode.err")"
size=$(stat -c %s "$kWork/partial.jsonl")
((size > 0 && size < $(stat -c %s "$kWork/many.jsonl"))) && cmp -s -n "$size" "$kWork/partial.jsonl" "$kWork/many.jsonl" ||
  fail "srunway-prep --decode stopped by SIGINT printed $size bytes that are not the start of the documents' lines"
rm -f "$kWork"/many.* "$kWork/decode.fifo" "$kWork/partial.jsonl"
echo "ok: srunway-prep --decode gives the documents back (a Megatron dataset, llm.c shards), and stops on a signal"
# A signal while it encodes: srunway-prep stops between batches, removes its temporaries (as large as the
# dataset) and exits 128 + the signal (it died and left PREFIX.bin.tmp.* behind).
python3 -c "import sys; sys.stdout.write(('alpha beta gamma delta ' * 40 + '\n\n') * 60000)" >"$kWork/big.txt"
"$kPrep" --input "$kWork/big.txt" --output-prefix "$kWork/big" --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt" --workers 1 --quiet >/dev/null 2>"$kWork/big.err" &
pid=$!
for _ in $(seq 200); do ls -A "$kWork" | grep -q '^\.big\.bin\.tmp' && break; sleep 0.05; done  # AtomicFile's
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 143 ]] || fail "srunway-prep after SIGTERM: exit $rc, want 143: $(cat "$kWork/big.err")"
grep -q "error: stopped by SIGTERM; $kWork/big.bin and $kWork/big.idx not written" "$kWork/big.err" ||
  fail "srunway-prep after SIGTERM said: $(cat "$kWork/big.err")"
left=$(ls -A "$kWork" | grep 'big' | grep -v -e '^big.txt$' -e '^big.err$' || true)
[[ -z $left ]] || fail "srunway-prep stopped by SIGTERM left: $left"
rm -f "$kWork/big.txt"
# A signal while it learns a vocabulary (minutes for a large corpus) stops it there, not after the last merge.
python3 -c "
import random
random.seed(2)
words = [''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(3, 12))) for _ in range(100000)]
print('\n\n'.join(' '.join(random.choice(words) for _ in range(30)) for _ in range(20000)))" >"$kWork/words.txt"
"$kPrep" --input "$kWork/words.txt" --output-prefix "$kWork/words" --train-vocab 30000 --workers 2 \
  >/dev/null 2>"$kWork/words.err" &
pid=$!
for _ in $(seq 600); do grep -q 'merging' "$kWork/words.err" && break; sleep 0.05; done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 143 ]] || fail "srunway-prep after SIGTERM while merging: exit $rc, want 143: $(cat "$kWork/words.err")"
grep -qE "error: stopped by SIGTERM while learning the vocabulary \([0-9]+ of [0-9]+ merges done\); $kWork/words.bin and $kWork/words.idx not written" \
  "$kWork/words.err" || fail "srunway-prep after SIGTERM while merging said: $(cat "$kWork/words.err")"
rm -f "$kWork/words.txt"
echo "ok: srunway-prep stopped by a signal leaves nothing behind"
# Its outputs are one set: a run that cannot write them all (a full disk at the .idx) leaves the earlier run's set
# whole, not its new .bin beside the old .idx and vocabulary (which srunway-train read without a word); a directory
# where an output goes is refused before tokenizing. The full disk is a 500 KiB tmpfs in a mount namespace of its
# own, where root can make one; else said and skipped.
mkdir "$kWork/in-the-way.idx"
expect_exit 2 "--output-prefix $kWork/in-the-way: $kWork/in-the-way.idx is a directory, where the output goes" \
  "$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/in-the-way" --train-vocab 300 --quiet
rmdir "$kWork/in-the-way.idx"
# --train-vocab reads the input twice: a pipe gave nothing the second time, and the run ended in "no documents"
# after learning the whole vocabulary. Refused first; a pipe with a given vocabulary (one pass) still encodes.
cat "$kWork/corpus.txt" | expect_exit 2 "--train-vocab reads --input twice .* /dev/stdin is a pipe or a device, read once" \
  "$kPrep" --input /dev/stdin --output-prefix "$kWork/piped" --train-vocab 300 --quiet
[[ ! -e $kWork/piped.bin ]] || fail "a refused srunway-prep wrote $kWork/piped.bin"
cat "$kWork/corpus.txt" | "$kPrep" --input /dev/stdin --output-prefix "$kWork/piped" --quiet \
  --vocab-file "$kWork/data.vocab.json" --merge-file "$kWork/data.merges.txt" >/dev/null ||
  fail "a pipe with a given vocabulary did not encode"
cmp -s "$kWork/piped.bin" "$kWork/data.bin" || fail "the piped corpus encoded to other tokens than the file"
# JSONL was known by the input's name alone: a JSONL pipe (<(zcat corpus.jsonl.gz)) was tokenized as text, braces
# and keys included. --input-format jsonl reads it as the .jsonl file.
python3 -c "import json, sys; [print(json.dumps({'text': d})) for d in open(sys.argv[1]).read().split('\n\n')]" \
  "$kWork/corpus.txt" >"$kWork/corpus.jsonl"
tokenizer=(--vocab-file "$kWork/data.vocab.json" --merge-file "$kWork/data.merges.txt" --quiet)
"$kPrep" --input "$kWork/corpus.jsonl" --output-prefix "$kWork/from-file" "${tokenizer[@]}" >/dev/null
cat "$kWork/corpus.jsonl" | "$kPrep" --input /dev/stdin --input-format jsonl --output-prefix "$kWork/from-pipe" \
  "${tokenizer[@]}" >/dev/null
cmp -s "$kWork/from-pipe.bin" "$kWork/from-file.bin" && cmp -s "$kWork/from-pipe.idx" "$kWork/from-file.idx" ||
  fail "a JSONL pipe with --input-format jsonl encoded to other tokens than the .jsonl file"
cat "$kWork/corpus.jsonl" | "$kPrep" --input /dev/stdin --output-prefix "$kWork/as-text" "${tokenizer[@]}" >/dev/null
! cmp -s "$kWork/as-text.bin" "$kWork/from-file.bin" || fail "auto read a nameless pipe as JSONL"
expect_exit 2 "--input-format: xml not in \\{auto,text,jsonl\\}" \
  "$kPrep" --input "$kWork/corpus.jsonl" --input-format xml --output-prefix "$kWork/x" "${tokenizer[@]}"
echo "ok: srunway-prep reads a JSONL pipe with --input-format jsonl as the .jsonl file"
# SIGKILL (a time limit's last word after SIGTERM) runs no handler: the temporary stayed for good, hidden, as large as
# what was written. The next srunway-prep of the same output on this host removes it, its process being gone. The
# input is a FIFO held open, so the temporary exists when the kill comes.
mkfifo "$kWork/slow"
"$kPrep" --input /dev/stdin --output-prefix "$kWork/killed" "${tokenizer[@]}" <"$kWork/slow" >/dev/null 2>&1 &
pid=$!
exec {writer}>"$kWork/slow"
cat "$kWork/corpus.txt" >&"$writer"
for _ in $(seq 1 100); do compgen -G "$kWork/.killed.bin.tmp.*" >/dev/null && break; sleep 0.1; done
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
exec {writer}>&-
left=$(compgen -G "$kWork/.killed.bin.tmp.*") || fail "srunway-prep killed midway left no temporary to test with"
"$kPrep" --input "$kWork/corpus.txt" --output-prefix "$kWork/killed" "${tokenizer[@]}" >/dev/null 2>"$kWork/err" ||
  fail "srunway-prep after a killed one: $(cat "$kWork/err")"
grep -q "info: removed $left (.*): left by process $pid on this host, which died while writing $kWork/killed.bin" \
  "$kWork/err" || fail "no removal said: $(cat "$kWork/err")"
[[ -z $(compgen -G "$kWork/.killed*") ]] || fail "left: $(compgen -G "$kWork/.killed*")"
echo "ok: a temporary that a SIGKILLed srunway-prep left is removed by the next one"
python3 -c "import sys; sys.stdout.write('\n\n'.join(['alpha beta gamma', 'delta alpha beta'] * 10000))" >"$kWork/many.txt"
if unshare -m true 2>/dev/null; then
  mkdir "$kWork/tmpfs"
  rc=0
  listing=$(unshare -m bash -c 'mount -t tmpfs -o size=500k tmpfs "$1" || exit 99
    "$2" --input "$3" --output-prefix "$1/set" --train-vocab 300 --quiet >/dev/null || exit 98
    before=$(cd "$1" && md5sum set.*)
    "$2" --input "$4" --output-prefix "$1/set" --train-vocab 300 --quiet >/dev/null 2>"$1/err" && exit 97
    cat "$1/err" >&2
    [[ $(cd "$1" && md5sum set.*) == "$before" ]] || { ls -la "$1" >&2; exit 96; }
    ls -A "$1"' - "$kWork/tmpfs" "$kPrep" "$kWork/plain.txt" "$kWork/many.txt" 2>"$kWork/err") || rc=$?
  if [[ $rc == 99 ]]; then
    echo "skipped: no tmpfs can be mounted here for srunway-prep's full disk"
  else
    [[ $rc == 0 ]] || fail "srunway-prep on a full disk: step $rc: $(cat "$kWork/err")"
    grep -q "error: write $kWork/tmpfs/.set.idx.tmp.*: No space left on device" "$kWork/err" || fail "$(cat "$kWork/err")"
    [[ $listing == $'err\nset.bin\nset.idx\nset.merges.txt\nset.vocab.json' ]] || fail "left on the full disk: $listing"
    echo "ok: srunway-prep on a full disk leaves the earlier dataset and tokenizer as they were, and no temporaries"
  fi
else
  echo "skipped: no mount namespace here for srunway-prep's full disk"
fi
rm -f "$kWork/many.txt"
run=("$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --train-steps 20 --lr 3e-3 --warmup-steps 4
     --global-batch-size 4 --log-interval 1)
"${run[@]}" --metrics-file "$kWork/straight.jsonl" >/dev/null 2>>"$kWork/log"
"${run[@]}" --save "$kWork/ckpt" --save-interval 10 --train-steps 20 --metrics-file "$kWork/first.jsonl" >/dev/null 2>>"$kWork/log"
[[ -f $kWork/ckpt/iter_0000010/manifest.json && $(cat "$kWork/ckpt/latest_checkpointed_iteration.txt") == 20 ]] \
  || fail "checkpoints at steps 10 and 20 expected: $(ls "$kWork/ckpt")"
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --metrics-file "$kWork/resumed.jsonl" >/dev/null 2>"$kWork/resumed.err"
! grep -q "warning" "$kWork/resumed.err" || fail "the same run resumed: $(cat "$kWork/resumed.err")"
# The step and loss of each line of metrics file $1 that has one; for a file missing or without any, one line
# naming it, so that two such files never compare equal (an empty list did).
losses() {
  python3 - "$1" <<'PY'
import json, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1]) if 'loss' in l]
except OSError:
    rows = []
for row in rows:
    print(row['step'], repr(row['loss']))
if not rows:
    print(f"no losses in {sys.argv[1]}")
PY
}
# Whether metrics files $1 and $2 both have losses and they differ (fails the test if either has none: a file
# with none is no difference).
losses_differ() {
  local mine theirs
  mine=$(losses "$1") && theirs=$(losses "$2") || fail "cannot read the losses of $1 or $2"
  [[ $mine != "no losses in "* && $theirs != "no losses in "* ]] || fail "no losses to compare: $mine / $theirs"
  [[ $mine != "$theirs" ]]
}
diff <(losses "$kWork/straight.jsonl" | tail -n 10) <(losses "$kWork/resumed.jsonl") \
  || fail "resumed losses differ from the uninterrupted run"
[[ $(losses "$kWork/resumed.jsonl" | wc -l) == 10 ]] || fail "the resumed run should do steps 11-20"
echo "ok: save -> load -> continue reproduces steps 11-20 bit for bit"
# Resumed into the same --metrics-file (a requeued job): the earlier run's lines after the checkpoint it resumes
# from (steps 11-20 of first.jsonl) are dropped, as TensorBoard's purge_step does; they stayed, and steps 11-20
# were in the file twice. A line that is not a step's stays.
cp "$kWork/first.jsonl" "$kWork/requeued.jsonl"
echo '{"note": "mine"}' >>"$kWork/requeued.jsonl"
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --metrics-file "$kWork/requeued.jsonl" >/dev/null 2>"$kWork/err" ||
  fail "$(cat "$kWork/err")"
grep -q "info: --metrics-file $kWork/requeued.jsonl: dropped 10 lines of steps after 10, where this run resumes" \
  "$kWork/err" || fail "$(cat "$kWork/err")"
diff <(losses "$kWork/straight.jsonl") <(losses "$kWork/requeued.jsonl") ||
  fail "a requeued run's metrics are not one line per step"
grep -q '"note": "mine"' "$kWork/requeued.jsonl" || fail "a line without a step was dropped"
# A run resumed at or past --train-steps (a finished job requeued) said only "resumed"; one of another sequence
# length continued silently with other samples.
"${run[@]}" --load "$kWork/ckpt" >"$kWork/out" 2>"$kWork/err" || fail "resuming a finished run: $(cat "$kWork/err")"
grep -q "info: already at step 20 of --train-steps 20: nothing left to train" "$kWork/err" || fail "$(cat "$kWork/err")"
grep -q '^step' "$kWork/out" && fail "a finished run trained again: $(cat "$kWork/out")"
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --train-steps 11 --seq-length 16 >/dev/null 2>"$kWork/err" ||
  fail "$(cat "$kWork/err")"
grep -q "warning: $kWork/ckpt/iter_0000010 was written with sequence length 32, this run uses 16: the data order continues by samples" \
  "$kWork/err" || fail "$(cat "$kWork/err")"
# Other data or seed, and a run over other epochs of the data (whose sample order is another), resumed without a
# word.
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --seed 99 >/dev/null 2>"$kWork/err" ||
  fail "$(cat "$kWork/err")"
grep -q "warning: $kWork/ckpt/iter_0000010: this run's data (--data-path, --mock-data, --split or --seed) gives other samples from sample 40 on than the run that saved it" \
  "$kWork/err" || fail "resumed with another --seed: $(cat "$kWork/err")"
# A run of fewer (or more) steps over the same epochs of the data draws the same samples: nothing to say (its order
# was a shuffle of the run's own samples, so every other --train-steps drew others). One over more epochs does not.
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --train-steps 11 >/dev/null 2>"$kWork/err" || fail "$(cat "$kWork/err")"
grep -q "warning" "$kWork/err" && fail "resumed with fewer --train-steps over the same epochs: $(cat "$kWork/err")"
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --train-steps 11 --global-batch-size 400 >/dev/null 2>"$kWork/err" ||
  fail "$(cat "$kWork/err")"
grep -q "warning: $kWork/ckpt/iter_0000010 was written by a run of 80 samples, this one draws 4400 over another number of epochs of its data, whose samples are shuffled together (as Megatron's): from sample 40 on the order is another, some samples seen again" \
  "$kWork/err" || fail "resumed over more epochs: $(cat "$kWork/err")"

# --finetune (Megatron's): the parameters of the checkpoint and nothing else. With the first batch every step and a
# constant lr, its first loss is the resumed run's step 11 bit for bit, its second is not (fresh AdamW moments), and
# its steps count from 1; requeued after a save, the job resumes its own checkpoint instead of starting over.
tune=("${run[@]}" --overfit-batch --lr-decay-style constant --warmup-steps 0)
"${tune[@]}" --load "$kWork/ckpt/iter_0000010" --train-steps 12 --metrics-file "$kWork/tune-resumed.jsonl" \
  >/dev/null 2>>"$kWork/log" || fail "resuming with --overfit-batch"
# Megatron's scripts often add --no-load-optim --no-load-rng, what --finetune does anyway.
"${tune[@]}" --load "$kWork/ckpt/iter_0000010" --finetune --save "$kWork/tuned" --train-steps 2 \
  --no-load-optim --no-load-rng \
  --metrics-file "$kWork/tuned.jsonl" >/dev/null 2>"$kWork/err" || fail "--finetune: $(cat "$kWork/err")"
grep -q "info: fine-tuning from $kWork/ckpt/iter_0000010 (saved at step 10): its parameters" "$kWork/err" ||
  fail "--finetune: $(cat "$kWork/err")"
python3 - "$kWork/tune-resumed.jsonl" "$kWork/tuned.jsonl" <<'PY' ||
import json, sys
resumed, tuned = ([json.loads(l) for l in open(p) if '"loss"' in l] for p in sys.argv[1:3])
assert [r["step"] for r in tuned] == [1, 2], tuned
assert tuned[0]["loss"] == resumed[0]["loss"], ("parameters", tuned[0], resumed[0])
assert tuned[1]["loss"] != resumed[1]["loss"], ("the optimizer state came too", tuned[1], resumed[1])
PY
  fail "--finetune did not start from the parameters alone"
"${tune[@]}" --load "$kWork/ckpt/iter_0000010" --finetune --save "$kWork/tuned" --train-steps 3 >"$kWork/out" \
  2>"$kWork/err" || fail "--finetune requeued: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/tuned at step 2" "$kWork/err" && ! grep -q "fine-tuning" "$kWork/err" ||
  fail "--finetune requeued did not resume its own checkpoint: $(cat "$kWork/err")"
[[ $(grep -c '^step' "$kWork/out") == 1 ]] || fail "--finetune requeued: $(cat "$kWork/out")"
# --save holding --load: the requeued job would resume the checkpoint it was to start from.
expect_exit 2 "--finetune --load $kWork/ckpt/ is in the --save directory" \
  "${tune[@]}" --finetune --load "$kWork/ckpt/" --save "$kWork/ckpt"
expect_exit 2 "--finetune --load $kWork/ckpt/iter_0000010 is in the --save directory" \
  "${tune[@]}" --finetune --load "$kWork/ckpt/iter_0000010" --save "$kWork/./ckpt"
expect_exit 2 "--finetune requires --load" "${tune[@]}" --finetune
mkdir "$kWork/empty"
expect_exit 1 "error: --finetune: $kWork/empty: no checkpoint yet" "${tune[@]}" --finetune --load "$kWork/empty"
# Megatron's --exit-on-missing-checkpoint: a --load with no checkpoint ends the run (it started from scratch).
expect_exit 1 "error: --load $kWork/empty: no checkpoint there, and --exit-on-missing-checkpoint" \
  "${tune[@]}" --load "$kWork/empty" --save "$kWork/empty" --exit-on-missing-checkpoint
grep -q '^step' "$kWork/out" && fail "--exit-on-missing-checkpoint trained: $(cat "$kWork/out")"
echo "ok: --finetune starts from a checkpoint's parameters alone and resumes its own checkpoints when requeued"

# Megatron's --pretrained-checkpoint: where --load has nothing to resume (a job's first run), --finetune from it;
# requeued after a save, the job resumes its own. --ckpt-step: that step's checkpoint, not the newest (20 here).
"${tune[@]}" --pretrained-checkpoint "$kWork/ckpt" --ckpt-step 10 --load "$kWork/pretrained" \
  --save "$kWork/pretrained" --train-steps 2 --metrics-file "$kWork/pretrained.jsonl" >/dev/null 2>"$kWork/err" ||
  fail "--pretrained-checkpoint: $(cat "$kWork/err")"
grep -q "info: --load $kWork/pretrained holds no checkpoint yet: fine-tuning from --pretrained-checkpoint $kWork/ckpt" \
  "$kWork/err" && grep -q "info: fine-tuning from $kWork/ckpt/iter_0000010 (saved at step 10): .*(--pretrained-checkpoint)" \
  "$kWork/err" || fail "--pretrained-checkpoint: $(cat "$kWork/err")"
diff <(losses "$kWork/tuned.jsonl") <(losses "$kWork/pretrained.jsonl") ||
  fail "--pretrained-checkpoint --ckpt-step 10 is not --finetune --load ckpt/iter_0000010"
"${tune[@]}" --pretrained-checkpoint "$kWork/ckpt" --ckpt-step 10 --load "$kWork/pretrained" \
  --save "$kWork/pretrained" --train-steps 3 >"$kWork/out" 2>"$kWork/err" ||
  fail "--pretrained-checkpoint requeued: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/pretrained at step 2" "$kWork/err" && ! grep -q "fine-tuning" "$kWork/err" ||
  fail "--pretrained-checkpoint requeued did not resume its own checkpoint: $(cat "$kWork/err")"
# --ckpt-step resumes that step in full (the straight run's steps 11 and 12, cut there by --exit-interval: exit 4),
# with a warning where the directory holds later steps. Its saves say where it went back to, so the job requeued
# with the same flags resumes its step 12 and trains on (the straight run's steps 13 to 20), not back to 10 again.
cp -r "$kWork/ckpt" "$kWork/rewound"
rewind=("${run[@]}" --load "$kWork/rewound" --save "$kWork/rewound" --ckpt-step 10 --exit-interval 12
        --metrics-file "$kWork/rewound.jsonl")
rc=0
"${rewind[@]}" >/dev/null 2>"$kWork/err" || rc=$?
[[ $rc == 4 ]] || fail "--ckpt-step: exit $rc: $(cat "$kWork/err")"
grep -q "warning: --ckpt-step 10: $kWork/rewound holds checkpoints up to step 20; going back to step 10 as asked" \
  "$kWork/err" && grep -q "info: resumed from $kWork/rewound/iter_0000010 at step 10" "$kWork/err" ||
  fail "--ckpt-step: $(cat "$kWork/err")"
diff <(losses "$kWork/first.jsonl" | sed -n 11,12p) <(losses "$kWork/rewound.jsonl") ||
  fail "--ckpt-step 10 did not resume step 10's checkpoint"
"${rewind[@]}" >/dev/null 2>"$kWork/err" || fail "--ckpt-step requeued: $(cat "$kWork/err")"
grep -q "info: --ckpt-step 10: $kWork/rewound's newest checkpoint, step 12, is of this run after it went back to step 10 (a requeued job): resuming it" \
  "$kWork/err" && grep -q "info: resumed from $kWork/rewound at step 12" "$kWork/err" ||
  fail "--ckpt-step requeued: $(cat "$kWork/err")"
diff <(losses "$kWork/first.jsonl" | sed -n 11,20p) <(losses "$kWork/rewound.jsonl") ||
  fail "--ckpt-step requeued did not go on from its own step 12"
expect_exit 1 "error: --ckpt-step 7: $kWork/ckpt holds no complete checkpoint of step 7 \(complete: step 10, 20\)" \
  "${run[@]}" --load "$kWork/ckpt" --ckpt-step 7
expect_exit 2 "error: --ckpt-step 10: $kWork/ckpt/iter_0000020 is not a run's directory" \
  "${run[@]}" --load "$kWork/ckpt/iter_0000020" --ckpt-step 10
expect_exit 2 "--ckpt-step needs --load or --pretrained-checkpoint" "${run[@]}" --ckpt-step 10
expect_exit 1 "error: --pretrained-checkpoint: $kWork/empty: no checkpoint yet" \
  "${tune[@]}" --pretrained-checkpoint "$kWork/empty"
expect_exit 2 "--pretrained-checkpoint $kWork/ckpt/iter_0000010 is in the --save directory" \
  "${tune[@]}" --pretrained-checkpoint "$kWork/ckpt/iter_0000010" --save "$kWork/ckpt"
echo "ok: --pretrained-checkpoint fine-tunes where --load has no checkpoint; --ckpt-step loads the step asked for"

# Megatron's --iterations-to-skip N: the step after N steps (logged as N+1) passes over its samples untrained, and
# the schedule does not count it. With the first batch every step and a linear decay over fixed steps, a run that
# skips step 2 trains steps 3 and 4 as a run without the skip trains steps 2 and 3 (loss, lr and gradient norm bit
# for bit); its checkpoint keeps the count, so the resumed step 5 is the other's step 4.
skipping=("${run[@]}" --overfit-batch --lr-decay-style linear --lr-decay-iters 20 --warmup-steps 2)
"${skipping[@]}" --train-steps 4 --metrics-file "$kWork/unskipped.jsonl" >/dev/null 2>>"$kWork/log"
"${skipping[@]}" --train-steps 4 --iterations-to-skip 1 30 --save "$kWork/skipped" --metrics-file \
  "$kWork/skipped.jsonl" >/dev/null 2>"$kWork/err" || fail "--iterations-to-skip: $(cat "$kWork/err")"
grep -q "info: step 2 skipped (--iterations-to-skip 1): samples 4 to 7 passed over untrained" "$kWork/err" ||
  fail "--iterations-to-skip: $(cat "$kWork/err")"
"${skipping[@]}" --train-steps 5 --iterations-to-skip 1 --load "$kWork/skipped" --save "$kWork/skipped" \
  --metrics-file "$kWork/skipped.jsonl" >/dev/null 2>"$kWork/err" || fail "--iterations-to-skip: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/skipped at step 4 (16 samples consumed" "$kWork/err" ||
  fail "--iterations-to-skip resumed: $(cat "$kWork/err")"
python3 - "$kWork/unskipped.jsonl" "$kWork/skipped.jsonl" <<'PY' ||
import json, sys
plain, skipped = ({r["step"]: r for r in map(json.loads, open(p)) if "loss" in r} for p in sys.argv[1:3])
assert sorted(skipped) == [1, 3, 4, 5], sorted(skipped)
for mine, theirs in ((1, 1), (3, 2), (4, 3), (5, 4)):
    for key in ("loss", "lr", "grad_norm"):
        assert skipped[mine][key] == plain[theirs][key], (key, mine, skipped[mine], theirs, plain[theirs])
PY
  fail "--iterations-to-skip did not pass over step 2 alone"
echo "ok: --iterations-to-skip passes over a step's samples, and the schedule and a resume do not count it"

# --no-load-optim without --finetune (Megatron's): the checkpoint's step, data position and schedule, with AdamW's
# moments at zero and its bias correction counting from its first step again. With the first batch every step and
# a constant lr, that is --finetune's AdamW from the same parameters: steps 11 and 12 are --finetune's steps 1 and
# 2 bit for bit (with the moments loaded, or the count at 11, step 12 is another). Requeued after its save at step
# 12, the job resumes its own checkpoint whole, AdamW's count going on from 2: step 14 is that of the run that went
# on without a stop. --no-load-rng leaves the random state, which drew the initial parameters and nothing since.
"${tune[@]}" --load "$kWork/ckpt/iter_0000010" --no-load-optim --no-load-rng --save "$kWork/fresh" --train-steps 12 \
  --metrics-file "$kWork/fresh.jsonl" >/dev/null 2>"$kWork/err" || fail "--no-load-optim: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/ckpt/iter_0000010 at step 10 (.*); AdamW's moments start afresh (--no-load-optim)$" \
  "$kWork/err" || fail "--no-load-optim: $(cat "$kWork/err")"
"${tune[@]}" --load "$kWork/ckpt/iter_0000010" --no-load-optim --save "$kWork/fresh" --train-steps 14 \
  --metrics-file "$kWork/fresh.jsonl" >/dev/null 2>"$kWork/err" || fail "--no-load-optim requeued: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/fresh at step 12 (.*read in [0-9.]* s)$" "$kWork/err" ||
  fail "--no-load-optim requeued did not resume its own checkpoint whole: $(cat "$kWork/err")"
"${tune[@]}" --load "$kWork/ckpt/iter_0000010" --no-load-optim --train-steps 14 \
  --metrics-file "$kWork/fresh-whole.jsonl" >/dev/null 2>"$kWork/err" || fail "--no-load-optim: $(cat "$kWork/err")"
python3 - "$kWork/tuned.jsonl" "$kWork/fresh.jsonl" "$kWork/fresh-whole.jsonl" "$kWork/tune-resumed.jsonl" <<'PY' ||
import json, sys
tuned, fresh, whole, resumed = ({r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r}
                                for p in sys.argv[1:5])
assert list(fresh) == [11, 12, 13, 14], fresh
assert [fresh[11], fresh[12]] == [tuned[1], tuned[2]], ("not --finetune's AdamW", fresh, tuned)
assert fresh[12] != resumed[12], ("the moments came too", fresh, resumed)
assert fresh == whole, ("AdamW's count across the requeue", fresh, whole)
PY
  fail "--no-load-optim did not resume with AdamW afresh"
expect_exit 2 "--no-load-optim --load $kWork/ckpt/ is in the --save directory" \
  "${tune[@]}" --no-load-optim --load "$kWork/ckpt/" --save "$kWork/ckpt"
# A pasted script that always passes them, without --load, trains from scratch.
"${tune[@]}" --no-load-optim --no-load-rng --train-steps 1 >/dev/null 2>"$kWork/err" ||
  fail "--no-load-optim without --load: $(cat "$kWork/err")"
echo "ok: --no-load-optim resumes with AdamW afresh, and its requeued job resumes its own checkpoint whole"

# --no-save-optim and --no-save-rng (Megatron's): checkpoints of the parameters alone, a third of the bytes, without
# the random state. A resume from one needs --no-load-optim (one line naming it, exit 1, otherwise); with it, steps
# 11-12 are --no-load-optim's from the full checkpoint of the same run bit for bit. A job that saves so and is
# requeued (--load DIR --save DIR) resumes its own checkpoint with the moments afresh, which is all it kept.
rc=0
"${run[@]}" --save "$kWork/lean" --save-interval 10 --train-steps 20 --exit-interval 10 --no-save-optim \
  --no-save-rng >/dev/null 2>"$kWork/err" || rc=$?
[[ $rc == 4 ]] || fail "--no-save-optim: exit $rc: $(cat "$kWork/err")"
lean_shard=$(echo "$kWork"/lean/iter_0000010/shard_*.ckpt)
full_shard=$(echo "$kWork"/ckpt/iter_0000010/shard_*.ckpt)
(($(stat -c %s "$lean_shard") * 5 < $(stat -c %s "$full_shard") * 2)) ||
  fail "--no-save-optim: $(stat -c %s "$lean_shard") bytes, the full checkpoint $(stat -c %s "$full_shard")"
grep -q '"rng"' "$full_shard" && ! grep -q '"rng"' "$lean_shard" || fail "--no-save-rng saved the random state"
expect_exit 1 "error: $lean_shard: saved without optimizer state \(--no-save-optim\): resume from it with --no-load-optim" \
  "${tune[@]}" --load "$kWork/lean/iter_0000010" --train-steps 12
"${tune[@]}" --load "$kWork/lean/iter_0000010" --no-load-optim --train-steps 12 --metrics-file "$kWork/lean.jsonl" \
  >/dev/null 2>"$kWork/err" || fail "--no-load-optim from --no-save-optim: $(cat "$kWork/err")"
diff <(losses "$kWork/fresh.jsonl" | sed -n 1,2p) <(losses "$kWork/lean.jsonl") ||
  fail "--no-load-optim from a --no-save-optim checkpoint is not --no-load-optim from the full one"
"${tune[@]}" --load "$kWork/lean" --save "$kWork/lean" --train-steps 12 --no-save-optim >/dev/null 2>"$kWork/err" ||
  fail "--no-save-optim requeued: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/lean at step 10 (.*); AdamW's moments start afresh (saved with --no-save-optim)$" \
  "$kWork/err" || fail "--no-save-optim requeued: $(cat "$kWork/err")"
echo "ok: --no-save-optim saves the parameters alone, which resume with --no-load-optim or a requeue"

# --log-progress (Megatron's): each job appends "Starting job" to --save's progress.txt, and after each checkpoint
# the iteration, its throughputs, the floating-point operations by Megatron's count (gpt-tiny at 32 tokens: 811,008
# a token, 4 x 32 tokens a step) and the tokens. A requeued job goes on from its checkpoint's count; so does one
# from a checkpoint saved before the count was kept (the key renamed here), from the samples consumed. A
# progress.txt that cannot be written is one warning, and the run trains on.
rc=0
SLURM_JOB_ID=41 "${run[@]}" --save "$kWork/progress" --save-interval 5 --train-steps 10 --exit-interval 5 \
  --log-progress >/dev/null 2>"$kWork/err" || rc=$?
[[ $rc == 4 ]] || fail "--log-progress: exit $rc: $(cat "$kWork/err")"
cp -r "$kWork/progress" "$kWork/progress-old"
python3 - "$kWork/progress-old"/iter_0000005/shard_*.ckpt <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
assert data.count(b'"floating_point_operations"') == 1
open(sys.argv[1], "wb").write(data.replace(b'"floating_point_operations"', b'"floating_point_operationz"'))
PY
for dir in progress progress-old; do
  SLURM_JOB_ID=42 "${run[@]}" --load "$kWork/$dir" --save "$kWork/$dir" --save-interval 5 --train-steps 10 \
    --log-progress >/dev/null 2>"$kWork/err" || fail "--log-progress requeued ($dir): $(cat "$kWork/err")"
  python3 - "$kWork/$dir/progress.txt" <<'PY' || fail "$dir/progress.txt: $(cat "$kWork/$dir/progress.txt")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
def saved(step):
    return (rf"{stamp}\tJob ID: 4[12]\t# GPUs: 1\tSaved checkpoint\tIteration: {step}\t"
            rf"Job throughput: \d+\.\d TFLOP/s/GPU\tCumulative throughput: \d+\.\d TFLOP/s/GPU\t"
            rf"Floating-point operations: {re.escape(f'{step * 4 * 32 * 811008:.2e}')}\tTokens \(in billions\): 0\.00")
want = [rf"{stamp}\tJob ID: 41\t# GPUs: 1\tStarting job", saved(5),
        rf"{stamp}\tJob ID: 42\t# GPUs: 1\tStarting job", saved(10)]
assert len(lines) == len(want), lines
for line, pattern in zip(lines, want):
    assert re.fullmatch(pattern, line), (line, pattern)
PY
done
mkdir "$kWork/unwritten" "$kWork/unwritten/progress.txt"
"${run[@]}" --save "$kWork/unwritten" --save-interval 5 --train-steps 5 --log-progress >/dev/null 2>"$kWork/err" ||
  fail "--log-progress unwritable: $(cat "$kWork/err")"
grep -q "warning: --log-progress: open $kWork/unwritten/progress.txt: Is a directory; training goes on$" \
  "$kWork/err" || fail "--log-progress unwritable: $(cat "$kWork/err")"
[[ $(cat "$kWork/unwritten/latest_checkpointed_iteration.txt") == 5 ]] || fail "--log-progress unwritable: not saved"
mkdir "$kWork/garbled"
echo "not a progress line" >"$kWork/garbled/progress.txt"
"${run[@]}" --save "$kWork/garbled" --save-interval 5 --train-steps 5 --log-progress >/dev/null 2>"$kWork/err" ||
  fail "--log-progress garbled: $(cat "$kWork/err")"
grep -q "warning: --log-progress: $kWork/garbled/progress.txt: line 1: fewer than 4 tab-separated fields (\`not a progress line\`); the cumulative throughput is this job's$" \
  "$kWork/err" || fail "--log-progress garbled: $(cat "$kWork/err")"
[[ $(grep -c "Saved checkpoint" "$kWork/garbled/progress.txt") == 1 ]] || fail "--log-progress garbled: no line"
echo "ok: --log-progress writes Megatron's progress.txt, counting on across requeues"

# Megatron's non-persistent checkpoints (--non-persistent-ckpt-type global): every 3 steps that are no other save,
# in --save/non_persistent, which keeps only the newest. A job killed after step 7 (--save's newest then step 4:
# its step 8 removed and the pointer set back, as the kill would have left them) resumes from the non-persistent
# step 6, and trains steps 7-8 as the job that was not killed did, bit for bit. With --save's checkpoint the newer
# again (step 8), a resume takes that one. Megatron's other kinds (local, in_memory) are refused by name.
np_flags=(--save-interval 4 --non-persistent-save-interval 3 --non-persistent-ckpt-type global)
"${run[@]}" --save "$kWork/np" --train-steps 8 "${np_flags[@]}" --metrics-file "$kWork/np-first.jsonl" \
  >/dev/null 2>"$kWork/err" || fail "non-persistent: $(cat "$kWork/err")"
[[ $(ls "$kWork/np/non_persistent" | grep '^iter_') == iter_0000006 ]] ||
  fail "non-persistent: $(ls "$kWork/np/non_persistent")"
grep -q "info: saved checkpoint $kWork/np/non_persistent/iter_0000006 (non-persistent, 1 shard in" "$kWork/err" &&
  grep -q "info: deleted checkpoint $kWork/np/non_persistent/iter_0000003 (non-persistent: the newest kept)" \
    "$kWork/err" || fail "non-persistent: $(cat "$kWork/err")"
rm -r "$kWork/np/iter_0000008"
echo 4 >"$kWork/np/latest_checkpointed_iteration.txt"
"${run[@]}" --load "$kWork/np" --save "$kWork/np" --train-steps 8 "${np_flags[@]}" \
  --metrics-file "$kWork/np-resumed.jsonl" >/dev/null 2>"$kWork/err" || fail "non-persistent: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/np/non_persistent at step 6 " "$kWork/err" || fail "non-persistent: $(cat "$kWork/err")"
diff <(losses "$kWork/np-first.jsonl" | tail -n 2) <(losses "$kWork/np-resumed.jsonl") ||
  fail "steps 7-8 resumed from the non-persistent checkpoint differ"
"${run[@]}" --load "$kWork/np" --save "$kWork/np" --train-steps 9 "${np_flags[@]}" >/dev/null 2>"$kWork/err" ||
  fail "non-persistent: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/np at step 8 " "$kWork/err" || fail "non-persistent older: $(cat "$kWork/err")"
# A --finetune job requeued before its first persistent save resumes its own non-persistent checkpoint, rather than
# fine-tuning from --load afresh.
ft=(--load "$kWork/ckpt/iter_0000010" --finetune --save "$kWork/np-ft" --train-steps 8 "${np_flags[@]}")
"${run[@]}" "${ft[@]}" >/dev/null 2>"$kWork/err" || fail "non-persistent --finetune: $(cat "$kWork/err")"
rm -r "$kWork/np-ft/iter_0000004" "$kWork/np-ft/iter_0000008" "$kWork/np-ft/latest_checkpointed_iteration.txt"
"${run[@]}" "${ft[@]}" >/dev/null 2>"$kWork/err" || fail "non-persistent --finetune requeued: $(cat "$kWork/err")"
grep -q "info: resumed from $kWork/np-ft/non_persistent at step 6 " "$kWork/err" ||
  fail "non-persistent --finetune requeued: $(cat "$kWork/err")"
expect_exit 2 "--non-persistent-ckpt-type local: srunway-train's non-persistent checkpoints are global ones" \
  "${run[@]}" --save "$kWork/np" --non-persistent-save-interval 3 --non-persistent-ckpt-type local
expect_exit 2 "--non-persistent-save-interval needs --non-persistent-ckpt-type global" \
  "${run[@]}" --save "$kWork/np" --non-persistent-save-interval 3
expect_exit 2 "--non-persistent-save-interval needs --save or --non-persistent-global-ckpt-dir" \
  "${run[@]}" --non-persistent-save-interval 3 --non-persistent-ckpt-type global
# It keeps only its newest: --save's own directory would lose its checkpoints.
expect_exit 2 "--non-persistent-global-ckpt-dir $kWork/np/ is --save's directory: it keeps only its newest checkpoint" \
  "${run[@]}" --save "$kWork/np" --non-persistent-global-ckpt-dir "$kWork/np/" "${np_flags[@]}"
[[ -d $kWork/np/iter_0000008 ]] || fail "--non-persistent-global-ckpt-dir as --save deleted a checkpoint"
echo "ok: non-persistent checkpoints keep the newest, which a killed job resumes from"

# --use-checkpoint-opt_param-scheduler (Megatron's): a resume takes the schedule its checkpoint kept, not the
# flags': from step 10 with another --lr and warmup, steps 11-20 are the uninterrupted run's bit for bit, and one
# line names what differs. It goes with the optimizer state, so --no-load-optim takes the flags'. A checkpoint that
# kept no schedule (the key renamed) is one line, exit 1; with --override-opt_param-scheduler, exit 2.
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --lr 1e-3 --warmup-steps 2 --use-checkpoint-opt_param-scheduler \
  --metrics-file "$kWork/schedule.jsonl" >/dev/null 2>"$kWork/err" || fail "schedule: $(cat "$kWork/err")"
diff <(losses "$kWork/straight.jsonl" | tail -n 10) <(losses "$kWork/schedule.jsonl") ||
  fail "steps 11-20 on the checkpoint's schedule are not the uninterrupted run's"
grep -q "info: the schedule $kWork/ckpt/iter_0000010 kept (--use-checkpoint-opt_param-scheduler): max_lr 0.003 (the flags': 0.001), lr_warmup_steps 4 (the flags': 2)$" \
  "$kWork/err" || fail "schedule: $(cat "$kWork/err")"
"${run[@]}" --load "$kWork/ckpt/iter_0000010" --lr 1e-3 --use-checkpoint-opt_param-scheduler --no-load-optim \
  --train-steps 11 --metrics-file "$kWork/schedule-fresh.jsonl" >/dev/null 2>"$kWork/err" ||
  fail "schedule --no-load-optim: $(cat "$kWork/err")"
python3 -c "import json,sys; lr=[json.loads(l)['lr'] for l in open(sys.argv[1]) if 'loss' in l]; sys.exit(lr[0] > 1.01e-3)" \
  "$kWork/schedule-fresh.jsonl" || fail "--no-load-optim took the checkpoint's schedule: $(cat "$kWork/schedule-fresh.jsonl")"
cp -r "$kWork/ckpt/iter_0000010" "$kWork/unscheduled"
python3 - "$kWork/unscheduled"/shard_*.ckpt <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
assert data.count(b'"opt_param_scheduler"') == 1
open(sys.argv[1], "wb").write(data.replace(b'"opt_param_scheduler"', b'"opt_param_schedulez"'))
PY
expect_exit 1 "error: $kWork/unscheduled was saved without its schedule \(by a srunway-train that kept none\)" \
  "${run[@]}" --load "$kWork/unscheduled" --use-checkpoint-opt_param-scheduler
expect_exit 2 "--override-opt_param-scheduler excludes --use-checkpoint-opt_param-scheduler" \
  "${run[@]}" --load "$kWork/unscheduled" --use-checkpoint-opt_param-scheduler --override-opt_param-scheduler
echo "ok: --use-checkpoint-opt_param-scheduler resumes on the checkpoint's schedule"

# A checkpoint's header with a key missing (edited, or written by something else) is one line, exit 1: its
# NotFound read as "no checkpoint yet", and the run started from scratch and saved over the checkpoints there.
cp -r "$kWork/ckpt" "$kWork/keyless"
python3 - "$kWork/keyless"/iter_0000020/shard_*.ckpt <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
assert data.count(b'"step":20') == 1
open(sys.argv[1], "wb").write(data.replace(b'"step":20', b'"stXp":20'))
PY
expect_exit 1 "error: $kWork/keyless/iter_0000020/shard_00000_of_00001.ckpt: missing key 'step'" \
  "${run[@]}" --load "$kWork/keyless" --save "$kWork/keyless" --train-steps 21
[[ $(cat "$kWork/keyless/latest_checkpointed_iteration.txt") == 20 ]] || fail "a run over a corrupt checkpoint saved"
echo "ok: a checkpoint header without a key is one line, and nothing is saved over it"

# A checkpoint's run settings of another type (an edited header) are one line naming the file and the key; a
# string where a number was threw out of nlohmann's value() (exit 134).
cp -r "$kWork/ckpt/iter_0000010" "$kWork/edited"
python3 - "$kWork/edited"/shard_*.ckpt <<'PY'
import sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    assert data.count(b'"seq_length":32') == 1, path
    open(path, "wb").write(data.replace(b'"seq_length":32', b'"seq_length":{}'))  # as long: the layout stays
PY
expect_exit 1 "error: $kWork/edited: the run's settings: key 'seq_length' has the wrong type \(object\)" \
  "${tune[@]}" --load "$kWork/edited"
echo "ok: a checkpoint whose run settings have another type is one line"

# --skip-train (Megatron's): a checkpoint's validation loss, the one its run measured at that step, bit for bit;
# no step, nothing saved, and its --metrics-file line appended (the run's lines, later steps too, stay).
"$kTrain" "${common[@]}" --mock-data --train-steps 4 --eval-interval 2 --eval-iters 2 --save "$kWork/skip" \
  --save-interval 2 --metrics-file "$kWork/skip.jsonl" >/dev/null 2>>"$kWork/log" || fail "the run to evaluate"
listing=$(ls -R "$kWork/skip")
"$kTrain" "${common[@]}" --mock-data --eval-iters 2 --skip-train --load "$kWork/skip/iter_0000002" \
  --save "$kWork/skip" --metrics-file "$kWork/skip.jsonl" >"$kWork/out" 2>"$kWork/err" ||
  fail "--skip-train: $(cat "$kWork/err")"
[[ $(cat "$kWork/out") == "$(grep -h '^validation at step 2 | loss' "$kWork/out")" && -s $kWork/out ]] ||
  fail "--skip-train printed: $(cat "$kWork/out")"
python3 - "$kWork/skip.jsonl" <<'PY' ||
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
valid = [l for l in lines if "valid_loss" in l]
assert len(lines) == 7 and [l["step"] for l in valid] == [2, 4, 2], lines
assert valid[0] == valid[2] == lines[-1], valid
PY
  fail "--skip-train's validation loss is not the run's: $(cat "$kWork/skip.jsonl")"
[[ $(ls -R "$kWork/skip") == "$listing" ]] || fail "--skip-train changed the checkpoints: $(ls -R "$kWork/skip")"
! grep -q "warning" "$kWork/err" || fail "--skip-train warned: $(cat "$kWork/err")"
expect_exit 2 "--skip-train has nothing to do: --eval-iters 0, and no --export, --export-hf or --sample" \
  "$kTrain" "${common[@]}" --mock-data --eval-iters 0 --skip-train
echo "ok: --skip-train gives a checkpoint's validation loss without training or saving"

# --use-checkpoint-args (Megatron's): the model as the checkpoint was saved with (a 3-layer Llama), not gpt-tiny's.
"$kTrain" --preset llama-tiny --num-layers 3 --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 \
  --save "$kWork/args" >/dev/null 2>>"$kWork/log" || fail "the Llama run to take the model from"
"$kTrain" --use-checkpoint-args --load "$kWork/args" --seq-length 32 --micro-batch-size 2 --mock-data --skip-train \
  --eval-iters 1 >"$kWork/out" 2>"$kWork/err" || fail "--use-checkpoint-args: $(cat "$kWork/err")"
grep -q "info: model llama (3 layers, hidden 64, heads 4/2" "$kWork/err" &&
  grep -q "^validation at step 2" "$kWork/out" ||
  fail "--use-checkpoint-args did not build the checkpoint's model: $(cat "$kWork/err" "$kWork/out")"
expect_exit 2 "--preset excludes --use-checkpoint-args" "$kTrain" --use-checkpoint-args --load "$kWork/args" \
  --preset gpt-tiny --mock-data
expect_exit 1 "error: --use-checkpoint-args: $kWork/empty: no checkpoint yet" "$kTrain" --use-checkpoint-args \
  --load "$kWork/empty" --mock-data
echo "ok: --use-checkpoint-args builds the model its checkpoint was saved with"

# Megatron's other ways to give the schedule: --lr-warmup-fraction of --lr-decay-steps (by default --train-steps),
# and --train-samples (rounded down), --lr-decay-samples and --lr-warmup-samples (rounded) in samples of the global
# batch; each in whole steps.
lrs() {
  "$kTrain" "${common[@]}" --mock-data --global-batch-size 4 --log-interval 1 "$@" 2>/dev/null | grep -o 'lr [^ ]*'
}
[[ $(lrs --train-steps 8 --lr-warmup-fraction 0.25) == "$(lrs --train-steps 8 --warmup-steps 2)" &&
   $(lrs --train-steps 8 --warmup-steps 2) != "$(lrs --train-steps 8)" ]] ||
  fail "--lr-warmup-fraction 0.25 of 8 steps is not 2 warmup steps: $(lrs --train-steps 8 --lr-warmup-fraction 0.25)"
want=$(lrs --train-steps 8 --warmup-steps 1 --lr-decay-steps 4)
[[ $(lrs --train-steps 8 --lr-warmup-fraction 0.25 --lr-decay-steps 4) == "$want" ]] ||
  fail "--lr-warmup-fraction 0.25 of --lr-decay-steps 4 is not 1 warmup step"
want=$(lrs --train-steps 8 --warmup-steps 2 --lr-decay-steps 6)
got=$(lrs --train-samples 34 --lr-warmup-samples 6 --lr-decay-samples 22)
[[ $got == "$want" ]] || fail "34, 6 and 22 samples of 4 are not 8, 2 and 6 steps: $(tr '\n' ' ' <<<"$got")"
expect_exit 2 "--warmup-steps excludes --lr-warmup-fraction" "$kTrain" "${common[@]}" --mock-data \
  --lr-warmup-fraction 0.1 --warmup-steps 3
expect_exit 2 "--lr-warmup-fraction 1.5 is more than the whole decay" "$kTrain" "${common[@]}" --mock-data \
  --lr-warmup-fraction 1.5
expect_exit 2 "--train-steps excludes --train-samples" "$kTrain" "${common[@]}" --mock-data --train-samples 8 \
  --train-steps 3
expect_exit 2 "--train-samples 3 is less than one global batch of 4" "$kTrain" "${common[@]}" --mock-data \
  --train-samples 3 --global-batch-size 4
echo "ok: --lr-warmup-fraction and the schedule in samples give their share of whole steps"

# Megatron's WSD: the rate holds until the last --lr-wsd-decay-iters steps (its values are worked by hand in
# checkpoint_test), which --lr-wsd-decay-samples gives in samples of the global batch; each of its flags without
# it, and it without its final decay, is one line.
wsd=(--train-steps 8 --lr 1e-3 --min-lr 1e-4 --lr-decay-style WSD --lr-wsd-decay-style linear)
got=$(lrs "${wsd[@]}" --lr-wsd-decay-iters 4 | tr '\n' ' ')
[[ $got == "lr 1.000e-03 lr 1.000e-03 lr 1.000e-03 lr 1.000e-03 lr 1.000e-03 lr 7.750e-04 lr 5.500e-04 lr 3.250e-04 " ]] ||
  fail "WSD over the last 4 of 8 steps: $got"
[[ $(lrs "${wsd[@]}" --lr-wsd-decay-samples 15 | tr '\n' ' ') == "$got" ]] || fail "15 samples of 4 are not 4 steps"
expect_exit 2 "--lr-decay-style WSD needs --lr-wsd-decay-iters or --lr-wsd-decay-samples" "$kTrain" "${common[@]}" \
  --mock-data --lr-decay-style WSD
expect_exit 2 "--lr-wsd-decay-iters needs --lr-decay-style WSD" "$kTrain" "${common[@]}" --mock-data \
  --lr-wsd-decay-iters 3
expect_exit 2 "--lr-wsd-decay-iters is 9 steps, more than the decay's 8" "$kTrain" "${common[@]}" --mock-data \
  "${wsd[@]}" --lr-wsd-decay-iters 9
expect_exit 2 "--constant-steps is NeMo's tail after a cosine or linear decay, not --lr-decay-style WSD's" \
  "$kTrain" "${common[@]}" --mock-data "${wsd[@]}" --lr-wsd-decay-iters 2 --constant-steps 2
expect_exit 2 "--lr-wsd-decay-style: 1-sqrt not in" "$kTrain" "${common[@]}" --mock-data "${wsd[@]}" \
  --lr-wsd-decay-iters 2 --lr-wsd-decay-style 1-sqrt
echo "ok: --lr-decay-style WSD holds the rate until its final decay, given in steps or samples"

# Megatron's --decoupled-lr and --decoupled-min-lr: the word embeddings and the untied output layer (Megatron's
# is_embedding_or_output_parameter, not the learned positions) take their own rates along the same schedule. At 0
# they stay as drawn (as every tensor does at --lr 0) while every other tensor trains, wpe included; their rates are
# those of a run whose --lr and --min-lr are theirs, on the log line, in the metrics and in TensorBoard; equal to
# --lr and --min-lr they change nothing, bit for bit; a resume with --use-checkpoint-opt_param-scheduler takes them
# from the checkpoint. Each was an unknown argument.
for preset in gpt-tiny llama-tiny; do
  for run_as in frozen decoupled; do
    "$kTrain" "${common[@]}" --preset "$preset" --mock-data --train-steps 3 \
      $([[ $run_as == frozen ]] && echo --lr 0 --min-lr 0 || echo --lr 1e-2 --decoupled-lr 0) \
      --export "$kWork/$run_as-$preset.safetensors" >/dev/null 2>"$kWork/err" ||
      fail "--decoupled-lr ($preset, $run_as): $(cat "$kWork/err")"
  done
  python3 - "$kWork/frozen-$preset.safetensors" "$kWork/decoupled-$preset.safetensors" <<'PY' ||
import json, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    return {name: data[8 + size + t["data_offsets"][0]:8 + size + t["data_offsets"][1]]
            for name, t in json.loads(data[8:8 + size]).items() if name != "__metadata__"}
drawn, trained = tensors(sys.argv[1]), tensors(sys.argv[2])
assert drawn.keys() == trained.keys()
kept = sorted(name for name in drawn if drawn[name] == trained[name])
want = ["lm_head.weight", "wte"] if "lm_head.weight" in drawn else ["wte"]
assert kept == want, f"unchanged after 3 steps: {kept}, want {want}"
PY
    fail "--decoupled-lr 0 ($preset): the tensors it keeps as drawn are not the word embeddings and the output layer"
done
decoupled=("$kTrain" "${common[@]}" --mock-data --train-steps 6 --warmup-steps 2 --log-interval 1)
rates() { "${decoupled[@]}" "$@" 2>"$kWork/err" | sed -n "s/.* | $kind \([^ ]*\) | .*/\1/p"; }
kind="decoupled lr" got=$(rates --lr 1e-3 --min-lr 1e-4 --decoupled-lr 4e-3 --decoupled-min-lr 2e-4)
kind=lr want=$(rates --lr 4e-3 --min-lr 2e-4)
[[ $got == "$want" && $(wc -l <<<"$got") == 6 ]] ||
  fail "--decoupled-lr 4e-3 --decoupled-min-lr 2e-4: $(tr '\n' ' ' <<<"$got"), want $(tr '\n' ' ' <<<"$want")"
kind="decoupled lr" got=$(rates --lr 1e-3 --min-lr 1e-4 --decoupled-lr 4e-3)
kind=lr want=$(rates --lr 4e-3 --min-lr 1e-4)
[[ $got == "$want" ]] || fail "--decoupled-lr 4e-3 without --decoupled-min-lr ends at --min-lr: $(tr '\n' ' ' <<<"$got")"
"${decoupled[@]}" --lr 1e-3 --min-lr 1e-4 --metrics-file "$kWork/undecoupled.jsonl" >/dev/null 2>"$kWork/err" ||
  fail "$(cat "$kWork/err")"
"${decoupled[@]}" --lr 1e-3 --min-lr 1e-4 --decoupled-lr 1e-3 --decoupled-min-lr 1e-4 --tensorboard-dir "$kWork/tb-dl" \
  --metrics-file "$kWork/same-rates.jsonl" >/dev/null 2>"$kWork/err" || fail "$(cat "$kWork/err")"
diff <(losses "$kWork/undecoupled.jsonl") <(losses "$kWork/same-rates.jsonl") ||
  fail "--decoupled-lr and --decoupled-min-lr equal to --lr and --min-lr changed the losses"
grep -q '"decoupled_lr":0.0010000000474974513,' "$kWork/same-rates.jsonl" || fail "no decoupled_lr in the metrics"
grep -qa "decoupled-learning-rate" "$kWork"/tb-dl/events.* || fail "no decoupled-learning-rate in TensorBoard's events"
"${decoupled[@]}" --lr 1e-3 --decoupled-lr 4e-3 --save "$kWork/dl-ckpt" --save-interval 3 \
  --metrics-file "$kWork/dl-straight.jsonl" >/dev/null 2>"$kWork/err" || fail "$(cat "$kWork/err")"
"${decoupled[@]}" --lr 1e-3 --load "$kWork/dl-ckpt/iter_0000003" --use-checkpoint-opt_param-scheduler \
  --metrics-file "$kWork/dl-resumed.jsonl" >/dev/null 2>"$kWork/err" || fail "$(cat "$kWork/err")"
diff <(losses "$kWork/dl-straight.jsonl" | tail -n 3) <(losses "$kWork/dl-resumed.jsonl") ||
  fail "steps 4-6 resumed on the checkpoint's --decoupled-lr are not the uninterrupted run's"
grep -q "kept (--use-checkpoint-opt_param-scheduler): decoupled_lr 0.004 (the flags': none)$" "$kWork/err" ||
  fail "the checkpoint's --decoupled-lr: $(cat "$kWork/err")"
expect_exit 2 "--decoupled-min-lr requires --decoupled-lr" "${decoupled[@]}" --decoupled-min-lr 1e-4
expect_exit 2 "--decoupled-lr 1e-05 and --min-lr 0.0001 must satisfy 0 <= --min-lr <= --decoupled-lr" \
  "${decoupled[@]}" --min-lr 1e-4 --decoupled-lr 1e-5
echo "ok: --decoupled-lr gives the word embeddings and the output layer their own rates along the schedule"
# Megatron's --lr-warmup-init: the warmup rises from it, for both rates (Megatron's init_lr is every group's); above
# --lr it is one line, as Megatron asserts.
got=$(lrs --train-steps 5 --warmup-steps 4 --lr 1e-3 --lr-warmup-init 2e-4 --decoupled-lr 3e-3 | tr '\n' ' ')
[[ $got == "lr 4.000e-04 lr 9.000e-04 lr 6.000e-04 lr 1.600e-03 lr 8.000e-04 lr 2.300e-03 lr 1.000e-03 lr 3.000e-03 lr 1.000e-03 lr 3.000e-03 " ]] ||
  fail "--lr-warmup-init 2e-4 over 4 steps: $got"
expect_exit 2 "--lr-warmup-init 0.002 and --lr 0.001 must satisfy 0 <= --lr-warmup-init <= --lr" \
  "${decoupled[@]}" --lr 1e-3 --lr-warmup-init 2e-3
echo "ok: --lr-warmup-init starts the warmup from its rate"

# Megatron's --apply-layernorm-1p: the norms' weights stored as their difference from 1, drawn as 0. The same model
# trained the same way (norm weights have no decay): 20 steps of gpt-tiny and llama-tiny take the losses of the run
# without it within fp32's rounding of 1 + w, --export-hf writes the same weights (the norms' whole) and --export
# holds them near 0. A checkpoint keeps it (a resume without it is refused, naming it), and weights exported either
# way, or for Hugging Face, load into either model for the same next step. Each was an unknown argument.
for preset in gpt-tiny llama-tiny; do
  for form in whole 1p; do
    "$kTrain" "${common[@]}" --preset "$preset" --data-path "$kWork/data" --split 1 --train-steps 20 --lr 3e-3 \
      --log-interval 1 $([[ $form == 1p ]] && echo --apply-layernorm-1p) --metrics-file "$kWork/$form-$preset.jsonl" \
      --export "$kWork/$form-$preset.safetensors" --export-hf "$kWork/$form-$preset-hf" \
      --save "$kWork/$form-$preset-ckpt" >/dev/null 2>"$kWork/err" ||
      fail "--apply-layernorm-1p ($preset, $form): $(cat "$kWork/err")"
  done
  python3 - "$kWork" "$preset" <<'PY' || fail "--apply-layernorm-1p ($preset) trained another model"
import array, json, struct, sys
work, preset = sys.argv[1:3]
def tensors(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    return {name: array.array("f", data[8 + size + t["data_offsets"][0]:8 + size + t["data_offsets"][1]])
            for name, t in json.loads(data[8:8 + size]).items() if name != "__metadata__"}
def losses(form):
    return [json.loads(line)["loss"] for line in open(f"{work}/{form}-{preset}.jsonl") if '"loss"' in line]
whole, centred = losses("whole"), losses("1p")
assert len(whole) == len(centred) == 20, (len(whole), len(centred))
gap = max(abs(a - b) for a, b in zip(whole, centred))
assert gap < 1e-4 and whole[-1] < whole[0] - 0.5, (gap, whole[0], whole[-1])
hf = [tensors(f"{work}/{form}-{preset}-hf/model.safetensors") for form in ("whole", "1p")]
assert hf[0].keys() == hf[1].keys()
for name in hf[0]:
    assert max(abs(a - b) for a, b in zip(hf[0][name], hf[1][name])) < 1e-5, name
stored = tensors(f"{work}/1p-{preset}.safetensors")
norms = [name for name in stored if "norm" in name and name.endswith(".weight")]
assert norms and all(abs(sum(stored[name]) / len(stored[name])) < 0.1 for name in norms), norms
PY
done
llama=("$kTrain" "${common[@]}" --preset llama-tiny --data-path "$kWork/data" --split 1 --lr 3e-3 --log-interval 1)
expect_exit 1 "the checkpoint is of another model: apply_layernorm_1p is true in the checkpoint and false here" \
  "${llama[@]}" --train-steps 21 --load "$kWork/1p-llama-tiny-ckpt"
for weights in 1p-llama-tiny.safetensors whole-llama-tiny.safetensors 1p-llama-tiny-hf; do
  for form in whole 1p; do
    "${llama[@]}" --train-steps 1 --load "$kWork/$weights" --finetune $([[ $form == 1p ]] && echo --apply-layernorm-1p) \
      --metrics-file "$kWork/next-$form-$weights.jsonl" >/dev/null 2>"$kWork/err" ||
      fail "--load $weights ($form): $(cat "$kWork/err")"
  done
done
python3 - "$kWork"/next-*.jsonl <<'PY' || fail "weights exported with and without --apply-layernorm-1p load as other models"
import json, sys
first = {path: json.loads(open(path).readline())["loss"] for path in sys.argv[1:]}
assert len(first) == 6 and max(first.values()) - min(first.values()) < 1e-5, first
PY
echo "ok: --apply-layernorm-1p stores the norms' weights less 1 and trains the same model"

# Megatron's --weight-decay-incr-style (its values worked by hand in checkpoint_test): from 0, step 1's update has
# no decay and step 2's a quarter of the end's, so the losses of steps 1 and 2 are those of --weight-decay 0 and
# step 3's is not. Its ends without it, and it without them, are one line.
for name in none linear; do
  "$kTrain" "${common[@]}" --mock-data --train-steps 4 --lr 1e-2 --metrics-file "$kWork/wd-$name.jsonl" \
    $([[ $name == none ]] && echo --weight-decay 0 ||
      echo --weight-decay-incr-style linear --start-weight-decay 0 --end-weight-decay 0.5) >/dev/null 2>"$kWork/err" ||
    fail "weight decay $name: $(cat "$kWork/err")"
done
python3 - "$kWork/wd-none.jsonl" "$kWork/wd-linear.jsonl" <<'PY' || fail "--weight-decay-incr-style linear from 0"
import json, sys
none, linear = ([json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:3])
assert none[:2] == linear[:2] and none[2] != linear[2], (none, linear)
PY
expect_exit 2 "--start-weight-decay needs --weight-decay-incr-style linear or cosine" "$kTrain" "${common[@]}" \
  --mock-data --start-weight-decay 0.1
expect_exit 2 "--weight-decay-incr-style cosine needs --end-weight-decay" "$kTrain" "${common[@]}" --mock-data \
  --weight-decay-incr-style cosine --start-weight-decay 0.1
echo "ok: --weight-decay-incr-style changes the decay over the run"

# --rampup-batch-size (Megatron's): 2 2 12 to a global batch of 8 gives steps of 2, 2, 4, 6, 8, 8, 8 in 40
# samples (Megatron's calculator, worked by hand in checkpoint_test). Each step trains as a step of that batch
# from the same state does: a chain of constant-batch runs, each loading the last one's checkpoint with the next
# batch, gives the ramp's losses and gradient norms bit for bit.
ramp=(--global-batch-size 8 --rampup-batch-size 2 2 12 --train-samples 40 --log-interval 1)
"$kTrain" "${common[@]}" --mock-data "${ramp[@]}" --lr-decay-style constant --metrics-file "$kWork/ramp.jsonl" \
  >"$kWork/out" 2>"$kWork/err" || fail "--rampup-batch-size: $(cat "$kWork/err")"
grep -q "info: the global batch ramps from 2 by 2 to 8 over 12 samples (--rampup-batch-size): 7 steps of 38 samples" \
  "$kWork/err" && grep -q "info: step 3: the global batch ramps up from 2 to 4" "$kWork/err" &&
  grep -q "^step      4/7 | .* | batch 6 |" "$kWork/out" || fail "the ramp's lines: $(cat "$kWork/err" "$kWork/out")"
for batch_steps in 2:2 4:3 6:4 8:7; do
  "$kTrain" "${common[@]}" --mock-data --global-batch-size "${batch_steps%:*}" --train-steps "${batch_steps#*:}" \
    --lr-decay-style constant --log-interval 1 --load "$kWork/chain" --save "$kWork/chain" \
    --metrics-file "$kWork/chain.jsonl" >/dev/null 2>>"$kWork/log" || fail "the chain at batch:steps $batch_steps"
done
python3 - "$kWork/ramp.jsonl" "$kWork/chain.jsonl" <<'PY' ||
import json, sys
ramp, chain = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [l["global_batch_size"] for l in ramp] == [2, 2, 4, 6, 8, 8, 8], ramp
assert [l["global_batch_size"] for l in chain] == [2, 2, 4, 6, 8, 8, 8], chain
for key in "loss", "grad_norm":
    assert [l[key] for l in ramp] == [l[key] for l in chain], (key, ramp, chain)
PY
  fail "the ramp's steps are not those of constant batches: $(cat "$kWork/ramp.jsonl" "$kWork/chain.jsonl")"
# With --train-samples the learning rate counts samples, as Megatron's: a warmup over 6 samples reaches its top in
# step 3 (samples 4 to 8), then the cosine to --min-lr over the 40 samples from the sample each step starts at.
# And a run cut short mid-ramp (--exit-interval 2) and resumed trains the straight run's steps bit for bit.
schedule=(--lr 1e-3 --min-lr 1e-4 --lr-warmup-samples 6)
"$kTrain" "${common[@]}" --mock-data "${ramp[@]}" "${schedule[@]}" --metrics-file "$kWork/ramp_lr.jsonl" \
  >/dev/null 2>>"$kWork/log" || fail "the ramp with a schedule in samples"
rc=4
for _ in 1 2 3 4 5; do
  [[ $rc == 4 ]] || break
  rc=0
  "$kTrain" "${common[@]}" --mock-data "${ramp[@]}" "${schedule[@]}" --exit-interval 2 --load "$kWork/cut" \
    --save "$kWork/cut" --metrics-file "$kWork/cut.jsonl" >/dev/null 2>>"$kWork/log" || rc=$?
done
[[ $rc == 0 ]] || fail "the ramp cut by --exit-interval 2 ended with exit $rc"
python3 - "$kWork/ramp_lr.jsonl" "$kWork/cut.jsonl" <<'PY' ||
import json, math, sys
ramp, cut = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
starts = [0, 2, 4, 8, 14, 22, 30]
want = [1e-3 * 2 / 6, 1e-3 * 4 / 6] + [1e-4 + 0.5 * (1 + math.cos(math.pi * max(0, s - 6) / 34)) * 9e-4
                                       for s in starts[2:]]
assert len(ramp) == 7 and all(abs(l["lr"] - w) <= 1e-6 * w for l, w in zip(ramp, want)), ([l["lr"] for l in ramp], want)
for key in "loss", "grad_norm", "lr", "global_batch_size":
    assert [l[key] for l in ramp] == [l[key] for l in cut], (key, ramp, cut)
PY
  fail "the ramp's learning rates, or its resumed run: $(cat "$kWork/ramp_lr.jsonl" "$kWork/cut.jsonl")"
# With --train-steps (NeMo's way, which counts steps) the steps are given and the schedule counts them.
"$kTrain" "${common[@]}" --mock-data --global-batch-size 8 --rampup-batch-size 2 2 12 --train-steps 5 \
  --warmup-steps 2 >"$kWork/out" 2>"$kWork/err" || fail "the ramp over --train-steps: $(cat "$kWork/err")"
grep -q "5 steps of 22 samples, the learning rate's schedule counted in steps" "$kWork/err" ||
  fail "the ramp over --train-steps: $(cat "$kWork/err")"
expect_exit 2 "error: --warmup-steps counts steps, and --rampup-batch-size with --train-samples counts the schedule in samples" \
  "$kTrain" "${common[@]}" --mock-data "${ramp[@]}" --warmup-steps 2
expect_exit 2 "error: --rampup-batch-size 4 1 12: its batch of 5 is not a multiple of --micro-batch-size 2 x 1 data-parallel rank$" \
  "$kTrain" "${common[@]}" --mock-data --global-batch-size 8 --rampup-batch-size 4 1 12
expect_exit 2 "error: --rampup-batch-size 2 4 12: --global-batch-size 8 is not the start batch plus a whole number of increments" \
  "$kTrain" "${common[@]}" --mock-data --global-batch-size 8 --rampup-batch-size 2 4 12
expect_exit 2 "--rampup-batch-size: At least 3 required but received 2" \
  "$kTrain" "${common[@]}" --mock-data --rampup-batch-size 2 2
echo "ok: --rampup-batch-size ramps the batch as Megatron's, each step as a step of its batch, resumable mid-ramp"

# Megatron's --decrease-batch-size-if-needed: a global batch that does not divide into micro-batches on every rank
# (a job requeued on fewer nodes) trains with the largest multiple below it, said, where it was an error; --dry-run
# plans the same batch.
"$kTrain" "${common[@]}" --mock-data --global-batch-size 5 --decrease-batch-size-if-needed --train-steps 1 \
  --metrics-file "$kWork/decreased.jsonl" >/dev/null 2>"$kWork/err" || fail "--decrease-batch-size-if-needed: $(cat "$kWork/err")"
grep -q "warning: --global-batch-size 5 is not a multiple of --micro-batch-size 2 x 1 data-parallel ranks: training with a global batch of 4 (--decrease-batch-size-if-needed)" \
  "$kWork/err" && grep -q '"global_batch_size":4' "$kWork/decreased.jsonl" ||
  fail "--decrease-batch-size-if-needed: $(cat "$kWork/err" "$kWork/decreased.jsonl")"
expect_exit 2 "error: --global-batch-size 5 is not a multiple of --micro-batch-size 2 x 1 data-parallel rank$" \
  "$kTrain" "${common[@]}" --mock-data --global-batch-size 5
expect_exit 2 "error: --global-batch-size 1 is not a multiple of --micro-batch-size 2" \
  "$kTrain" "${common[@]}" --mock-data --global-batch-size 1 --decrease-batch-size-if-needed
"$kTrain" --preset gpt-tiny --dry-run --nodes 2 --gpus-per-node 4 --micro-batch-size 2 --global-batch-size 40 \
  --decrease-batch-size-if-needed >"$kWork/out" 2>&1 || fail "--dry-run --decrease-batch-size-if-needed: $(cat "$kWork/out")"
grep -q "8 GPUs (2 nodes x 4); micro-batch 2, 2 accumulation steps per GPU, global batch 32" "$kWork/out" ||
  fail "--dry-run --decrease-batch-size-if-needed: $(cat "$kWork/out")"
echo "ok: --decrease-batch-size-if-needed trains the largest global batch the ranks divide, and says so"

# --eod-mask-loss (its losses against PyTorch's are in steps_vs_torch) needs the tokenizer's end-of-document token:
# one line where there is none.
expect_exit 2 "error: --eod-mask-loss needs the tokenizer's end-of-document token: --mock-data has no tokenizer; give --vocab-file and --merge-file" \
  "$kTrain" "${common[@]}" --mock-data --eod-mask-loss
expect_exit 1 "error: --eod-mask-loss needs the tokenizer's end-of-document token: .*$kWork/none.vocab.json" \
  "$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --eod-mask-loss --vocab-file "$kWork/none.vocab.json" \
  --merge-file "$kWork/data.merges.txt"
"$kTrain" "${common[@]}" --mock-data --eod-mask-loss --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt" --train-steps 2 >/dev/null 2>>"$kWork/log" ||
  fail "--eod-mask-loss over --mock-data with --vocab-file"
expect_exit 2 "error: --reset-position-ids and --reset-attention-mask need the tokenizer's end-of-document token: --mock-data has no tokenizer; give --vocab-file and --merge-file" \
  "$kTrain" "${common[@]}" --mock-data --reset-position-ids --reset-attention-mask
expect_exit 1 "error: --reset-attention-mask needs the tokenizer's end-of-document token: .*$kWork/none.vocab.json" \
  "$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --reset-attention-mask \
  --vocab-file "$kWork/none.vocab.json" --merge-file "$kWork/data.merges.txt"
echo "ok: --eod-mask-loss, --reset-position-ids and --reset-attention-mask without a tokenizer are one line"

# 2b. --recompute-activations: the same losses and gradient norms bit for bit (dropout on: the masks recomputed
# must be the ones drawn), in less memory.
for preset in gpt-tiny llama-tiny; do
  for mode in keep recompute; do
    "$kTrain" --preset "$preset" --num-layers 4 --seq-length 32 --micro-batch-size 4 --peak-tflops 1 --mock-data \
      --train-steps 6 --hidden-dropout 0.1 --attention-dropout 0.1 --log-interval 1 \
      $([[ $mode == recompute ]] && echo --recompute-activations) --metrics-file "$kWork/$preset.$mode.jsonl" \
      >/dev/null 2>>"$kWork/log"
  done
  python3 - "$kWork/$preset.keep.jsonl" "$kWork/$preset.recompute.jsonl" <<'PY' || fail "$preset: recomputation changed the results or saved no memory"
import json, sys
keep, again = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert [(r["loss"], r["grad_norm"]) for r in keep] == [(r["loss"], r["grad_norm"]) for r in again], "results differ"
assert again[-1]["peak_memory_gib"] < 0.8 * keep[-1]["peak_memory_gib"], (keep[-1], again[-1])
PY
done
echo "ok: --recompute-activations gives the same results in less memory"

# 3. The same settings from a YAML file; the command line wins over it.
cat >"$kWork/config.yaml" <<YAML
preset: gpt-tiny
seq_length: 32
micro-batch-size: 2
mock-data: true
train-steps: 3
peak-tflops: 1
log-interval: 1
lr: 100.0
YAML
"$kTrain" --config "$kWork/config.yaml" --lr 1e-3 >"$kWork/out" 2>>"$kWork/log"
[[ $(grep -c '^step' "$kWork/out") == 3 ]] || fail "--config: $(cat "$kWork/out")"
grep -q 'lr 1.000e-03' "$kWork/out" || fail "--lr on the command line should win over the config: $(cat "$kWork/out")"
echo "ok: --config YAML"

# stdout and stderr into one pipe: the last validation line comes before the run's closing lines (it came last).
"$kTrain" "${common[@]}" --mock-data --train-steps 4 --eval-interval 2 --eval-iters 1 >"$kWork/both" 2>&1 ||
  fail "--eval-interval: $(cat "$kWork/both")"
valid=$(grep -n '^validation at step 4 ' "$kWork/both" | cut -d: -f1) peak=$(grep -n 'peak memory' "$kWork/both" | cut -d: -f1)
[[ -n $valid && -n $peak ]] && ((valid < peak)) || fail "validation after the closing lines: $(cat "$kWork/both")"
echo "ok: the last validation line before the run's closing lines"
# A stdout that goes away (| head) killed the run by SIGPIPE at its next line (exit 141, no checkpoint); a full one
# lost the lines without a word. One warning each, and the run ends as it would have.
rc=0
"$kTrain" "${common[@]}" --mock-data --train-steps 200 --save "$kWork/piped-ckpt" --metrics-file "$kWork/piped.jsonl" \
  2>"$kWork/piped.err" | head -n 1 >/dev/null || rc=${PIPESTATUS[0]}
[[ $rc == 0 && $(cat "$kWork/piped-ckpt/latest_checkpointed_iteration.txt") == 200 ]] ||
  fail "stdout closed by head: exit $rc, checkpoint $(cat "$kWork/piped-ckpt/latest_checkpointed_iteration.txt")"
grep -q "warning: cannot write to stdout (Broken pipe): no more step lines (--metrics-file $kWork/piped.jsonl has them); training goes on$" \
  "$kWork/piped.err" || fail "stdout closed: $(cat "$kWork/piped.err")"
"$kTrain" "${common[@]}" --mock-data --train-steps 3 >/dev/full 2>"$kWork/full.err" || fail "stdout full: $(cat "$kWork/full.err")"
grep -q "warning: cannot write to stdout (No space left on device): no more step lines; training goes on$" \
  "$kWork/full.err" || fail "stdout full: $(cat "$kWork/full.err")"
echo "ok: a closed or full stdout is one warning, and the run ends with its checkpoint"

# 4. Bad input: one line naming what and where, and the documented exit code.
expect_exit 2 "unknown preset 'gpt5'" "$kTrain" --preset gpt5 --mock-data
expect_exit 2 "--no-such-flag" "$kTrain" --no-such-flag
# The FFN's width follows --hidden-size as Megatron's does (4 H; Llama's SwiGLU 8 H / 3 down to a multiple of 64)
# unless given: --hidden-size 128 over gpt-tiny kept its FFN of 256.
for preset_hidden_ffn in gpt-tiny:128:512 llama-tiny:96:256 llama-tiny:16:42; do
  IFS=: read -r preset hidden want <<<"$preset_hidden_ffn"
  "$kTrain" --preset "$preset" --hidden-size "$hidden" --dry-run >"$kWork/out" 2>&1 || fail "dry run: $(cat "$kWork/out")"
  grep -q "hidden $hidden, heads 4, FFN $want," "$kWork/out" || fail "$preset with --hidden-size $hidden: $(head -1 "$kWork/out")"
done
"$kTrain" --preset llama-tiny --hidden-size 96 --ffn-hidden-size 300 --dry-run >"$kWork/out" 2>&1
grep -q "hidden 96, heads 4, FFN 300," "$kWork/out" || fail "--ffn-hidden-size 300: $(head -1 "$kWork/out")"
"$kTrain" --preset llama-tiny --num-layers 3 --dry-run >"$kWork/out" 2>&1
grep -q "hidden 64, heads 4, FFN 176," "$kWork/out" || fail "llama-tiny's own FFN: $(head -1 "$kWork/out")"
"$kTrain" --preset llama2-7b --hidden-size 4096 --dry-run --gpu-memory-gb 400 >"$kWork/out" 2>&1
grep -q "hidden 4096, heads 32, FFN 11008," "$kWork/out" || fail "llama2-7b's hidden size restated: $(head -1 "$kWork/out")"
# Megatron's architecture flags: a gated FFN builds a Llama (from llama-tiny without a --preset), RoPE's with
# --position-embedding-type rope, GPT's explicit learned positions a GPT, --normalization the norms of either; a
# --preset of the other architecture is one line, exit 2.
llama=(--normalization RMSNorm --swiglu --position-embedding-type rope --untie-embeddings-and-output-weights
       --disable-bias-linear)
"$kTrain" "${llama[@]}" --hidden-size 256 --num-attention-heads 8 --group-query-attention --num-query-groups 2 \
  --rotary-base 500000 --norm-epsilon 1e-6 --dry-run >"$kWork/out" 2>&1
grep -q "^model llama (2 layers, hidden 256, heads 8, FFN 640, vocab 512, seq 128)" "$kWork/out" ||
  fail "Megatron's Llama flags: $(head -1 "$kWork/out")"
"$kTrain" --normalization LayerNorm --position-embedding-type learned_absolute --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt (2 layers, hidden 64" "$kWork/out" || fail "Megatron's GPT flags: $(head -1 "$kWork/out")"
# A gated FFN without --position-embedding-type rope (Megatron's learned_absolute default) builds a Llama whose
# positions are a learned table (a part of Llama's set was refused before 2026-12-08): it trains, its checkpoint keeps
# it, a resume with RoPE is refused naming it, and RoPE's settings are refused for it.
"$kTrain" --mock-data --swiglu --normalization RMSNorm --disable-bias-linear --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with learned positions, with its output layer tied (2 layers, hidden 64, heads 4, FFN 176, vocab 512, seq 128): 133440 parameters" "$kWork/out" ||
  fail "--swiglu without RoPE: $(head -1 "$kWork/out")"
"$kTrain" --swiglu --normalization RMSNorm --disable-bias-linear --seq-length 32 --micro-batch-size 2 --mock-data \
  --train-steps 2 --save "$kWork/llama-learned" >"$kWork/out" 2>"$kWork/err" ||
  fail "a Llama with learned positions: $(cat "$kWork/err")"
expect_exit 1 "position_embedding_type is \"learned_absolute\" in the checkpoint and \"rope\" here" \
  "$kTrain" --swiglu --normalization RMSNorm --disable-bias-linear --position-embedding-type rope --seq-length 32 \
  --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/llama-learned"
rm -rf "$kWork/llama-learned"
expect_exit 2 "error: RoPE over part of each head \(--rotary-percent\) needs RoPE, which a Llama's learned positions \(--position-embedding-type learned_absolute\) are not$" \
  "$kTrain" --mock-data --swiglu --rotary-percent 0.5
# Without --normalization, Llama's four build the Llama Megatron builds from them (its default LayerNorm, as its own
# Llama 3 scripts leave it); a --preset keeps its own norms, --normalization chooses them over any.
"$kTrain" "${llama[@]:2}" --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with LayerNorm (2 layers, hidden 64" "$kWork/out" ||
  fail "Megatron's Llama flags without --normalization: $(head -1 "$kWork/out")"
"$kTrain" --preset llama-tiny "${llama[@]:2}" --dry-run >"$kWork/out" 2>&1
grep -q "^model llama (2 layers, hidden 64" "$kWork/out" || fail "llama-tiny's own norms: $(head -1 "$kWork/out")"
"$kTrain" --preset llama-tiny --normalization LayerNorm --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with LayerNorm (2 layers" "$kWork/out" ||
  fail "--normalization over a Llama preset: $(head -1 "$kWork/out")"
"$kTrain" --normalization RMSNorm --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt with RMSNorm (2 layers" "$kWork/out" || fail "a GPT with RMSNorm: $(head -1 "$kWork/out")"
# The output layer: Megatron ties it to the embedding unless --untie-embeddings-and-output-weights, so Llama's flags
# without it build a tied Llama (Llama 3.2 1B's, Qwen2.5's), one matrix fewer, and a GPT with it an untied GPT; a
# --preset keeps its own unless that is given. Each trains, its checkpoint keeps it, a resume of the other is refused.
untied=("${llama[@]}")
tied=(--normalization RMSNorm --swiglu --position-embedding-type rope --disable-bias-linear)
"$kTrain" "${tied[@]}" --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with its output layer tied (2 layers, hidden 64, heads 4, FFN 176, vocab 512, seq 128): 125248 parameters" "$kWork/out" ||
  fail "Llama's flags without --untie-embeddings-and-output-weights: $(head -1 "$kWork/out")"
"$kTrain" "${untied[@]}" --dry-run >"$kWork/out" 2>&1
grep -q "^model llama (2 layers, hidden 64, heads 4, FFN 176, vocab 512, seq 128): 158016 parameters" "$kWork/out" ||
  fail "Llama's flags with --untie-embeddings-and-output-weights: $(head -1 "$kWork/out")"
"$kTrain" --preset llama-tiny --swiglu --position-embedding-type rope --disable-bias-linear --dry-run >"$kWork/out" 2>&1
grep -q "^model llama (2 layers" "$kWork/out" || fail "llama-tiny's own head: $(head -1 "$kWork/out")"
"$kTrain" --untie-embeddings-and-output-weights --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt with its own output layer (2 layers, hidden 64, heads 4, FFN 256, vocab 512, seq 128): 173824 parameters" "$kWork/out" ||
  fail "a GPT with --untie-embeddings-and-output-weights: $(head -1 "$kWork/out")"
# Without a gated FFN, --position-embedding-type rope and --disable-bias-linear change the GPT (Megatron's flags are
# apart): Nemotron's flags build its GPT, RoPE over half of each head in place of the table, no biases, 2 KV heads,
# squared ReLU, norms 1 + weight, an output layer of its own; it trains, its checkpoint keeps each, a resume of a GPT
# with the table and every bias is refused naming them; --export-hf writes it as Nemotron (hf_weights), and refuses a
# GPT with RoPE and GELU, which Nemotron's class has not.
nemotron=(--position-embedding-type rope --rotary-percent 0.5 --disable-bias-linear --group-query-attention
          --num-query-groups 2 --squared-relu --apply-layernorm-1p --untie-embeddings-and-output-weights)
"$kTrain" "${nemotron[@]}" --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt with RoPE, without biases, with its own output layer (2 layers, hidden 64, heads 4, FFN 256, vocab 512, seq 128): 156288 parameters" "$kWork/out" ||
  fail "Nemotron's flags: $(head -1 "$kWork/out")"
"$kTrain" "${nemotron[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 --save "$kWork/nemotron" \
  >"$kWork/out" 2>"$kWork/err" || fail "Nemotron's GPT: $(cat "$kWork/err")"
grep -q "heads 4/2" "$kWork/err" || fail "Nemotron's GPT's KV heads: $(grep model "$kWork/err")"
expect_exit 1 "position_embedding_type is \"rope\" in the checkpoint and \"learned_absolute\" here; rotary_percent is 0.5 in the checkpoint and 1.0 here; add_bias_linear is false in the checkpoint and true here" \
  "$kTrain" --squared-relu --apply-layernorm-1p --untie-embeddings-and-output-weights --num-query-groups 2 \
  --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/nemotron"
"$kTrain" "${nemotron[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/nemotron" \
  >"$kWork/out" 2>"$kWork/err" || fail "a resume of Nemotron's GPT: $(cat "$kWork/err")"
rm -rf "$kWork/nemotron"
expect_exit 1 "error: --export-hf: transformers' Nemotron, the GPT with RoPE \(--position-embedding-type rope\), has no GELU \(its FFN's activation is squared ReLU, --squared-relu\): --export writes this model's weights$" \
  "$kTrain" --position-embedding-type rope --mock-data --train-steps 1 --export-hf "$kWork/hf-nemotron"
expect_exit 1 "error: --export-hf: transformers' GPT2LMHeadModel, GPT-2's class, has no layers without biases \(--disable-bias-linear\): --export writes this model's weights$" \
  "$kTrain" --disable-bias-linear --mock-data --train-steps 1 --export-hf "$kWork/hf-nemotron"
for kind in tied untied-gpt; do
  if [[ $kind == tied ]]; then flags=("${tied[@]}"); else flags=(--untie-embeddings-and-output-weights); fi
  "$kTrain" "${flags[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 --log-interval 1 \
    --save "$kWork/$kind" >"$kWork/out" 2>"$kWork/err" || fail "a $kind model: $(cat "$kWork/err")"
  grep -Eq "^step +2/2 " "$kWork/out" || fail "a $kind model's steps: $(cat "$kWork/out")"
  other=(--preset llama-tiny)
  [[ $kind == tied ]] || other=(--preset gpt-tiny)
  "$kTrain" "${other[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/$kind" \
    >"$kWork/out" 2>"$kWork/err" && fail "a resume of a $kind model with the other head ran"
  grep -q "untie_embeddings_and_output_weights is $([[ $kind == tied ]] && echo false || echo true) in the checkpoint and $([[ $kind == tied ]] && echo true || echo false) here" "$kWork/err" ||
    fail "the head should be in the checkpoint: $(cat "$kWork/err")"
  rm -rf "${kWork:?}/$kind"
done
# Megatron's older spellings of RoPE: --use-rotary-position-embeddings, and --no-position-embedding beside it.
"$kTrain" --normalization RMSNorm --swiglu --use-rotary-position-embeddings --no-position-embedding \
  --untie-embeddings-and-output-weights --disable-bias-linear --dry-run >"$kWork/out" 2>&1
grep -q "^model llama (2 layers, hidden 64" "$kWork/out" || fail "Megatron's older RoPE flags: $(head -1 "$kWork/out")"
expect_exit 2 "error: --no-position-embedding is Megatron's deprecated flag, taken with RoPE only \(--position-embedding-type rope\): for a model without learned positions give that, for one without any --position-embedding-type none$" \
  "$kTrain" --mock-data --no-position-embedding
expect_exit 2 "error: --use-rotary-position-embeddings asks for RoPE, --position-embedding-type learned_absolute for learned positions: give one$" \
  "$kTrain" --mock-data --use-rotary-position-embeddings --position-embedding-type learned_absolute
expect_exit 2 "error: --preset gpt2-124m is a gpt model, but Megatron's flags given ask for a llama one$" \
  "$kTrain" --mock-data --preset gpt2-124m "${llama[@]}"
expect_exit 2 "error: --preset llama-tiny is a llama model, but Megatron's flags given ask for a gpt one$" \
  "$kTrain" --mock-data --preset llama-tiny --position-embedding-type learned_absolute
# The Llama they build trains, and its checkpoint holds the epsilon and RoPE base given.
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 --rotary-base 500000 \
  --save "$kWork/megatron-llama" >"$kWork/out" 2>"$kWork/err" || fail "Megatron's Llama flags: $(cat "$kWork/err")"
"$kTrain" --preset llama-tiny --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 \
  --load "$kWork/megatron-llama" >"$kWork/out" 2>"$kWork/err" && fail "a resume with another RoPE base ran"
grep -q "rope_theta is 500000.0 in the checkpoint and 10000.0 here" "$kWork/err" ||
  fail "the RoPE base should be in the checkpoint: $(cat "$kWork/err")"
rm -rf "$kWork/megatron-llama"
# The Llama with LayerNorms trains; its checkpoint keeps its norms, and a resume with others is refused naming them.
"$kTrain" "${llama[@]:2}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 --save "$kWork/llama-ln" \
  >"$kWork/out" 2>"$kWork/err" || fail "a Llama with LayerNorm: $(cat "$kWork/err")"
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/llama-ln" \
  >"$kWork/out" 2>"$kWork/err" && fail "a resume of a Llama with LayerNorm with RMSNorm ran"
grep -q 'normalization is "LayerNorm" in the checkpoint and "RMSNorm" here' "$kWork/err" ||
  fail "the norms should be in the checkpoint: $(cat "$kWork/err")"
rm -rf "$kWork/llama-ln"
# Megatron's own Llama 3 scripts (examples/llama/train_llama3_8b_h200_bf16.sh, h100_fp8's without its FP8 flags), their
# flags as given there, the sizes and sample counts shrunk and the flags srunway-train refuses (--wandb-*) left out:
# they train the Llama with LayerNorms that Megatron trains from them (they give no --normalization), with the
# decoupled rate, the gradients reduced in bf16, and a line for --ckpt-format torch_dist.
"$kTrain" --use-mcore-models --num-layers 2 --hidden-size 64 --ffn-hidden-size 160 --num-attention-heads 4 \
  --group-query-attention --num-query-groups 2 --kv-channels 16 --seq-length 32 --max-position-embeddings 32 \
  --position-embedding-type rope --rotary-base 1000000 --rotary-percent 1.0 --attention-dropout 0.0 \
  --hidden-dropout 0.0 --swiglu --init-method-std 0.0134 --attention-backend fused --apply-layernorm-1p \
  --untie-embeddings-and-output-weights --disable-bias-linear \
  --micro-batch-size 1 --global-batch-size 4 --train-samples 24 --lr-decay-samples 20 --lr-warmup-samples 4 \
  --lr 0.00015 --min-lr 0.00001 --decoupled-lr 5.0e-4 --decoupled-min-lr 4.5e-5 --lr-decay-style cosine \
  --clip-grad 1.0 --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95 --bf16 --grad-reduce-in-bf16 \
  --cross-entropy-loss-fusion \
  --calculate-per-token-loss --manual-gc --empty-unused-memory-level 1 --exit-duration-in-mins 235 \
  --tensor-model-parallel-size 1 --context-parallel-size 1 --sequence-parallel \
  --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
  --mock-data --tokenizer-type NullTokenizer --vocab-size 1000 --data-cache-path "$kWork/llama3-cache" \
  --tiktoken-pattern v2 --split '99,1,0' --no-create-attention-mask-in-dataloader --no-mmap-bin-files \
  --num-workers 1 --log-interval 1 --eval-iters 32 --eval-interval 100 --save-interval 1000 --log-throughput \
  --profile --profile-step-start 4 --profile-step-end 6 --distributed-timeout-minutes 60 \
  --save "$kWork/llama3" --load "$kWork/llama3" --ckpt-format torch_dist --tensorboard-dir "$kWork/llama3-tb" \
  --log-params-norm --log-num-zeros-in-grad --log-timers-to-tensorboard >"$kWork/out" 2>"$kWork/err" ||
  fail "Megatron's Llama 3 flags: $(cat "$kWork/err")"
grep -q "model llama with LayerNorm (2 layers, hidden 64, heads 4/2, vocab 1024): .* overlapped with the backward in bf16;" "$kWork/err" ||
  fail "Megatron's Llama 3 flags build a Llama with LayerNorms: $(grep model "$kWork/err")"
grep -q "^step      6/6 | loss .* | lr .* | decoupled lr " "$kWork/out" ||
  fail "Megatron's Llama 3 flags: six steps with the decoupled rate: $(cat "$kWork/out")"
grep -q "info: --ckpt-format torch_dist: srunway-train's checkpoints are its own" "$kWork/err" ||
  fail "Megatron's Llama 3 flags: $(cat "$kWork/err")"
rm -rf "$kWork/llama3" "$kWork/llama3-cache" "$kWork/llama3-tb"
# Llama 3.1's RoPE scaling (Megatron's --use-rope-scaling): it changes the model (its losses differ from the same
# run's without it), its checkpoint keeps it, and a resume without it is refused naming it.
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 --use-rope-scaling \
  --rope-scaling-factor 32 --metrics-file "$kWork/scaled.jsonl" --save "$kWork/scaled" >"$kWork/out" \
  2>"$kWork/err" || fail "--use-rope-scaling: $(cat "$kWork/err")"
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 \
  --metrics-file "$kWork/unscaled.jsonl" >"$kWork/out" 2>"$kWork/err" || fail "Megatron's Llama: $(cat "$kWork/err")"
losses_differ "$kWork/scaled.jsonl" "$kWork/unscaled.jsonl" ||
  fail "--use-rope-scaling trained the model without it: $(losses "$kWork/scaled.jsonl")"
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 \
  --load "$kWork/scaled" >"$kWork/out" 2>"$kWork/err" && fail "a resume without the RoPE scaling ran"
grep -q 'rope_scaling is {"factor":32.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192} in the checkpoint and null here' "$kWork/err" ||
  fail "the RoPE scaling should be in the checkpoint: $(cat "$kWork/err")"
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --use-rope-scaling \
  --rope-scaling-factor 32 --load "$kWork/scaled" >"$kWork/out" 2>"$kWork/err" ||
  fail "a resume with the RoPE scaling: $(cat "$kWork/err")"
# changes_llama NAME DIFFERENCE FLAG...: 2 steps of Megatron's Llama with FLAG... saved in $kWork/NAME, whose losses
# must differ from the same run's without them (unscaled.jsonl, above); a resume without them is refused naming the
# checkpoint's DIFFERENCE (a regular expression).
changes_llama() {
  local name=$1 difference=$2
  shift 2
  "$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 "$@" \
    --metrics-file "$kWork/$name.jsonl" --save "$kWork/$name" >"$kWork/out" 2>"$kWork/err" || fail "$*: $(cat "$kWork/err")"
  losses_differ "$kWork/$name.jsonl" "$kWork/unscaled.jsonl" ||
    fail "$* trained the model without them: $(losses "$kWork/$name.jsonl")"
  expect_exit 1 "$difference" \
    "$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/$name"
}
# Linear RoPE scaling (Megatron's --rotary-seq-len-interpolation-factor): it changes the model, its checkpoint keeps
# it, a resume without it is refused naming it; a GPT, and both scalings at once, are refused.
changes_llama linear "rope_linear_factor is 4.0 in the checkpoint and 1.0 here" --rotary-seq-len-interpolation-factor 4
expect_exit 2 "error: linear RoPE scaling \(--rotary-seq-len-interpolation-factor\) needs RoPE, which GPT's learned positions are not: a Llama model, or a GPT with --position-embedding-type rope$" \
  "$kTrain" --mock-data --preset gpt-tiny --rotary-seq-len-interpolation-factor 2
expect_exit 2 "error: RoPE scaling: Llama 3.1's \(--use-rope-scaling\) or linear \(--rotary-seq-len-interpolation-factor\), not both$" \
  "$kTrain" --mock-data "${llama[@]}" --use-rope-scaling --rotary-seq-len-interpolation-factor 2
# RoPE over part of each head (Megatron's --rotary-percent): it changes the model, its checkpoint keeps it, a resume
# without it is refused naming it and --use-checkpoint-args takes it (another share given with it is refused); a GPT,
# a share outside (0, 1] and one that leaves an odd number of dimensions are refused.
changes_llama partial "rotary_percent is 0.5 in the checkpoint and 1.0 here" --rotary-percent 0.5
"$kTrain" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --use-checkpoint-args \
  --load "$kWork/partial" --rotary-percent 0.5 >"$kWork/out" 2>"$kWork/err" ||
  fail "--use-checkpoint-args of a checkpoint with --rotary-percent 0.5: $(cat "$kWork/err")"
expect_exit 2 "error: --rotary-percent 0.25: the checkpoint's RoPE \(--use-checkpoint-args\) turns 0.5 of each head: give 0.5 or leave it out$" \
  "$kTrain" --mock-data --train-steps 3 --use-checkpoint-args --load "$kWork/partial" --rotary-percent 0.25
expect_exit 2 "error: RoPE over part of each head \(--rotary-percent\) needs RoPE, which GPT's learned positions are not: a Llama model, or a GPT with --position-embedding-type rope$" \
  "$kTrain" --mock-data --preset gpt-tiny --rotary-percent 0.5
expect_exit 2 "error: rotary_percent \(--rotary-percent\) must be above 0 and at most 1, got 1.5$" \
  "$kTrain" --mock-data "${llama[@]}" --rotary-percent 1.5
expect_exit 2 "error: rotary_percent \(--rotary-percent\) 0.1 turns 1 of each head's 16 dimensions \(int\(head size x it\)\), which must be even and 2 or more: RoPE turns them in pairs$" \
  "$kTrain" --mock-data "${llama[@]}" --rotary-percent 0.1
rm -rf "$kWork/partial" "$kWork/partial.jsonl"
# Interleaved RoPE pairs (Megatron's --rotary-interleaved): they change the model, its checkpoint keeps them, a resume
# without them is refused naming them; a GPT is refused.
changes_llama interleaved "rotary_interleaved is true in the checkpoint and false here" --rotary-interleaved
expect_exit 2 "error: interleaved RoPE \(--rotary-interleaved\) needs RoPE, which GPT's learned positions are not: a Llama model, or a GPT with --position-embedding-type rope$" \
  "$kTrain" --mock-data --preset gpt-tiny --rotary-interleaved
rm -rf "$kWork/interleaved" "$kWork/interleaved.jsonl"
# No positions (Megatron's --position-embedding-type none, NoPE): neither a GPT's learned table nor a Llama's RoPE.
# They change the model, its checkpoint keeps them, a resume without them is refused naming them and
# --use-checkpoint-args takes them; the flag alone leaves a GPT without its table, and takes RoPE's place in Llama's
# set; RoPE's settings beside it, and Megatron's older RoPE flag, are refused.
changes_llama nope 'position_embedding_type is "none" in the checkpoint and "rope" here' --position-embedding-type none
"$kTrain" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --use-checkpoint-args --load "$kWork/nope" \
  >"$kWork/out" 2>"$kWork/err" || fail "--use-checkpoint-args of a checkpoint without positions: $(cat "$kWork/err")"
grep -q "model llama without positions (2 layers" "$kWork/err" ||
  fail "--use-checkpoint-args should take the model without positions: $(grep model "$kWork/err")"
rm -rf "$kWork/nope" "$kWork/nope.jsonl"
"$kTrain" --position-embedding-type none --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt without positions (2 layers, hidden 64, heads 4, FFN 256, vocab 512, seq 128): 132864 parameters" \
  "$kWork/out" || fail "a GPT without positions: $(head -1 "$kWork/out")"
"$kTrain" "${llama[@]/rope/none}" --dry-run >"$kWork/out" 2>&1
grep -q "^model llama without positions (2 layers" "$kWork/out" ||
  fail "Llama's set with --position-embedding-type none: $(head -1 "$kWork/out")"
expect_exit 2 "error: interleaved RoPE \(--rotary-interleaved\) needs RoPE, which a model without positions \(--position-embedding-type none\) has not$" \
  "$kTrain" --mock-data "${llama[@]/rope/none}" --rotary-interleaved
expect_exit 2 "error: --use-rotary-position-embeddings asks for RoPE, --position-embedding-type none for no positions: give one$" \
  "$kTrain" --mock-data --use-rotary-position-embeddings --position-embedding-type none
# RoPE skipped in some layers (Megatron's --no-rope-freq; Llama 4 skips it in every fourth): it changes the model, its
# checkpoint keeps it and a resume without it is refused naming it; a list expression names each layer; a count that
# does not divide the layers, and a GPT, are refused.
changes_llama no-rope 'no_rope_freq is \[0,1\] in the checkpoint and \[\] here' --no-rope-freq 2
rm -rf "$kWork/no-rope" "$kWork/no-rope.jsonl"
"$kTrain" "${llama[@]}" --num-layers 8 --no-rope-freq '([0]*3+[1])*2' --dry-run >"$kWork/out" 2>&1
grep -q "^model llama without RoPE in 2 of 8 layers (8 layers" "$kWork/out" ||
  fail "--no-rope-freq's list expression: $(head -1 "$kWork/out")"
expect_exit 2 "error: --no-rope-freq 3: the model's 2 layers are not a multiple of 3 \(RoPE is skipped in the last layer of every 3\)$" \
  "$kTrain" --mock-data "${llama[@]}" --no-rope-freq 3
expect_exit 2 "error: RoPE skipped in some layers \(--no-rope-freq\) needs RoPE, which GPT's learned positions are not: a Llama model, or a GPT with --position-embedding-type rope$" \
  "$kTrain" --mock-data --preset gpt-tiny --no-rope-freq 2
# Sliding-window attention (Megatron's --window-size L,0; --window-attn-skip-freq the layers that attend to every key
# despite it): it changes the model, its checkpoint keeps it and a resume without it is refused naming it; a GPT takes
# it too; a window that reaches past its query, and the layers without a window, are refused.
changes_llama window 'window_size is \[4,0\] in the checkpoint and null here' --window-size 4,0
rm -rf "$kWork/window" "$kWork/window.jsonl"
"$kTrain" --preset gpt-tiny --num-layers 4 --window-size 128,0 --window-attn-skip-freq 2 --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt with a window of 128 keys back in 2 of 4 layers (4 layers" "$kWork/out" ||
  fail "a GPT with a window in every other layer: $(head -1 "$kWork/out")"
expect_exit 2 "error: --window-size 4,1: srunway-train's attention is causal, so a window reaches no key after its query: give L,0$" \
  "$kTrain" --mock-data --window-size 4,1
expect_exit 2 "--window-attn-skip-freq requires --window-size" "$kTrain" --mock-data --window-attn-skip-freq 2
# Attention's softmax with a sink (Megatron's --softmax-type): off-by-one's (score 0) and learnable's (a score per head
# and layer, a parameter) change the model, its checkpoint keeps them and a resume without them is refused naming
# them; --use-checkpoint-args takes them; learnable's scores count among the parameters (2 layers of 4 heads: 8).
changes_llama off-by-one 'softmax_type is "off-by-one" in the checkpoint and "vanilla" here' --softmax-type off-by-one
changes_llama sinks 'softmax_type is "learnable" in the checkpoint and "vanilla" here' --softmax-type learnable
"$kTrain" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --use-checkpoint-args --load "$kWork/sinks" \
  >"$kWork/out" 2>"$kWork/err" || fail "--use-checkpoint-args of a checkpoint with learned sinks: $(cat "$kWork/err")"
grep -q "model llama with learned attention sinks (2 layers" "$kWork/err" ||
  fail "--use-checkpoint-args should take the learned sinks: $(grep model "$kWork/err")"
rm -rf "$kWork/off-by-one" "$kWork/off-by-one.jsonl" "$kWork/sinks" "$kWork/sinks.jsonl"
"$kTrain" --softmax-type learnable --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt with learned attention sinks (2 layers, hidden 64, heads 4, FFN 256, vocab 512, seq 128): \
141064 parameters" "$kWork/out" || fail "a GPT with learned sinks: $(head -1 "$kWork/out")"
"$kTrain" --softmax-type vanilla --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt (2 layers, hidden 64, heads 4, FFN 256, vocab 512, seq 128): 141056 parameters" "$kWork/out" ||
  fail "--softmax-type vanilla: $(head -1 "$kWork/out")"
expect_exit 2 "--softmax-type: off_by_one not in \{vanilla,off-by-one,learnable\}" "$kTrain" --mock-data \
  --softmax-type off_by_one
# Megatron's --quick-geglu with --glu-linear-offset and --activation-func-clamp-value (gpt-oss's FFN activation): in
# Llama's set it takes --swiglu's place, and alone it changes a --preset's Llama; it changes the model, its checkpoint
# keeps all three and a resume without them is refused naming them; beside --swiglu, for a GPT, and a clamp that is
# not positive, it is refused.
"$kTrain" "${llama[@]/--swiglu/--quick-geglu}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 \
  --glu-linear-offset 1 --activation-func-clamp-value 7 --metrics-file "$kWork/geglu.jsonl" --save "$kWork/geglu" \
  >"$kWork/out" 2>"$kWork/err" || fail "--quick-geglu in Llama's set: $(cat "$kWork/err")"
losses_differ "$kWork/geglu.jsonl" "$kWork/unscaled.jsonl" ||
  fail "--quick-geglu trained the model without it: $(losses "$kWork/geglu.jsonl")"
grep -q "model llama with quick GEGLU (2 layers" "$kWork/err" || fail "--quick-geglu's model: $(grep model "$kWork/err")"
expect_exit 1 "quick_geglu is true in the checkpoint and false here; glu_linear_offset is 1.0 in the checkpoint and 0.0 here; activation_func_clamp_value is 7.0 in the checkpoint and null here$" \
  "$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/geglu"
rm -rf "$kWork/geglu" "$kWork/geglu.jsonl"
"$kTrain" --preset llama-tiny --quick-geglu --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with quick GEGLU (2 layers" "$kWork/out" ||
  fail "--preset llama-tiny --quick-geglu: $(head -1 "$kWork/out")"
expect_exit 2 "error: --swiglu, --quick-geglu and --geglu are three activations of a gated FFN \(SiLU, quick GELU and GELU\): give one$" \
  "$kTrain" --mock-data "${llama[@]}" --quick-geglu
expect_exit 2 "error: quick_geglu \(--quick-geglu\) is for a Llama model, whose FFN is gated: a GPT's is GELU or squared ReLU$" \
  "$kTrain" --mock-data --preset gpt-tiny --quick-geglu
expect_exit 2 "error: glu_linear_offset \(--glu-linear-offset\) is for a Llama model" "$kTrain" --mock-data \
  --glu-linear-offset 1
expect_exit 2 "--activation-func-clamp-value" "$kTrain" --mock-data --preset llama-tiny --activation-func-clamp-value 0
# --geglu and --embedding-multiplier (Gemma's Llama): in Llama's set --geglu takes --swiglu's place, and alone it
# changes a --preset's Llama; both change the model, its checkpoint keeps them and a resume without them is refused
# naming them; --geglu beside --quick-geglu or for a GPT, and a multiplier not above 0, are refused.
"$kTrain" "${llama[@]/--swiglu/--geglu}" --embedding-multiplier 8 --seq-length 32 --micro-batch-size 2 --mock-data \
  --train-steps 2 --metrics-file "$kWork/gemma.jsonl" --save "$kWork/gemma" >"$kWork/out" 2>"$kWork/err" ||
  fail "--geglu in Llama's set: $(cat "$kWork/err")"
losses_differ "$kWork/gemma.jsonl" "$kWork/unscaled.jsonl" ||
  fail "--geglu --embedding-multiplier 8 trained the model without them: $(losses "$kWork/gemma.jsonl")"
grep -q "model llama with GeGLU, with its embedding times 8 (2 layers" "$kWork/err" ||
  fail "--geglu's model: $(grep model "$kWork/err")"
expect_exit 1 "geglu is true in the checkpoint and false here; embedding_multiplier is 8.0 in the checkpoint and 1.0 here" \
  "$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/gemma"
rm -rf "$kWork/gemma" "$kWork/gemma.jsonl"
"$kTrain" --preset llama-tiny --geglu --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with GeGLU (2 layers" "$kWork/out" || fail "--preset llama-tiny --geglu: $(head -1 "$kWork/out")"
expect_exit 2 "error: --swiglu, --quick-geglu and --geglu are three activations" "$kTrain" --mock-data \
  --preset llama-tiny --quick-geglu --geglu
expect_exit 2 "error: geglu \(--geglu\) is for a Llama model, whose FFN is gated: a GPT's is GELU or squared ReLU$" \
  "$kTrain" --mock-data --preset gpt-tiny --geglu
expect_exit 2 "--embedding-multiplier: 0 is not above 0" "$kTrain" --mock-data --preset llama-tiny \
  --embedding-multiplier 0
# Megatron's --position-embedding-type yarn (gpt-oss's RoPE) with its --yarn-* flags: in Llama's set it takes rope's
# place, and alone it changes a --preset's Llama; it changes the model, its checkpoint keeps its numbers, a resume
# without them is refused naming them and --use-checkpoint-args takes them; a GPT, --yarn-* without it, and YaRN
# beside another RoPE scaling are refused.
changes_llama yarn 'position_embedding_type is "yarn" in the checkpoint and "rope" here; yarn is \{"rotary_scaling_factor":4\.0,"original_max_position_embeddings":64,"beta_fast":32\.0,"beta_slow":1\.0,"mscale":1\.0,"mscale_all_dim":0\.0,"correction_range_round_to_int":false\} in the checkpoint and null here$' \
  --position-embedding-type yarn --yarn-rotary-scaling-factor 4 --yarn-original-max-position-embeddings 64 \
  --yarn-correction-range-round-to-int false
"$kTrain" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --use-checkpoint-args --load "$kWork/yarn" \
  >"$kWork/out" 2>"$kWork/err" || fail "--use-checkpoint-args of a checkpoint with YaRN: $(cat "$kWork/err")"
grep -q "model llama with YaRN (4x) (2 layers" "$kWork/err" ||
  fail "--use-checkpoint-args should take YaRN: $(grep model "$kWork/err")"
# --finetune takes a checkpoint whose model reaches its positions otherwise (here YaRN's 128 positions into RoPE's
# 256), the same parameters, saying so; any other difference is still refused.
"$kTrain" "${llama[@]}" --seq-length 64 --max-position-embeddings 256 --micro-batch-size 2 --mock-data \
  --train-steps 1 --load "$kWork/yarn" --finetune >"$kWork/out" 2>"$kWork/err" ||
  fail "--finetune of a YaRN checkpoint into a longer RoPE: $(cat "$kWork/err")"
grep -q "info: --finetune: $kWork/yarn reaches its positions otherwise than this run's model (seq_len is 128 in the checkpoint and 256 here; position_embedding_type is \"yarn\" in the checkpoint and \"rope\" here; yarn is {.*} in the checkpoint and null here): its parameters are this model's, trained as given here$" \
  "$kWork/err" || fail "--finetune's line on the positions: $(cat "$kWork/err")"
expect_exit 1 "the checkpoint is of another model: n_layer is 2 in the checkpoint and 3 here; position_embedding_type is " "$kTrain" "${llama[@]}" \
  --num-layers 3 --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 1 --load "$kWork/yarn" --finetune
rm -rf "$kWork/yarn" "$kWork/yarn.jsonl"
"$kTrain" --preset llama-tiny --position-embedding-type yarn --yarn-rotary-scaling-factor 32 --dry-run \
  >"$kWork/out" 2>&1
grep -q "^model llama with YaRN (32x) (2 layers" "$kWork/out" ||
  fail "--preset llama-tiny --position-embedding-type yarn: $(head -1 "$kWork/out")"
"$kTrain" --preset llama-tiny --position-embedding-type yarn --quick-geglu --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with YaRN (1x), with quick GEGLU (2 layers" "$kWork/out" ||
  fail "--preset llama-tiny --position-embedding-type yarn --quick-geglu: $(head -1 "$kWork/out")"
"$kTrain" --swiglu --position-embedding-type yarn --dry-run >"$kWork/out" 2>&1
grep -q "^model llama with LayerNorm, with its output layer tied, with biases, with YaRN (1x) (2 layers" "$kWork/out" ||
  fail "--swiglu --position-embedding-type yarn: $(head -1 "$kWork/out")"
expect_exit 2 "error: --yarn-beta-fast is YaRN's, for --position-embedding-type yarn$" "$kTrain" --mock-data \
  "${llama[@]}" --yarn-beta-fast 16
"$kTrain" --preset gpt-tiny --position-embedding-type yarn --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt with RoPE, with YaRN (1x) (2 layers" "$kWork/out" ||
  fail "--preset gpt-tiny --position-embedding-type yarn: $(head -1 "$kWork/out")"
expect_exit 2 "error: YaRN \(--position-embedding-type yarn\) is not taken with linear RoPE scaling \(--rotary-seq-len-interpolation-factor\): " \
  "$kTrain" --mock-data --preset llama-tiny --position-embedding-type yarn --rotary-seq-len-interpolation-factor 2
# README's gpt-oss without its experts: every one of those flags together.
"$kTrain" --normalization RMSNorm --quick-geglu --glu-linear-offset 1 --activation-func-clamp-value 7 \
  --position-embedding-type yarn --rotary-base 150000 --yarn-rotary-scaling-factor 32 \
  --yarn-original-max-position-embeddings 4096 --yarn-correction-range-round-to-int false \
  --untie-embeddings-and-output-weights --softmax-type learnable --window-size 128,0 --window-attn-skip-freq 2 \
  --group-query-attention --num-query-groups 2 --kv-channels 64 --num-layers 4 --hidden-size 256 \
  --num-attention-heads 8 --ffn-hidden-size 256 --max-position-embeddings 512 --seq-length 256 \
  --micro-batch-size 2 --mock-data --train-steps 5 --dry-run >"$kWork/out" 2>&1 || fail "README's gpt-oss: $(cat "$kWork/out")"
grep -q "^model llama with a window of 128 keys back in 2 of 4 layers, with biases, with YaRN (32x), with quick GEGLU, with learned attention sinks (4 layers, hidden 256, heads 8, FFN 256, vocab 512, seq 256): 2368800 parameters" \
  "$kWork/out" || fail "README's gpt-oss: $(head -1 "$kWork/out")"
expect_exit 2 "error: YaRN's beta_fast \(--yarn-beta-fast\) 32 must be larger than its beta_slow \(--yarn-beta-slow\) 40$" \
  "$kTrain" --mock-data --preset llama-tiny --position-embedding-type yarn --yarn-beta-slow 40
rm -rf "$kWork/scaled" "$kWork/linear" "$kWork/scaled.jsonl" "$kWork/unscaled.jsonl" "$kWork/linear.jsonl"
expect_exit 2 "error: RoPE scaling \(--use-rope-scaling\) needs RoPE, which GPT's learned positions are not: a Llama model, or a GPT with --position-embedding-type rope$" \
  "$kTrain" --mock-data --preset gpt-tiny --use-rope-scaling
expect_exit 2 "--rope-scaling-factor requires --use-rope-scaling" "$kTrain" --mock-data "${llama[@]}" --rope-scaling-factor 8
# Megatron's --add-qkv-bias (Qwen2's attention): the Llama's q, k and v biases train (its losses differ from the same
# run's without them, whose zero biases would stay zero only without them), its checkpoint keeps them, and a resume
# without the flag is refused naming it. A GPT has those biases anyway: the flag changes nothing there.
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --add-qkv-bias \
  --metrics-file "$kWork/biased.jsonl" --save "$kWork/biased" >"$kWork/out" 2>"$kWork/err" ||
  fail "--add-qkv-bias: $(cat "$kWork/err")"
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 \
  --metrics-file "$kWork/unbiased.jsonl" >"$kWork/out" 2>"$kWork/err" || fail "Megatron's Llama: $(cat "$kWork/err")"
losses_differ "$kWork/biased.jsonl" "$kWork/unbiased.jsonl" ||
  fail "--add-qkv-bias trained the model without the biases: $(losses "$kWork/biased.jsonl")"
expect_exit 1 "qkv_bias is true in the checkpoint and false here" \
  "$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 4 --load "$kWork/biased"
"$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 4 --add-qkv-bias \
  --load "$kWork/biased" >"$kWork/out" 2>"$kWork/err" || fail "a resume with --add-qkv-bias: $(cat "$kWork/err")"
expect_exit 2 "--add-qkv-bias excludes --use-checkpoint-args" \
  "$kTrain" --mock-data --use-checkpoint-args --load "$kWork/biased" --add-qkv-bias
for bias in "" --add-qkv-bias; do
  "$kTrain" --preset gpt-tiny --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 $bias \
    --metrics-file "$kWork/gpt$bias.jsonl" >"$kWork/out" 2>"$kWork/err" || fail "gpt-tiny $bias: $(cat "$kWork/err")"
done
diff <(losses "$kWork/gpt.jsonl") <(losses "$kWork/gpt--add-qkv-bias.jsonl") >/dev/null ||
  fail "--add-qkv-bias changed a GPT, which has those biases anyway"
# Llama's flags without --disable-bias-linear build Megatron's Llama with add_bias_linear, a bias on every linear
# layer: its losses differ from the unbiased run's, its checkpoint keeps it, a resume with --disable-bias-linear is
# refused naming it, --use-checkpoint-args takes it, and --add-qkv-bias beside it changes nothing.
biased_llama=()
for arg in "${llama[@]}"; do [[ $arg == --disable-bias-linear ]] || biased_llama+=("$arg"); done
"$kTrain" "${biased_llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 \
  --metrics-file "$kWork/every-bias.jsonl" --save "$kWork/every-bias" >"$kWork/out" 2>"$kWork/err" ||
  fail "Llama's flags without --disable-bias-linear: $(cat "$kWork/err")"
grep -q "model llama with biases (2 layers" "$kWork/err" || fail "a Llama with biases: $(grep model "$kWork/err")"
losses_differ "$kWork/every-bias.jsonl" "$kWork/unbiased.jsonl" ||
  fail "Llama's flags without --disable-bias-linear trained a Llama without biases: $(losses "$kWork/every-bias.jsonl")"
for bias in "" --add-qkv-bias; do
  "$kTrain" "${biased_llama[@]}" $bias --dry-run >"$kWork/every-bias$bias.plan" 2>&1 ||
    fail "--dry-run of a Llama with every bias $bias: $(cat "$kWork/every-bias$bias.plan")"
done
grep -q "^model llama with biases (2 layers, hidden 64, heads 4, FFN 176, vocab 512, seq 128): 159232 parameters" \
  "$kWork/every-bias.plan" || fail "a Llama with every bias: $(head -1 "$kWork/every-bias.plan")"
diff <(head -1 "$kWork/every-bias.plan") <(head -1 "$kWork/every-bias--add-qkv-bias.plan") >/dev/null ||
  fail "--add-qkv-bias changed a Llama with every bias: $(head -1 "$kWork/every-bias--add-qkv-bias.plan")"
expect_exit 1 "add_bias_linear is true in the checkpoint and false here" \
  "$kTrain" "${llama[@]}" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 4 --load "$kWork/every-bias"
"$kTrain" --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 4 --use-checkpoint-args \
  --load "$kWork/every-bias" >"$kWork/out" 2>"$kWork/err" ||
  fail "--use-checkpoint-args of a Llama with every bias: $(cat "$kWork/err")"
grep -q "model llama with biases (2 layers" "$kWork/err" ||
  fail "--use-checkpoint-args should take the biases: $(grep model "$kWork/err")"
rm -rf "$kWork/every-bias" "$kWork/every-bias.jsonl" "$kWork/every-bias.plan" "$kWork/every-bias--add-qkv-bias.plan"
# Megatron's --squared-relu: a GPT's FFN is relu(x)^2 (its losses differ from GELU's), kept in the checkpoint (a
# resume without it is refused naming it); a Llama's FFN is SwiGLU, refused; --no-bias-gelu-fusion (exact GELU) is
# taken with it, which has no GELU.
"$kTrain" --preset gpt-tiny --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 --squared-relu \
  --no-bias-gelu-fusion --metrics-file "$kWork/relu2.jsonl" --save "$kWork/relu2" >"$kWork/out" 2>"$kWork/err" ||
  fail "--squared-relu: $(cat "$kWork/err")"
losses_differ "$kWork/relu2.jsonl" "$kWork/gpt.jsonl" ||
  fail "--squared-relu trained GELU's model: $(losses "$kWork/relu2.jsonl")"
expect_exit 1 "squared_relu is true in the checkpoint and false here" \
  "$kTrain" --preset gpt-tiny --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/relu2"
"$kTrain" --preset gpt-tiny --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --squared-relu \
  --load "$kWork/relu2" >"$kWork/out" 2>"$kWork/err" || fail "a resume with --squared-relu: $(cat "$kWork/err")"
expect_exit 2 "error: squared_relu \(--squared-relu\) is for a GPT model: a Llama's FFN is SwiGLU$" \
  "$kTrain" "${llama[@]}" --mock-data --squared-relu
rm -rf "$kWork/biased" "$kWork/relu2" "$kWork"/{biased,unbiased,gpt,gpt--add-qkv-bias,relu2}.jsonl
# Megatron's --qk-layernorm (Qwen3's q_norm and k_norm), a Llama's or a GPT's: the norms train (the losses differ
# from the run's without them, and are those of the run that recomputes the layers), and the checkpoint keeps them
# (a resume without the flag is refused naming it).
declare -A qk_args=([plain]="" [qk]=--qk-layernorm [recomputed]="--qk-layernorm --recompute-activations")
for preset in llama-tiny gpt-tiny; do
  for variant in plain qk recomputed; do
    "$kTrain" --preset $preset --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 2 ${qk_args[$variant]} \
      --metrics-file "$kWork/$variant.jsonl" --save "$kWork/$variant" >"$kWork/out" 2>"$kWork/err" ||
      fail "$preset ${qk_args[$variant]}: $(cat "$kWork/err")"
  done
  losses_differ "$kWork/qk.jsonl" "$kWork/plain.jsonl" ||
    fail "--qk-layernorm trained $preset without the norms: $(losses "$kWork/qk.jsonl")"
  diff <(losses "$kWork/qk.jsonl") <(losses "$kWork/recomputed.jsonl") ||
    fail "--qk-layernorm: $preset's losses differ with --recompute-activations"
  expect_exit 1 "qk_layernorm is true in the checkpoint and false here" "$kTrain" --preset $preset --seq-length 32 \
    --micro-batch-size 2 --mock-data --train-steps 3 --load "$kWork/qk"
  "$kTrain" --preset $preset --seq-length 32 --micro-batch-size 2 --mock-data --train-steps 3 --qk-layernorm \
    --load "$kWork/qk" >"$kWork/out" 2>"$kWork/err" || fail "a resume with --qk-layernorm: $(cat "$kWork/err")"
  rm -rf "$kWork"/{plain,qk,recomputed}{,.jsonl}
done
expect_exit 2 "--qk-layernorm excludes --use-checkpoint-args" \
  "$kTrain" --mock-data --use-checkpoint-args --load "$kWork/none" --qk-layernorm
# A model that cannot be built names the flags that shape it (it said only "d_model 100", "n_head 3").
expect_exit 2 "error: d_model \\(--hidden-size\\) 100 is not a multiple of n_head \\(--num-attention-heads\\) 3$" \
  "$kTrain" --preset gpt-tiny --mock-data --hidden-size 100 --num-attention-heads 3
expect_exit 2 "config.bad.yaml:2" bash -c "printf 'a: 1\n b: [\n' >'$kWork/config.bad.yaml'; '$kTrain' --config '$kWork/config.bad.yaml'"
# yaml-cpp quotes the character it stopped at, here a control character: escaped, the error stays one line.
printf 'lr: "\\\001"\n' >"$kWork/config.esc.yaml"
expect_exit 2 'config.esc.yaml:1:8: unknown escape character: \\x01$' "$kTrain" --config "$kWork/config.esc.yaml"
# A key that is no flag is named with its line (CLI11 named the words made of it: "3 --micro-batch").
printf 'lr: 0.001\nmicro_batch: 3\n' >"$kWork/config.typo.yaml"
expect_exit 2 "config.typo.yaml:2: unknown key 'micro_batch' \(srunway-train has no --micro-batch; see --help\)" \
  "$kTrain" --config "$kWork/config.typo.yaml" --mock-data
# One of Megatron's flags that srunway-train refuses by name says why, as on the command line.
printf 'lr: 0.001\nmoe_router_topk: 2\n' >"$kWork/config.moe.yaml"
expect_exit 2 "config.moe.yaml:2: --moe-router-topk: srunway-train trains dense models: it has no mixture of experts" \
  "$kTrain" --config "$kWork/config.moe.yaml" --mock-data
# A list for a one-value flag (CLI11 said "not expected: 0.002"), a key given twice (YAML forbids it; the first
# won, silently) and a nested config (ignored) are each a line naming the file and line.
printf 'mock_data: true\nlr: [0.1, 0.002]\n' >"$kWork/config.list.yaml"
expect_exit 2 "config.list.yaml:2: 'lr' takes one value, not a list" "$kTrain" --config "$kWork/config.list.yaml"
printf 'mock_data: true\nlr: 0.1\nmock-data: false\n' >"$kWork/config.twice.yaml"
expect_exit 2 "config.twice.yaml:3: 'mock-data' is given twice \(first on line 1\)" \
  "$kTrain" --config "$kWork/config.twice.yaml"
# A switch takes true or false (5 was "not expected"); a flag with a value takes false as its value (it was dropped,
# training with the default learning rate).
printf 'mock_data: 5\n' >"$kWork/config.switch.yaml"
expect_exit 2 "config.switch.yaml:1: 'mock-data' is a switch: true or false, not '5'" \
  "$kTrain" --config "$kWork/config.switch.yaml"
printf 'mock_data: true\nlr: false\n' >"$kWork/config.false.yaml"
expect_exit 2 "--lr" "$kTrain" --config "$kWork/config.false.yaml"
# A config that is a directory, a list or mapping as a key or list item: one line, exit 2 (they threw past every
# handler: abort, exit 134); a missing one said "0:0: bad file".
expect_exit 2 "--config: read $kWork: Is a directory" "$kTrain" --config "$kWork"
expect_exit 2 "--config: open $kWork/none.yaml: No such file or directory" "$kTrain" --config "$kWork/none.yaml"
printf 'mock_data: true\n[lr, x]: 1\n' >"$kWork/config.key.yaml"
expect_exit 2 "config.key.yaml:2:1: expected a flag name or value, not a list" "$kTrain" --config "$kWork/config.key.yaml"
printf 'mock_data: true\ndata_path: [1, {a: 1}]\n' >"$kWork/config.item.yaml"
expect_exit 2 "config.item.yaml:2:16: expected a flag name or value, not a mapping" \
  "$kTrain" --config "$kWork/config.item.yaml"
python3 -c "print('lr: ' + '[' * 5000)" >"$kWork/config.deep.yaml"
expect_exit 2 "config.deep.yaml:[0-9]+:[0-9]+: nested too deep for a mapping of flag: value" \
  "$kTrain" --config "$kWork/config.deep.yaml"
printf 'mock_data: true\nconfig: other.yaml\n' >"$kWork/config.nested.yaml"
expect_exit 2 "config.nested.yaml:2: 'config' cannot be set in a config file" \
  "$kTrain" --config "$kWork/config.nested.yaml"
expect_exit 2 "not a multiple of --micro-batch-size" "$kTrain" "${common[@]}" --mock-data --global-batch-size 3
expect_exit 1 "no such dataset" "$kTrain" "${common[@]}" --data-path "$kWork/missing"
cp "$kWork/data.bin" "$kWork/corrupt.bin"
head -c 40 "$kWork/data.idx" >"$kWork/corrupt.idx"
expect_exit 1 "corrupt.idx: truncated" "$kTrain" "${common[@]}" --data-path "$kWork/corrupt" --split 1
expect_exit 1 "data.bin: token [0-9]+ in sample [0-9]+ is not below the model's vocabulary size 64 \\(--vocab-size sets it" \
  "$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --vocab-size 64 --train-steps 2
expect_exit 1 "n_layer is 2 in the checkpoint and 3 here" \
  "$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --num-layers 3 --load "$kWork/ckpt"
# A run of more samples than its index from --data-path can hold in memory (its documents of every epoch: here one
# document, 1.2e10 epochs of it; 64-bit past 2^32) is one line naming the flags, exit 1: it died in the allocator
# (std::bad_alloc, 134). Beyond 64 bits, exit 2 (it overflowed).
expect_exit 1 "--train-steps 1000000000000 x global batch 2 = 2000000000000 samples: their index from --data-path needs 94.33 GiB of host memory, more than the [0-9.]+ GiB this rank may hold \\(.*\\); train fewer steps" \
  "$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --train-steps 1000000000000
expect_exit 2 "--train-steps 9223372036854775807 x 2 samples of 33 tokens is more than 64 bits count" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 9223372036854775807
# A --save that cannot be created ends the run before its first step (it failed at the first save, hours in).
expect_exit 1 "--save $kWork/data.bin/ckpt: cannot create the directory: Not a directory" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --save "$kWork/data.bin/ckpt" --save-interval 1
grep -q '^step' "$kWork/out" && fail "a run whose --save cannot be created trained: $(cat "$kWork/out")"
# So are what is written once training has ended (an --export into a missing directory, or a --sample without a
# tokenizer, failed after the whole run) and counts that cannot be negative (they were taken and ignored).
expect_exit 1 "--export $kWork/none/model.safetensors: cannot write in $kWork/none: No such file or directory" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --export "$kWork/none/model.safetensors"
grep -q '^step' "$kWork/out" && fail "a run whose --export cannot be written trained: $(cat "$kWork/out")"
expect_exit 2 "--export $kWork is a directory: name the file to write" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --export "$kWork"
expect_exit 2 "--sample needs the dataset's tokenizer: --data-path: no dataset given" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --sample 5
grep -q '^step' "$kWork/out" && fail "a run whose --sample has no tokenizer trained: $(cat "$kWork/out")"
expect_exit 2 "--sample must be at least 0, not -3" "$kTrain" "${common[@]}" --mock-data --sample -3
expect_exit 2 "--sample-top-k must be at least 1, not 0" \
  "$kTrain" "${common[@]}" --mock-data --sample 1 --sample-top-k 0
# The options of --dry-run and of --sample were taken and ignored without them (--nodes 2 trained on one node).
for flag_value in "--nodes 2:--dry-run" "--gpus-per-node 4:--dry-run" "--assume-mfu 0.4:--dry-run" \
    "--gpu-memory-gb 40:--dry-run" "--sample-top-k 5:--sample" "--sample-prompt The:--sample" \
    "--vocab-file v.json:--merge-file" "--merge-file m.txt:--vocab-file"; do
  read -ra words <<<"${flag_value%%:*}"
  expect_exit 2 "^srunway-train: ${words[0]} requires ${flag_value##*:} \(see --help\)$" \
    "$kTrain" "${common[@]}" --mock-data "${words[@]}"
done
# Megatron's flags as its scripts pass them: what srunway-train does is taken (--bf16, parallel sizes of 1, the data's
# tokenizer), the rest refused by name; each was an unknown argument ("not expected: 2 --tensor-model-parallel-size"),
# and --vocab-file needed --sample.
expect_exit 2 "^srunway-train\\[.*\\] error: --tensor-model-parallel-size 2: srunway-train is data parallel only, every rank holding the whole model \\(--use-distributed-optimizer shards the optimizer state over the ranks\\): give 1 or leave it out$" \
  "$kTrain" "${common[@]}" --mock-data --tensor-model-parallel-size 2
expect_exit 2 "--pipeline-model-parallel-size 4: srunway-train is data parallel only" \
  "$kTrain" "${common[@]}" --mock-data --pipeline-model-parallel-size 4
expect_exit 2 "--fp16: fp16 training with loss scaling is not supported: srunway-train trains in bf16 on GPUs" \
  "$kTrain" "${common[@]}" --mock-data --fp16
expect_exit 1 "--vocab-file and --merge-file: .*missing.vocab.json" "$kTrain" "${common[@]}" --mock-data \
  --vocab-file "$kWork/missing.vocab.json" --merge-file "$kWork/data.merges.txt"
tokens=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$kWork/data.vocab.json")
expect_exit 2 "--vocab-file $kWork/data.vocab.json holds $tokens tokens, more than the model's vocabulary of 64: give --vocab-size $(((tokens + 127) / 128 * 128))" \
  "$kTrain" "${common[@]}" --mock-data --vocab-size 64 --vocab-file "$kWork/data.vocab.json" --merge-file "$kWork/data.merges.txt"
grep -q '^step' "$kWork/out" && fail "a run whose tokenizer does not fit the model trained: $(cat "$kWork/out")"
# With them, Megatron's choices among implementations of the same model (each was an unknown argument).
"$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --train-steps 2 --tensor-model-parallel-size 1 \
  --pipeline-model-parallel-size 1 --context-parallel-size 1 --bf16 --tokenizer-type GPT2BPETokenizer \
  --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt" --use-mcore-models --transformer-impl transformer_engine --use-flash-attn \
  --attention-backend auto --distributed-backend nccl --overlap-grad-reduce --sequence-parallel --openai-gelu \
  --attention-softmax-in-fp32 --accumulate-allreduce-grads-in-fp32 --no-masked-softmax-fusion \
  --no-bias-dropout-fusion --no-gradient-accumulation-fusion --no-persist-layer-norm --no-rope-fusion \
  --log-throughput --tensorboard-queue-size 1000 --num-workers 2 --no-mmap-bin-files --exit-signal-handler \
  --dataloader-type single --kv-channels 16 --rotary-percent 1.0 --log-batch-size-to-tensorboard \
  --no-async-tensor-model-parallel-allreduce --apply-query-key-layer-scaling --manual-gc --use-legacy-models \
  --legacy-tokenizer --cross-entropy-loss-fusion --ddp-average-in-collective --check-for-nan-in-loss-and-grad \
  --optimizer adam --no-create-attention-mask-in-dataloader --async-save --ckpt-fully-parallel-save \
  --no-ckpt-fully-parallel-save --ckpt-fully-parallel-load --ckpt-assume-constant-structure --auto-detect-ckpt-format \
  --override-opt_param-scheduler --use-cpu-initialization --no-barrier-with-level-1-timing --mmap-bin-files \
  --num-dataset-builder-threads 4 --empty-unused-memory-level 0 --main-grads-dtype fp32 --main-params-dtype fp32 \
  --exp-avg-dtype fp32 --exp-avg-sq-dtype fp32 --no-log-loss-scale-to-tensorboard --log-straggler \
  --tp-comm-overlap --deterministic-mode --tiktoken-pattern v2 --disable-bf16-reduced-precision-matmul \
  >"$kWork/out" 2>"$kWork/err" ||
  fail "Megatron's flags with the values srunway-train takes: $(cat "$kWork/err")"
grep -q '^step      2/2 | .* tok/s | [0-9.e+-]* TFLOP/s per GPU | MFU' "$kWork/out" ||
  fail "Megatron's flags: no step line with --log-throughput's TFLOP/s: $(cat "$kWork/out")"
grep -q "info: --bf16: the CPU path computes in fp32" "$kWork/err" || fail "no --bf16 line on the CPU: $(cat "$kWork/err")"
grep -q "info: --disable-bf16-reduced-precision-matmul: the CPU path sums in fp32 throughout" "$kWork/err" ||
  fail "no --disable-bf16-reduced-precision-matmul line on the CPU: $(cat "$kWork/err")"
# Megatron's flags of 2020-2022, as its published scripts of then give them: the older names of flags above
# (--checkpoint-activations is --recompute-activations, --model-parallel-size --tensor-model-parallel-size,
# --use-checkpoint-lr-scheduler and --override-lr-scheduler the opt_param-scheduler ones) and choices among
# implementations it has since dropped; --data-impl lazy (an index layout srunway-train does not read) is refused.
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --checkpoint-activations --checkpoint-num-layers 1 \
  --model-parallel-size 1 \
  --override-lr-scheduler --data-impl mmap --DDP-impl local --use-contiguous-buffers-in-local-ddp \
  --no-query-key-layer-scaling --async-tensor-model-parallel-allreduce --distribute-checkpointed-activations \
  --no-scaled-masked-softmax-fusion --scaled-upper-triang-masked-softmax-fusion >"$kWork/out" 2>"$kWork/err" ||
  fail "Megatron's older flags: $(cat "$kWork/err")"
grep -q "^step      2/2 " "$kWork/out" || fail "Megatron's older flags: $(cat "$kWork/out")"
grep -q "info: activations: only each layer's input is kept" "$kWork/err" ||
  fail "--checkpoint-activations recomputes as --recompute-activations: $(cat "$kWork/err")"
expect_exit 2 "--tensor-model-parallel-size 2: srunway-train is data parallel only" "$kTrain" "${common[@]}" \
  --mock-data --model-parallel-size 2
expect_exit 2 "--override-lr-scheduler excludes --use-checkpoint-opt_param-scheduler" "$kTrain" "${common[@]}" \
  --mock-data --use-checkpoint-lr-scheduler --override-lr-scheduler
expect_exit 2 "--data-impl: lazy not in \{mmap,infer\}" "$kTrain" "${common[@]}" --mock-data --data-impl lazy
expect_exit 2 "--activations-checkpoint-method uniform --checkpoint-num-layers 2: srunway-train recomputes every" \
  "$kTrain" "${common[@]}" --mock-data --checkpoint-activations --checkpoint-num-layers 2
expect_exit 2 "--activations-checkpoint-method requires --recompute-activations" "$kTrain" "${common[@]}" \
  --mock-data --activations-checkpoint-method uniform
# Megatron's flags that change nothing here, as its scripts pass them: fp16's loss scaling (bf16 needs none),
# --no-initialization, NVIDIA's one-logger telemetry, --rerun-mode validate_results (its default); the older
# --activations-checkpoint-method (block over both layers: each recomputed from its input); --fp32-residual-connection
# on CPUs, where everything is fp32; --logging-level 20 (info); --straggler-minmax-count (one rank: it is both).
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --bf16 --loss-scale 4096 --initial-loss-scale 65536 \
  --min-loss-scale 1 --loss-scale-window 1000 --hysteresis 2 --no-initialization --no-one-logger --one-logger-async \
  --one-logger-project p --one-logger-run-name r --app-tag-run-name a --app-tag-run-version 1.0 \
  --rerun-mode validate_results --device cpu --fp32-residual-connection --checkpoint-activations \
  --activations-checkpoint-method block --checkpoint-num-layers 2 --logging-level 20 --straggler-minmax-count 1 \
  --metrics-file "$kWork/minmax.jsonl" >"$kWork/out" 2>"$kWork/err" ||
  fail "Megatron's taken flags: $(cat "$kWork/err")"
grep -q "^step      2/2 " "$kWork/out" || fail "Megatron's taken flags: $(cat "$kWork/out")"
grep -q "info: activations: only each layer's input is kept" "$kWork/err" ||
  fail "--activations-checkpoint-method block recomputes: $(cat "$kWork/err")"
grep -qE "info: step 2 compute: slowest rank 0 on [^ ]+ [0-9.]+ ms; fastest rank 0 on " "$kWork/err" ||
  fail "--straggler-minmax-count 1: $(cat "$kWork/err")"
grep -q '"slowest_ranks":\[0\],"fastest_ranks":\[0\]' "$kWork/minmax.jsonl" || fail "$(cat "$kWork/minmax.jsonl")"
# --init-method-xavier-uniform: every weight matrix U(-a, a), a = sqrt(6 / (rows + columns)), which its largest
# value nears (a step at rate 0 exports the initial weights); Megatron's default N(0, 0.02) stays well inside.
for init in xavier normal; do
  "$kTrain" "${common[@]}" --mock-data --train-steps 1 --lr 0 --min-lr 0 --export "$kWork/init-$init.safetensors" \
    $([[ $init == xavier ]] && echo --init-method-xavier-uniform) >/dev/null 2>"$kWork/err" ||
    fail "--init-method-xavier-uniform: $(cat "$kWork/err")"
done
python3 - "$kWork/init-xavier.safetensors" "$kWork/init-normal.safetensors" <<'PY' ||
import array, json, math, struct, sys
def largest(path):  # each matrix's largest |value| over its bound
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    out = {}
    for name, t in json.loads(data[8:8 + n]).items():
        if name == "__metadata__" or len(t["shape"]) != 2: continue
        values = array.array("f"); values.frombytes(data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]])
        out[name] = max(abs(v) for v in values) / math.sqrt(6 / sum(t["shape"]))
    return out
xavier, normal = largest(sys.argv[1]), largest(sys.argv[2])
assert len(xavier) == 10 and all(0.95 < r <= 1 for r in xavier.values()), xavier
assert all(r < 0.9 for r in normal.values()), normal
PY
  fail "--init-method-xavier-uniform"
# --embedding-init-method-std S: the embedding tables ~ N(0, S) (1 here: their root mean square near 1), trained
# without weight decay: with S the preset's own 0.02 (so the same initialisation) and a strong decay, one step
# leaves every other tensor as the plain run's, bit for bit, and the tables less decayed.
"$kTrain" "${common[@]}" --mock-data --train-steps 1 --lr 0 --min-lr 0 --embedding-init-method-std 1 \
  --export "$kWork/init-spiky.safetensors" >/dev/null 2>"$kWork/err" ||
  fail "--embedding-init-method-std: $(cat "$kWork/err")"
for init in plain spiky; do
  "$kTrain" "${common[@]}" --mock-data --train-steps 1 --lr 1e-2 --weight-decay 0.5 \
    --export "$kWork/decay-$init.safetensors" $([[ $init == spiky ]] && echo --embedding-init-method-std 0.02) \
    >/dev/null 2>"$kWork/err" || fail "--embedding-init-method-std: $(cat "$kWork/err")"
done
python3 - "$kWork/init-spiky.safetensors" "$kWork/decay-plain.safetensors" "$kWork/decay-spiky.safetensors" \
  <<'PY' ||
import array, json, math, struct, sys
def tensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    out = {}
    for name, t in json.loads(data[8:8 + n]).items():
        if name == "__metadata__": continue
        out[name] = array.array("f")
        out[name].frombytes(data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]])
    return out
rms = {k: math.sqrt(sum(v * v for v in t) / len(t)) for k, t in tensors(sys.argv[1]).items()}
assert 0.95 < rms["wte"] < 1.05 and 0.95 < rms["wpe"] < 1.05, rms
assert all(r < 0.1 for k, r in rms.items() if k not in ("wte", "wpe") and "norm" not in k), rms
plain, spiky = tensors(sys.argv[2]), tensors(sys.argv[3])
for name in plain:
    if name in ("wte", "wpe"):
        assert sum(map(abs, spiky[name])) > sum(map(abs, plain[name])), name
    else:
        assert plain[name] == spiky[name], name
PY
  fail "--embedding-init-method-std"
# Megatron's flags for pipeline stages, tensor- and context-parallel communication, CUDA graphs and the like, which
# change nothing with the whole model on every rank; --ddp-num-buckets N cuts the gradients into about N buckets.
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --defer-embedding-wgrad-compute --no-align-grad-reduce \
  --no-align-param-gather --overlap-param-gather-with-optimizer-step --no-scatter-gather-tensors-in-pipeline \
  --wgrad-deferral-limit 0 --clone-scatter-output-in-embedding --tp-comm-overlap-cfg tp.yaml \
  --disable-tp-comm-overlap-ag --disable-tp-comm-overlap-rs --tp-comm-overlap-rs-dgrad --disable-tp-comm-bulk-dgrad \
  --disable-tp-comm-bulk-wgrad --disable-tp-comm-split-ag --disable-tp-comm-split-rs --tp-comm-bootstrap-backend nccl \
  --cp-comm-type p2p --enable-gloo-process-groups --ddp-pad-buckets-for-high-nccl-busbw \
  --num-distributed-optimizer-instances 1 --train-sync-interval 10 --cross-entropy-fusion-impl te --local-rank 0 \
  --dist-ckpt-strictness assume_ok_unexpected --dist-ckpt-format torch_dist --tiktoken-num-special-tokens 1000 \
  --tiktoken-special-tokens '<unk>' '<s>' --sgd-momentum 0.9 --disable-msc --te-rng-tracker --inference-rng-tracker \
  --enable-cuda-graph --external-cuda-graph --cuda-graph-warmup-steps 3 --ddp-num-buckets 4 \
  --use-mp-args-from-checkpoint-args --use-precision-aware-optimizer --delay-wgrad-compute \
  --no-use-tokenizer-model-from-checkpoint-args --use-nccl-ub --use-sharp --cuda-graph-impl local \
  --cuda-graph-scope attn mlp --cuda-graph-modules attn --high-priority-stream-groups dp ep \
  --use-persistent-ckpt-worker --async-strategy mcore --dist-ckpt-save-pre-mcore-014 --disable-gloo-process-groups \
  --log-memory-interval 1000 --result-rejected-tracker-filename rejected.txt --override-opt-param-scheduler \
  --recompute-granularity selective --recompute-modules core_attn moe mlp \
  >"$kWork/out" 2>"$kWork/err" || fail "Megatron's scheduling flags: $(cat "$kWork/err")"
grep -q "^step      2/2 " "$kWork/out" || fail "Megatron's scheduling flags: $(cat "$kWork/out")"
grep -q "gradients in 4 buckets" "$kWork/err" || fail "--ddp-num-buckets 4: $(grep model "$kWork/err")"
grep -q "info: --recompute-modules mlp: srunway-train recomputes no part of a layer alone" "$kWork/err" ||
  fail "--recompute-modules mlp: $(cat "$kWork/err")"
expect_exit 2 "--ddp-bucket-size excludes --ddp-num-buckets" "$kTrain" "${common[@]}" --mock-data \
  --ddp-num-buckets 4 --ddp-bucket-size 1000
expect_exit 2 "--num-distributed-optimizer-instances: Value 2 not in range 1 to 1" "$kTrain" "${common[@]}" \
  --mock-data --num-distributed-optimizer-instances 2
# And those for models, parallelism and tools srunway-train has none of, each refused by name.
for refused in "--encoder-num-layers 4:trains decoder-only models: give --num-layers" \
    "--hybrid-attention-ratio 0.5:trains decoder-only GPT and Llama models" \
    "--retro-project-dir x:trains decoder-only GPT and Llama models" "--batch-size 8:give --micro-batch-size" \
    "--warmup 0.01:give --lr-warmup-fraction" "--yaml-cfg x.yaml:give --config" \
    "--use-torch-fsdp2:shards only the optimizer state" "--optimizer-cpu-offload:nothing offloaded to the host" \
    "--fp16-lm-cross-entropy:computes the cross-entropy in fp32" "--inprocess-restart:no in-process restart" \
    "--enable-ft-package:no in-process restart" "--log-energy:energy counters" \
    "--data-parallel-random-init:the same parameters" "--ckpt-convert-format torch:converts no checkpoints" \
    "--nccl-communicator-config-path x.yaml:configures NCCL from the environment" \
    "--num-layers-at-start-in-bf16 1:no FP8 training" "--overlap-moe-expert-parallel-comm:no mixture of experts" \
    "--sft:no SFT datasets" "--onnx-safe:not through PyTorch's ONNX exporter" "--lazy-mpu-init:its own tests" \
    "--test-mode:its own tests" "--adlr-autoresume-interval 1000:no ADLR autoresume" \
    "--config-logger-dir x:logs no module configs" "--run-workload-inspector-server:no workload inspector" \
    "--fp4-format e2m1:no FP4 training" \
    "--te-precision-config-file te.cfg:no FP4 training" "--fp8-param-storage:no FP8 training" \
    "--fine-grained-activation-offloading:nothing offloaded" "--offload-modules moe_act:nothing offloaded" \
    "--mamba-num-heads 8:decoder-only GPT and Llama" "--use-fused-weighted-squared-relu:no mixture of experts" \
    "--phase-transition-iterations 100:one blend for the whole run" \
    "--sft-tokenizer-prompt-format identity:no SFT datasets"; do
  expect_exit 2 "${refused%%[ :]*}: .*${refused#*:}" "$kTrain" "${common[@]}" --mock-data \
    ${refused%%:*}
done
# --logging-level 30 (Python's WARNING): the step lines and no info lines.
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --logging-level 30 >"$kWork/out" 2>"$kWork/err" ||
  fail "--logging-level 30: $(cat "$kWork/err")"
grep -q "^step      2/2 " "$kWork/out" || fail "--logging-level 30: $(cat "$kWork/out")"
[[ ! -s $kWork/err ]] || fail "--logging-level 30 printed: $(cat "$kWork/err")"
# Megatron's flags for what srunway-train has none of, each refused by name (exit 2), not as an unknown argument.
expect_exit 2 "^srunway-train.* error: --fp16: fp16 training with loss scaling is not supported" "$kTrain" \
  "${common[@]}" --mock-data --fp16 --loss-scale-window 1000 --initial-loss-scale 65536
expect_exit 2 "--num-experts: srunway-train trains dense models: it has no mixture of experts" "$kTrain" \
  "${common[@]}" --mock-data --num-experts 8 --moe-router-topk 2
expect_exit 2 "--moe-grouped-gemm: srunway-train trains dense models" "$kTrain" "${common[@]}" --mock-data \
  --moe-grouped-gemm
expect_exit 2 "--multi-latent-attention: srunway-train has no multi-latent attention" "$kTrain" "${common[@]}" \
  --mock-data --multi-latent-attention --q-lora-rank 1536
expect_exit 2 "--mtp-num-layers: srunway-train has no multi-token prediction" "$kTrain" "${common[@]}" \
  --mock-data --mtp-num-layers=1
expect_exit 2 "--num-layers-per-virtual-pipeline-stage: srunway-train is data parallel only" "$kTrain" \
  "${common[@]}" --mock-data --num-layers-per-virtual-pipeline-stage 2
expect_exit 2 "--check-for-spiky-loss: srunway-train has no rerun state machine" "$kTrain" "${common[@]}" \
  --mock-data --check-for-spiky-loss
expect_exit 2 "--rerun-mode report_stats: srunway-train has no rerun state machine" "$kTrain" "${common[@]}" \
  --mock-data --rerun-mode report_stats
expect_exit 2 "--use-pytorch-profiler: srunway-train has no PyTorch profiler: --profile" "$kTrain" "${common[@]}" \
  --mock-data --use-pytorch-profiler
expect_exit 2 "--record-memory-history: srunway-train has no PyTorch allocator" "$kTrain" "${common[@]}" \
  --mock-data --record-memory-history
expect_exit 2 "--apply-residual-connection-post-layernorm: srunway-train's layers add each norm's input" "$kTrain" \
  "${common[@]}" --mock-data --apply-residual-connection-post-layernorm
expect_exit 2 "--straggler-ctrlr-port: srunway-train has no port" "$kTrain" "${common[@]}" --mock-data \
  --straggler-ctrlr-port 65535
expect_exit 2 "--fp32-residual-connection: on GPUs srunway-train's residual stream is bf16" "$kTrain" \
  "${common[@]}" --mock-data --fp32-residual-connection
expect_exit 2 "not expected: --no-such-flag 3" "$kTrain" "${common[@]}" --mock-data --no-such-flag 3
# Those that name another implementation than srunway-train's are refused, with what it takes.
expect_exit 2 "--exp-avg-dtype: bf16 not in \{fp32\}" "$kTrain" "${common[@]}" --mock-data --exp-avg-dtype bf16
# --grad-reduce-in-bf16 is taken (its reduction: grad_reducer_test, train_data_parallel, train_gpu_ranks), but not
# beside the flag that asks for the opposite.
expect_exit 2 "--grad-reduce-in-bf16 reduces the gradients in bf16, --accumulate-allreduce-grads-in-fp32 in fp32: give one" \
  "$kTrain" "${common[@]}" --mock-data --grad-reduce-in-bf16 --accumulate-allreduce-grads-in-fp32
# Megatron's FP8 flags (its H100 scripts pass them), each an unknown argument before.
expect_exit 2 "--fp8-format hybrid: srunway-train has no FP8 training \(Transformer Engine's recipes\): its GEMMs run in bf16" \
  "$kTrain" "${common[@]}" --mock-data --fp8-format hybrid --fp8-amax-history-len 1024
expect_exit 2 "--fp8-param-gather: srunway-train has no FP8 training" "$kTrain" "${common[@]}" --mock-data \
  --fp8-param-gather
# --no-log-learning-rate-to-tensorboard: TensorBoard's scalars without learning-rate.
for lr_tag in with without; do
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --tensorboard-dir "$kWork/tb-$lr_tag" \
    $([[ $lr_tag == without ]] && echo --no-log-learning-rate-to-tensorboard) >/dev/null 2>"$kWork/err" ||
    fail "TensorBoard $lr_tag learning-rate: $(cat "$kWork/err")"
done
grep -qa "learning-rate" "$kWork"/tb-with/events.* || fail "no learning-rate in TensorBoard's events"
grep -qa "learning-rate" "$kWork"/tb-without/events.* && fail "--no-log-learning-rate-to-tensorboard wrote learning-rate"
grep -qa "lm loss" "$kWork"/tb-without/events.* || fail "--no-log-learning-rate-to-tensorboard wrote no lm loss"
# Megatron's --train-data-path and --valid-data-path, in place of --data-path and --split: each split's data whole.
# Training is that of --data-path D --split 1,0,0 step for step, the validation reads the other dataset (its loss
# is not D's), and without --valid-data-path no validation runs, which is said. Each was an unknown argument.
for i in $(seq 1 100); do echo "another text $i: delta epsilon $((i % 5)) zeta"; done >"$kWork/valid.txt"
"$kPrep" --input "$kWork/valid.txt" --output-prefix "$kWork/valid" --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt" --quiet >/dev/null || fail "srunway-prep of the validation text"
per_split=("$kTrain" "${common[@]}" --train-steps 4 --eval-interval 4 --eval-iters 2)
"${per_split[@]}" --train-data-path "$kWork/data" --valid-data-path "$kWork/valid" >"$kWork/per-split" 2>&1 ||
  fail "--train-data-path: $(cat "$kWork/per-split")"
"${per_split[@]}" --data-path "$kWork/data" --split 1,0,0 --eval-interval 0 >"$kWork/whole" 2>&1 ||
  fail "--split 1,0,0: $(cat "$kWork/whole")"
"${per_split[@]}" --train-data-path "$kWork/data" --valid-data-path "$kWork/data" >"$kWork/valid-d" 2>&1 ||
  fail "--valid-data-path D: $(cat "$kWork/valid-d")"
diff <(grep '^step' "$kWork/per-split" | cut -d'|' -f1-4) <(grep '^step' "$kWork/whole" | cut -d'|' -f1-4) ||
  fail "--train-data-path D did not train as --data-path D --split 1,0,0"
valid_loss() { sed -n 's/^validation at step 4 | loss //p' "$1"; }
[[ -n $(valid_loss "$kWork/per-split") && $(valid_loss "$kWork/per-split") != "$(valid_loss "$kWork/valid-d")" ]] ||
  fail "the validation did not read --valid-data-path: $(valid_loss "$kWork/per-split") vs $(valid_loss "$kWork/valid-d")"
"${per_split[@]}" --train-data-path "$kWork/data" >"$kWork/out" 2>&1 || fail "$(cat "$kWork/out")"
grep -q "info: --train-data-path without --valid-data-path: no validation runs" "$kWork/out" &&
  ! grep -q '^validation' "$kWork/out" || fail "validation without --valid-data-path: $(cat "$kWork/out")"
expect_exit 2 "--train-data-path excludes --split" "${per_split[@]}" --train-data-path "$kWork/data" --split 1,1,0
# Megatron's --per-split-data-args-path (each split's words from a JSON file, a list or one string) trains and
# validates as the two flags, and its --data-args-path (--data-path's words from a file) as --data-path, step for
# step; an unreadable or malformed file is one line naming it, exit 1.
printf '{"train": ["1.0", "%s"], "valid": "%s", "test": ["%s"]}\n' "$kWork/data" "$kWork/valid" "$kWork/valid" \
  >"$kWork/splits.json"
"${per_split[@]}" --per-split-data-args-path "$kWork/splits.json" >"$kWork/out" 2>&1 || fail "$(cat "$kWork/out")"
grep -q "info: --per-split-data-args-path $kWork/splits.json's test data: not read: srunway-train runs no test" \
  "$kWork/out" || fail "--per-split-data-args-path's test data: $(cat "$kWork/out")"
diff <(grep -E '^(step|validation)' "$kWork/out" | cut -d'|' -f1-4) \
  <(grep -E '^(step|validation)' "$kWork/per-split" | cut -d'|' -f1-4) ||
  fail "--per-split-data-args-path did not train as --train-data-path and --valid-data-path"
printf '  1.0\n%s\n' "$kWork/data" >"$kWork/data-args"
"${per_split[@]}" --data-args-path "$kWork/data-args" --split 1,0,0 --eval-interval 0 >"$kWork/out" 2>&1 ||
  fail "$(cat "$kWork/out")"
diff <(grep '^step' "$kWork/out" | cut -d'|' -f1-4) <(grep '^step' "$kWork/whole" | cut -d'|' -f1-4) ||
  fail "--data-args-path did not train as --data-path"
expect_exit 1 "--data-args-path: open $kWork/none: No such file or directory" "${per_split[@]}" \
  --data-args-path "$kWork/none"
: >"$kWork/empty-args"
expect_exit 1 "--data-args-path: $kWork/empty-args: holds no dataset" "${per_split[@]}" \
  --data-args-path "$kWork/empty-args"
echo '{"train": {"a": 1}}' >"$kWork/bad-splits.json"
expect_exit 1 "--per-split-data-args-path: .*bad-splits.json: key 'train' is object, not a list of words or a string" \
  "${per_split[@]}" --per-split-data-args-path "$kWork/bad-splits.json"
echo '{"valid": []}' >"$kWork/bad-splits.json"
expect_exit 1 "bad-splits.json: no training data \(key 'train'\)" "${per_split[@]}" \
  --per-split-data-args-path "$kWork/bad-splits.json"
expect_exit 2 "--split excludes --per-split-data-args-path" "${per_split[@]}" \
  --per-split-data-args-path "$kWork/splits.json" --split 1,1,0
expect_exit 2 "--valid-data-path requires --train-data-path" "${per_split[@]}" --mock-data --valid-data-path x
# Megatron's full recomputation of every layer is --recompute-activations; its selective one recomputes the attention
# scores, which fused attention keeps none of; partial recomputation is refused.
for flags_held in "--recompute-granularity full:1.61" \
    "--recompute-granularity full --recompute-method block --recompute-num-layers 24:1.61" \
    "--recompute-granularity selective:27.38"; do
  read -ra words <<<"${flags_held%%:*}"
  "$kTrain" --preset gpt3-5b --dry-run --micro-batch-size 4 --gpu-memory-gb 1000 "${words[@]}" >"$kWork/out" 2>&1 ||
    fail "${words[*]}: $(cat "$kWork/out")"
  grep -q "^  activations *${flags_held##*:} GB" "$kWork/out" || fail "${words[*]}: $(grep activations "$kWork/out")"
done
expect_exit 2 "--recompute-method uniform --recompute-num-layers 2: srunway-train recomputes every layer from its own input" \
  "$kTrain" "${common[@]}" --mock-data --recompute-granularity full --recompute-method uniform --recompute-num-layers 2
# --kv-channels: heads of another width than --hidden-size / --num-attention-heads train (their losses differ from the
# plain model's, which --kv-channels 16, gpt-tiny's own width, gives bit for bit), the checkpoint keeps the width (a
# resume without the flag is refused naming it), and --use-checkpoint-args takes the flag only where it agrees.
for kv in "" 16 32; do
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 ${kv:+--kv-channels $kv} --metrics-file "$kWork/kv$kv.jsonl" \
    --save "$kWork/kv$kv" >"$kWork/out" 2>"$kWork/err" || fail "--kv-channels $kv: $(cat "$kWork/err")"
done
diff <(losses "$kWork/kv.jsonl") <(losses "$kWork/kv16.jsonl") || fail "--kv-channels 16 changed gpt-tiny"
losses_differ "$kWork/kv32.jsonl" "$kWork/kv.jsonl" ||
  fail "--kv-channels 32 trained gpt-tiny's heads: $(losses "$kWork/kv32.jsonl")"
expect_exit 1 "kv_channels is 32 in the checkpoint and 0 here" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 3 --load "$kWork/kv32"
"$kTrain" --mock-data --use-checkpoint-args --load "$kWork/kv32" --kv-channels 32 --train-steps 3 >"$kWork/out" \
  2>"$kWork/err" || fail "--use-checkpoint-args --kv-channels 32: $(cat "$kWork/err")"
expect_exit 2 "--kv-channels 16: the checkpoint's heads \(--use-checkpoint-args\) are 32 wide: give 32 or leave" \
  "$kTrain" --mock-data --use-checkpoint-args --load "$kWork/kv32" --kv-channels 16 --train-steps 3
rm -rf "$kWork"/kv{,16,32}{,.jsonl}
expect_exit 2 "--dataloader-type: cyclic not in \{single\}" "$kTrain" "${common[@]}" --mock-data --dataloader-type cyclic
# What it does not take is named in the order given (CLI11 named the words last first: "2 --router-topk 8 ...").
expect_exit 2 "^srunway-train: The following arguments were not expected: --experts 8 --router-topk 2 \(see --help\)$" \
  "$kTrain" "${common[@]}" --mock-data --experts 8 --router-topk 2
# Megatron's checkpoint formats are taken, a line saying what is written instead where something is saved or loaded
# (the Llama 3 scripts' block above); an unknown one is refused. Its other flags for what srunway-train does
# otherwise are refused saying what it does instead; its garbage collector's are taken (there is none).
"$kTrain" "${common[@]}" --mock-data --train-steps 1 --use-dist-ckpt --save "$kWork/dist-ckpt" >/dev/null \
  2>"$kWork/err" || fail "--use-dist-ckpt: $(cat "$kWork/err")"
grep -q "info: --use-dist-ckpt: srunway-train's checkpoints are its own (one shard per rank" "$kWork/err" ||
  fail "--use-dist-ckpt: $(cat "$kWork/err")"
[[ -s $kWork/dist-ckpt/latest_checkpointed_iteration.txt ]] || fail "--use-dist-ckpt: nothing saved"
rm -rf "$kWork/dist-ckpt"
"$kTrain" "${common[@]}" --mock-data --train-steps 1 --ckpt-format torch >/dev/null 2>"$kWork/err" ||
  fail "--ckpt-format torch: $(cat "$kWork/err")"
grep -q "ckpt-format" "$kWork/err" && fail "--ckpt-format without --save or --load: $(cat "$kWork/err")"
expect_exit 2 "--ckpt-format: pickle not in \{" "$kTrain" "${common[@]}" --mock-data --ckpt-format pickle
expect_exit 2 "^srunway-train\\[.*\\] error: --wandb-exp-name: srunway-train has no Weights & Biases client; its scalars go to --tensorboard-dir" \
  "$kTrain" "${common[@]}" --mock-data --wandb-exp-name run1
"$kTrain" "${common[@]}" --mock-data --train-steps 1 --manual-gc --manual-gc-interval 100 --no-manual-gc-eval \
  >/dev/null 2>"$kWork/err" || fail "Megatron's garbage collector flags: $(cat "$kWork/err")"
# Megatron computes the exact (erf) GELU without its bias-GELU fusion, unless --openai-gelu: so does srunway-train's
# GPT (its losses differ from the tanh form's), kept in the checkpoint (a resume without it refused naming it, and
# --use-checkpoint-args of a tanh GPT's with it refused).
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --no-bias-gelu-fusion --metrics-file "$kWork/erf.jsonl" \
  --save "$kWork/erf" >"$kWork/out" 2>"$kWork/err" || fail "--no-bias-gelu-fusion: $(cat "$kWork/err")"
grep -q "model gpt with exact GELU (2 layers" "$kWork/err" || fail "--no-bias-gelu-fusion's model: $(grep model "$kWork/err")"
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --metrics-file "$kWork/tanh.jsonl" >/dev/null 2>&1 ||
  fail "a GPT with GELU's tanh form"
losses_differ "$kWork/erf.jsonl" "$kWork/tanh.jsonl" ||
  fail "--no-bias-gelu-fusion trained the tanh form: $(losses "$kWork/erf.jsonl")"
expect_exit 1 "exact_gelu is true in the checkpoint and false here" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 3 --load "$kWork/erf"
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --no-bias-gelu-fusion --openai-gelu --dry-run >"$kWork/out" 2>&1
grep -q "^model gpt (2 layers" "$kWork/out" || fail "--openai-gelu beside --no-bias-gelu-fusion: $(head -1 "$kWork/out")"
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --save "$kWork/tanh" >/dev/null 2>&1 || fail "a tanh GPT's save"
expect_exit 2 "^srunway-train\\[.*\\] error: --no-bias-gelu-fusion: Megatron then computes the exact \\(erf\\) GELU, and the checkpoint's GPT \\(--use-checkpoint-args\\) the tanh form: leave it out$" \
  "$kTrain" --use-checkpoint-args --load "$kWork/tanh" --mock-data --train-steps 3 --no-bias-gelu-fusion
rm -rf "$kWork/erf" "$kWork/tanh" "$kWork/erf.jsonl" "$kWork/tanh.jsonl"
"$kTrain" --preset llama-tiny --seq-length 32 --no-bias-gelu-fusion --dry-run >"$kWork/out" 2>&1 ||
  fail "--no-bias-gelu-fusion of a Llama (no GELU): $(cat "$kWork/out")"
expect_exit 2 "--overlap-param-gather requires --use-distributed-optimizer" \
  "$kTrain" "${common[@]}" --mock-data --overlap-param-gather
expect_exit 2 "--no-overlap-grad-reduce excludes --overlap-grad-reduce" \
  "$kTrain" "${common[@]}" --mock-data --overlap-grad-reduce --no-overlap-grad-reduce
expect_exit 2 "--transformer-impl: inference not in" "$kTrain" "${common[@]}" --mock-data --transformer-impl inference
# Without --preset or --vocab-size the vocabulary is the tokenizer's, padded to --make-vocab-size-divisible-by (128),
# as Megatron takes it; such a run trains on the data.
for multiple in 128 64; do
  "$kTrain" --data-path "$kWork/data" --split 1 --seq-length 32 --vocab-file "$kWork/data.vocab.json" \
    --merge-file "$kWork/data.merges.txt" --make-vocab-size-divisible-by $multiple --dry-run >"$kWork/out" 2>&1
  grep -q "vocab $(((tokens + multiple - 1) / multiple * multiple)), seq 32)" "$kWork/out" ||
    fail "the tokenizer's $tokens tokens padded to a multiple of $multiple: $(head -1 "$kWork/out")"
done
"$kTrain" --data-path "$kWork/data" --split 1 --seq-length 32 --micro-batch-size 2 --train-steps 2 \
  --vocab-file "$kWork/data.vocab.json" --merge-file "$kWork/data.merges.txt" >"$kWork/out" 2>"$kWork/err" ||
  fail "a run whose vocabulary is its tokenizer's: $(cat "$kWork/err")"
# Megatron's --timing-log-level: at each log step the (min, max) over the ranks of each timer's mean ms per step,
# Megatron's names and layout; level 1 three timers, level 2 eight; with --log-timers-to-tensorboard each timer's
# NAME-time too.
for level in 1 2; do
  rm -rf "$kWork/timers-tb"
  "$kTrain" "${common[@]}" --mock-data --train-steps 4 --log-interval 2 --timing-log-level $level \
    --tensorboard-dir "$kWork/timers-tb" --log-timers-to-tensorboard >"$kWork/timers" 2>"$kWork/err" ||
    fail "--timing-log-level $level: $(cat "$kWork/err")"
  blocks=$(grep -c '^(min, max) time across ranks (ms):$' "$kWork/timers" || true)
  ((blocks == 2)) || fail "level $level: $blocks timer blocks in 4 steps logged every 2: $(cat "$kWork/timers")"
  names=(forward-backward all-grads-sync optimizer)
  ((level == 2)) && names+=(forward-compute backward-compute batch-generator optimizer-clip-main-grad optimizer-inner-step)
  lines=$(grep -cE '^    [a-z-]+ \.+: \([0-9.]+, [0-9.]+\)$' "$kWork/timers" || true)
  ((lines == 2 * ${#names[@]})) || fail "level $level: $lines timer lines, not 2 x ${#names[@]}: $(cat "$kWork/timers")"
  for name in "${names[@]}"; do
    grep -qE "^    $name \.+: \([0-9.]+, [0-9.]+\)$" "$kWork/timers" || fail "no $name timer: $(cat "$kWork/timers")"
    grep -qa -- "$name-time" "$kWork/timers-tb"/events.out.tfevents.* || fail "no $name-time in TensorBoard's events"
  done
done
grep -q "forward-compute" "$kWork/timers" || fail "level 2 without forward-compute"
expect_exit 2 "--timing-log-level: Value 3 not in range 0 to 2" "$kTrain" "${common[@]}" --mock-data --timing-log-level 3
# --timing-log-option (Megatron's): max, the max alone; all, each rank's under each timer.
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --log-interval 2 --timing-log-level 1 --timing-log-option max \
  >"$kWork/timers" 2>"$kWork/err" || fail "--timing-log-option max: $(cat "$kWork/err")"
grep -qx 'max time across ranks (ms):' "$kWork/timers" && (($(grep -cE '^    [a-z-]+ \.+: [0-9.]+$' "$kWork/timers") == 3)) ||
  fail "--timing-log-option max: $(cat "$kWork/timers")"
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --log-interval 2 --timing-log-level 1 --timing-log-option all \
  >"$kWork/timers" 2>"$kWork/err" || fail "--timing-log-option all: $(cat "$kWork/err")"
grep -qx 'times across ranks (ms):' "$kWork/timers" && grep -qx '  optimizer:' "$kWork/timers" &&
  (($(grep -cE '^     rank  0: [0-9.]+$' "$kWork/timers") == 3)) || fail "--timing-log-option all: $(cat "$kWork/timers")"
echo "ok: --timing-log-level prints Megatron's timers, and writes them to TensorBoard"
# Megatron's --ddp-bucket-size counts parameters: the buckets of --bucket-size-mb at 4 bytes each.
"$kTrain" "${common[@]}" --mock-data --train-steps 1 --ddp-bucket-size 10000 >"$kWork/ddp" 2>&1 ||
  fail "--ddp-bucket-size: $(cat "$kWork/ddp")"
"$kTrain" "${common[@]}" --mock-data --train-steps 1 --bucket-size-mb 0.03814697265625 >"$kWork/mb" 2>&1 ||
  fail "--bucket-size-mb"
buckets=$(grep -o "gradients in [0-9]* buckets" "$kWork/ddp" || true)
[[ -n $buckets && $buckets != "gradients in 1 buckets" && $buckets == "$(grep -o "gradients in [0-9]* buckets" "$kWork/mb")" ]] ||
  fail "--ddp-bucket-size 10000 is not --bucket-size-mb at 4 bytes a parameter: $(cat "$kWork/ddp")"
expect_exit 2 "--ddp-bucket-size excludes --bucket-size-mb" \
  "$kTrain" "${common[@]}" --mock-data --ddp-bucket-size 10000 --bucket-size-mb 1
expect_exit 2 "--optimizer: sgd not in \\{adam\\}" "$kTrain" "${common[@]}" --mock-data --optimizer sgd
expect_exit 2 "error: --no-create-attention-mask-in-dataloader with --reset-attention-mask: Megatron then masks no documents" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type NullTokenizer --vocab-size 500 --reset-attention-mask \
  --no-create-attention-mask-in-dataloader
expect_exit 2 "--make-vocab-size-divisible-by requires --vocab-file" \
  "$kTrain" "${common[@]}" --mock-data --make-vocab-size-divisible-by 64
# Megatron's NullTokenizer (its mock-data scripts' --tokenizer-type NullTokenizer --vocab-size N): token ids below
# N, N the end of document, the model's vocabulary N + 1 padded; it trains, and its end of document is the one the
# document flags use. Without --vocab-size, with a --vocab-file, or with --sample (no text) it is one line.
for multiple in 128 1; do
  "$kTrain" --mock-data --seq-length 32 --tokenizer-type NullTokenizer --vocab-size 1000 \
    --make-vocab-size-divisible-by $multiple --dry-run >"$kWork/out" 2>&1
  grep -q "vocab $(((1001 + multiple - 1) / multiple * multiple)), seq 32)" "$kWork/out" ||
    fail "NullTokenizer's 1000 ids and its end of document padded to a multiple of $multiple: $(head -1 "$kWork/out")"
done
"$kTrain" "${common[@]}" --mock-data --train-steps 2 --tokenizer-type NullTokenizer --vocab-size 500 \
  --eod-mask-loss --reset-position-ids --reset-attention-mask >"$kWork/out" 2>"$kWork/err" ||
  fail "NullTokenizer with the document flags: $(cat "$kWork/err")"
grep -q "info: documents: each ends after token 500 (NullTokenizer's end of document)" "$kWork/err" ||
  fail "NullTokenizer's end of document: $(cat "$kWork/err")"
expect_exit 2 "error: --tokenizer-type NullTokenizer needs --vocab-size N \(token ids below N; N is the end of document\)" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type NullTokenizer
expect_exit 2 "error: --tokenizer-type NullTokenizer reads no --vocab-file: its tokens are the data's ids" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type NullTokenizer --vocab-size 500 \
  --vocab-file "$kWork/data.vocab.json" --merge-file "$kWork/data.merges.txt"
expect_exit 2 "error: --sample: --tokenizer-type NullTokenizer has no text to prompt with or decode into" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type NullTokenizer --vocab-size 500 --sample 4
expect_exit 2 "error: --tokenizer-type GPT2BPETokenizer requires --vocab-file \(and --merge-file\)" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type GPT2BPETokenizer
expect_exit 2 "--tokenizer-type SentencePieceTokenizer: srunway-train reads BPE \\(GPT2BPETokenizer: --vocab-file and --merge-file; HuggingFaceTokenizer: --tokenizer-model, a tokenizer.json; Llama2Tokenizer, GPTSentencePieceTokenizer: --tokenizer-model, a SentencePiece BPE model\\) or token ids \\(NullTokenizer\\) only" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type SentencePieceTokenizer
expect_exit 2 "error: --tokenizer-type HuggingFaceTokenizer requires --tokenizer-model" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-type HuggingFaceTokenizer --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt"
expect_exit 2 "--vocab-file excludes --tokenizer-model" \
  "$kTrain" "${common[@]}" --mock-data --tokenizer-model "$kWork" --vocab-file "$kWork/data.vocab.json" \
  --merge-file "$kWork/data.merges.txt"
expect_exit 2 "--keep-checkpoints must be at least 0, not -1" \
  "$kTrain" "${common[@]}" --mock-data --keep-checkpoints -1
# Megatron's --save-retain-interval 4 with a save every 2 steps of 10: steps 2 and 6 are deleted as the next saves
# land, 4, 8 and the newest, 10, stay.
"$kTrain" "${common[@]}" --mock-data --train-steps 10 --save "$kWork/retain" --save-interval 2 \
  --save-retain-interval 4 >/dev/null 2>"$kWork/err" || fail "--save-retain-interval: $(cat "$kWork/err")"
[[ $(cd "$kWork/retain" && echo iter_*) == "iter_0000004 iter_0000008 iter_0000010" ]] ||
  fail "--save-retain-interval 4 kept $(ls "$kWork/retain"): $(cat "$kWork/err")"
grep -q "info: deleted checkpoint $kWork/retain/iter_0000006 (--save-retain-interval 4)" "$kWork/err" ||
  fail "$(cat "$kWork/err")"
expect_exit 2 "--save-retain-interval 3 is not a multiple of --save-interval 2" \
  "$kTrain" "${common[@]}" --mock-data --save "$kWork/retain3" --save-interval 2 --save-retain-interval 3
expect_exit 2 "--keep-checkpoints excludes --save-retain-interval" \
  "$kTrain" "${common[@]}" --mock-data --save-retain-interval 4 --keep-checkpoints 2
# An entry of the --save directory that cannot be looked at (here a link to itself, named as a checkpoint) is no
# checkpoint to keep or delete: it ended the run after its first save with an uncaught filesystem_error (exit 134).
mkdir "$kWork/loop" && ln -s iter_0000099 "$kWork/loop/iter_0000099"
"$kTrain" "${common[@]}" --mock-data --train-steps 3 --save "$kWork/loop" --save-interval 1 --keep-checkpoints 1 \
  >/dev/null 2>"$kWork/err" || fail "a link loop in --save: $(cat "$kWork/err")"
[[ $(cd "$kWork/loop" && echo iter_*) == "iter_0000003 iter_0000099" ]] || fail "a link loop in --save: $(ls "$kWork/loop")"
expect_exit 1 "/dev/full: No space left on device" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --metrics-file /dev/full
# A metrics file whose disk fills mid-run kept the first part of the line that did not fit, and a resumed run's
# first line was appended to it: one corrupt line in the middle of the file. The line is now taken back out: the
# file stays whole JSON lines (a 12 KiB tmpfs, as above).
if unshare -m true 2>/dev/null; then
  mkdir -p "$kWork/metrics-tmpfs"
  rc=0
  unshare -m bash -c 'dir=$1; shift; mount -t tmpfs -o size=12k tmpfs "$dir" || exit 99
    "$@"; rc=$?; cp "$dir/m.jsonl" "$dir/../m-full.jsonl"; exit $rc' - "$kWork/metrics-tmpfs" \
    "$kTrain" "${common[@]}" --mock-data --train-steps 300 --metrics-file "$kWork/metrics-tmpfs/m.jsonl" \
    >/dev/null 2>"$kWork/err" || rc=$?
  if [[ $rc == 99 ]]; then
    echo "skipped: no tmpfs can be mounted here for the metrics file's full disk"
  else
    [[ $rc == 1 ]] || fail "metrics on a full disk: exit $rc: $(cat "$kWork/err")"
    grep -q "error: write metrics file $kWork/metrics-tmpfs/m.jsonl: No space left on device" "$kWork/err" ||
      fail "$(cat "$kWork/err")"
    python3 -c 'import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n"), "the last line is cut: " + repr(text[-80:])
print(len([json.loads(line) for line in text.splitlines()]))' "$kWork/m-full.jsonl" >"$kWork/lines" ||
      fail "the metrics file on the full disk is not whole JSON lines"
    (($(cat "$kWork/lines") > 10)) || fail "the metrics file holds $(cat "$kWork/lines") lines"
  fi
fi
expect_exit 3 "training diverged" "$kTrain" "${common[@]}" --mock-data --train-steps 30 --lr 1e30 --clip-grad 0
expect_exit 2 "--device: gpu not in" "$kTrain" "${common[@]}" --mock-data --device gpu
# Numbers no run can mean: one line each, before training (a negative --lr trained, its loss climbing).
expect_exit 2 "--micro-batch-size must be at least 1, not 0" "$kTrain" "${common[@]}" --mock-data --micro-batch-size 0
expect_exit 2 "--lr -0.001 and --min-lr 0 must satisfy 0 <= --min-lr <= --lr" \
  "$kTrain" "${common[@]}" --mock-data --lr -1e-3
expect_exit 2 "--lr 0.001 and --min-lr 0.01 must satisfy" "$kTrain" "${common[@]}" --mock-data --lr 1e-3 --min-lr 1e-2
expect_exit 2 "--adam-beta1 0.9 and --adam-beta2 1 must be in \\[0, 1\\)" \
  "$kTrain" "${common[@]}" --mock-data --adam-beta2 1
expect_exit 2 "--adam-eps 0 must be positive" "$kTrain" "${common[@]}" --mock-data --adam-eps 0
# Each names the one flag that is wrong, with its value (one line named four flags, or three values).
expect_exit 2 "--weight-decay -0.1 must be finite and not negative" \
  "$kTrain" "${common[@]}" --mock-data --weight-decay -0.1
expect_exit 2 "--clip-grad nan must not be negative" "$kTrain" "${common[@]}" --mock-data --clip-grad nan
expect_exit 2 "--attention-dropout 1 must be in \\[0, 1\\)" "$kTrain" "${common[@]}" --mock-data --attention-dropout 1
expect_exit 2 "--log-interval must be at least 1, not 0" "$kTrain" "${common[@]}" --mock-data --log-interval 0
expect_exit 2 "--save-interval must be at least 0, not -2" "$kTrain" "${common[@]}" --mock-data --save-interval -2
# "nan" and "inf" passed the checks whose comparisons they slip through: --bucket-size-mb nan went into a size_t
# (undefined behaviour), --init-std inf trained to a NaN loss (exit 3), --adam-eps inf made every update 0,
# --straggler-threshold nan named no straggler, --peak-tflops inf printed MFU 0.0%, and --dry-run multiplied
# --nodes by --gpus-per-node in an int that overflowed.
expect_exit 2 "--bucket-size-mb nan is out of range \(0, 1e6\]" "$kTrain" "${common[@]}" --mock-data --bucket-size-mb nan
expect_exit 2 "--init-std: 'inf' is not a finite number" "$kTrain" "${common[@]}" --mock-data --init-std inf
expect_exit 2 "--peak-tflops: 'inf' is not a finite number" "$kTrain" "${common[@]}" --mock-data --peak-tflops inf
expect_exit 2 "--adam-eps inf must be positive and finite" "$kTrain" "${common[@]}" --mock-data --adam-eps inf
expect_exit 2 "--straggler-threshold nan must be above 1" \
  "$kTrain" "${common[@]}" --mock-data --straggler-threshold nan
expect_exit 2 "--nodes: Value 100000000 not in range 1 to 1048576" \
  "$kTrain" --dry-run --nodes 100000000 --gpus-per-node 100000000
expect_exit 2 "--gpu-memory-gb positive and finite" "$kTrain" --dry-run --gpu-memory-gb inf
# A model size or --seq-length of 0 was read as "the preset's" and trained; now refused, as is an init std <= 0
# (Megatron's --init-method-std, now also taken, was an unknown flag).
expect_exit 2 "--num-layers: Value 0 not in range 1 to 16777216" "$kTrain" "${common[@]}" --mock-data --num-layers 0
expect_exit 2 "--seq-length: Value 0 not in range 1 to 16777216" "$kTrain" "${common[@]}" --mock-data --seq-length 0
expect_exit 2 "--init-std: 0 is not above 0" "$kTrain" "${common[@]}" --mock-data --init-method-std 0
expect_exit 2 "--exit-duration-in-mins: -1 is not at least 0" \
  "$kTrain" "${common[@]}" --mock-data --exit-duration-in-mins -1
# Megatron's --log-params-norm: the L2 norm of the parameters, on the log line and in the metrics, is that of the
# weights --export writes after the same step.
"$kTrain" "${common[@]}" --mock-data --train-steps 3 --log-params-norm --export "$kWork/norm.safetensors" \
  --metrics-file "$kWork/norm.jsonl" >"$kWork/out" 2>"$kWork/err" || fail "--log-params-norm: $(cat "$kWork/err")"
grep -q '^step      3/3 | .* | grad norm [0-9.]* | params norm [0-9.]* | ' "$kWork/out" ||
  fail "no params norm on the log line: $(cat "$kWork/out")"
python3 - "$kWork/norm.safetensors" "$kWork/norm.jsonl" <<'PY' || fail "--log-params-norm is not the weights' norm"
import array, json, math, struct, sys
data = open(sys.argv[1], "rb").read()
size = struct.unpack("<Q", data[:8])[0]
squares = 0.0
for name, tensor in json.loads(data[8:8 + size]).items():
    if name != "__metadata__":
        begin, end = tensor["data_offsets"]
        squares += sum(x * x for x in array.array("f", data[8 + size + begin:8 + size + end]))
logged = [json.loads(line) for line in open(sys.argv[2])][-1]["params_norm"]
assert math.isclose(math.sqrt(squares), logged, rel_tol=1e-6), (math.sqrt(squares), logged)
PY
# Megatron's --log-num-zeros-in-grad: gpt-tiny's learned positions number 128 and its samples 32 long here, so the
# last 96 rows of wpe (96 x 64) get no gradient at any step; no other of its gradients is exactly zero.
"$kTrain" "${common[@]}" --seq-length 32 --mock-data --train-steps 3 --log-interval 1 --log-num-zeros-in-grad \
  --metrics-file "$kWork/zeros.jsonl" >"$kWork/out" 2>"$kWork/err" || fail "--log-num-zeros-in-grad: $(cat "$kWork/err")"
[[ $(grep -c '^step .* | grad norm [0-9.]* | num zeros 6144 | ' "$kWork/out") == 3 ]] ||
  fail "--log-num-zeros-in-grad: not 6144 zeros at each step: $(cat "$kWork/out")"
grep -q '"num_zeros":6144' "$kWork/zeros.jsonl" || fail "no num_zeros in the metrics: $(cat "$kWork/zeros.jsonl")"
# Megatron's --exit-interval: a run stops after each multiple of it, saved, exit 4 (a chain of jobs resumes it), and
# the chain trains the steps of one straight run bit for bit.
interval=("$kTrain" "${common[@]}" --mock-data --train-steps 10 --save "$kWork/interval" --load "$kWork/interval")
for want in 4 4 0; do
  rc=0
  "${interval[@]}" --exit-interval 4 >>"$kWork/chained" 2>"$kWork/err" || rc=$?
  [[ $rc == "$want" ]] || fail "--exit-interval 4: exit $rc, want $want: $(cat "$kWork/err")"
  [[ $want == 0 ]] || grep -q "info: stopped after step [48], a multiple of --exit-interval 4; resume with --load $kWork/interval" \
    "$kWork/err" || fail "--exit-interval: $(cat "$kWork/err")"
done
"$kTrain" "${common[@]}" --mock-data --train-steps 10 >"$kWork/straight" 2>/dev/null || fail "10 steps straight"
diff <(grep '^step' "$kWork/chained" | cut -d'|' -f1-4) <(grep '^step' "$kWork/straight" | cut -d'|' -f1-4) ||
  fail "--exit-interval's chain of runs did not train the straight run's steps"
# --threads 100000 crashed in OpenMP's thread start (SIGSEGV); --threads 0 read as "not given". OMP_NUM_THREADS is
# read within the same bounds.
expect_exit 2 "--threads: Value 100000 not in range 1 to 4096" "$kTrain" "${common[@]}" --mock-data --threads 100000
expect_exit 2 "--threads: Value 0 not in range 1 to 4096" "$kTrain" "${common[@]}" --mock-data --threads 0
# Flags whose 0 stands for "unset" trained on as if not given when given 0 or less (a global batch of the micro
# batch, the decay over --train-steps, the measured peak, no evaluation, a zero timeout); now each is refused.
for flag_value in "--global-batch-size: Value 0 not in range" "--global-batch-size: Value -8 not in range" \
    "--lr-decay-steps: 0 is not above 0" "--peak-tflops: -5 is not above 0" "--eval-interval: -1 is not at least 0" \
    "--distributed-timeout-minutes: 0 is not above 0" "--exit-save-budget: -1 is not at least 0"; do
  flag=${flag_value%%:*} value=${flag_value#*: }
  value=${value#Value }
  expect_exit 2 "$flag_value" "$kTrain" "${common[@]}" --mock-data "$flag" "${value%% *}"
done
# --dry-run answers whether the run fits: exit 0 for gpt3-5b with ZeRO-1 over 64 GPUs, 1 without sharding.
"$kTrain" --preset gpt3-5b --dry-run --nodes 8 --micro-batch-size 4 --use-distributed-optimizer >"$kWork/plan" ||
  fail "a plan that fits: exit $?: $(cat "$kWork/plan")"
grep -q "fits in 80 GB" "$kWork/plan" || fail "plan: $(cat "$kWork/plan")"
rc=0
"$kTrain" --preset gpt3-5b --dry-run --nodes 8 --micro-batch-size 4 >"$kWork/plan" || rc=$?
[[ $rc == 1 ]] && grep -q "does NOT fit in 80 GB" "$kWork/plan" || fail "a plan that does not fit: exit $rc: $(cat "$kWork/plan")"
# --help names the environment's switches and what they take.
"$kTrain" --help >"$kWork/help" || fail "--help failed"
grep -q 'SRUNWAY_ATTENTION=mma|cudnn|auto|wmma|simple' "$kWork/help" || fail "--help does not name SRUNWAY_ATTENTION"
grep -q 'SRUNWAY_GELU_EPILOGUE=0|1' "$kWork/help" || fail "--help does not name SRUNWAY_GELU_EPILOGUE"
grep -q 'SRUNWAY_GEMM_TUNE=0|1' "$kWork/help" || fail "--help does not name SRUNWAY_GEMM_TUNE"
grep -q 'SRUNWAY_BGRADB=0|1' "$kWork/help" || fail "--help does not name SRUNWAY_BGRADB"
# A misspelt GPU switch is refused on any device, rather than running the default it did not name.
expect_exit 2 "SRUNWAY_ATTENTION=cudn: not one of mma, cudnn, auto, wmma, simple" \
  env SRUNWAY_ATTENTION=cudn "$kTrain" "${common[@]}" --mock-data --train-steps 2 --device cpu
expect_exit 2 "SRUNWAY_GELU_EPILOGUE=off: not one of 0, 1" \
  env SRUNWAY_GELU_EPILOGUE=off "$kTrain" "${common[@]}" --mock-data --train-steps 2
expect_exit 2 "SRUNWAY_GEMM_TUNE=yes: not one of 0, 1" \
  env SRUNWAY_GEMM_TUNE=yes "$kTrain" "${common[@]}" --mock-data --train-steps 2
expect_exit 2 "SRUNWAY_BGRADB=no: not one of 0, 1" \
  env SRUNWAY_BGRADB=no "$kTrain" "${common[@]}" --mock-data --train-steps 2
expect_exit 2 "--profile-step 5 is not a step of this run \\(1 to --train-steps 2\\)" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --profile-step 5
# Megatron's --profile: steps --profile-step-start + 1 to --profile-step-end (10 and 12 by default).
expect_exit 2 "--profile: steps 11 to 12 \\(--profile-step-start 10 --profile-step-end 12\\) are not steps of this run \\(1 to --train-steps 2\\)" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 2 --profile
expect_exit 2 "--profile-step-end 3 is not after --profile-step-start 3" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 4 --profile --profile-step-start 3 --profile-step-end 3
expect_exit 2 "--profile-step excludes --profile" "$kTrain" "${common[@]}" --mock-data --profile --profile-step 1
"$kTrain" "${common[@]}" --mock-data --train-steps 4 --profile --profile-step-start 1 --profile-step-end 3 \
  --profile-ranks 0 1 >/dev/null 2>"$kWork/err" || fail "--profile: $(cat "$kWork/err")"
grep -q "info: --profile (steps 2 to 3 on rank 0, 1): the CPU has no CUDA profiler; nothing to capture$" "$kWork/err" ||
  fail "--profile: $(cat "$kWork/err")"
# No CUDA driver (one loaded from a path that does not exist, whatever this machine has): --device cuda fails
# naming the library and where it looked; --device auto trains on the CPU and says why once.
no_driver=(env "SRUNWAY_CUDA_DRIVER=$kWork/libcuda-missing.so.1")
expect_exit 1 "no CUDA driver: .*libcuda-missing.so.1" \
  "${no_driver[@]}" "$kTrain" "${common[@]}" --mock-data --train-steps 2 --device cuda
"${no_driver[@]}" "$kTrain" "${common[@]}" --mock-data --train-steps 2 >"$kWork/out" 2>"$kWork/err" \
  || fail "--device auto without a driver: $(cat "$kWork/err")"
[[ $(grep -c 'training on the CPU: no CUDA driver: .*libcuda-missing.so.1' "$kWork/err") == 1 ]] \
  || fail "--device auto without a driver should say once that it trains on the CPU: $(cat "$kWork/err")"
grep -q '^step      2/2' "$kWork/out" || fail "--device auto without a driver did not train: $(cat "$kWork/out")"
# A model whose buffers each fit in the machine but together do not (the embedding 0.4 of its memory, so each of
# the weights, the gradients and the two moments about that) is one line saying what did not fit, exit 1, at once:
# it was OOM-killed (137), and then refused only once its zero-filled buffers held nearly all the machine.
hidden=$(awk '/^MemTotal:/ { printf "%d", int($2 * 1024 * 0.4 / (4 * 1048576) / 4) * 4 }' /proc/meminfo)
expect_exit 1 "cannot allocate .* GiB of host memory: .*the model \\([0-9.]+ M parameters.* do not fit; try" \
  "$kTrain" "${common[@]}" --mock-data --train-steps 1 --vocab-size 1048576 --hidden-size "$hidden" --device cpu
# Under a cgroup memory limit (Slurm's --mem with task/cgroup) the limit is what the rank may hold: a 4 GiB model in
# a 2 GiB cgroup is one line naming the cgroup, where it was OOM-killed by its cgroup. Where this machine lets
# root make a cgroup (v1's memory controller or v2's); else said and skipped.
cgroup=
if [[ -w /sys/fs/cgroup/memory ]]; then
  cgroup=/sys/fs/cgroup/memory/srunway-train-cli-$$ limit_file=memory.limit_in_bytes
elif [[ -w /sys/fs/cgroup/cgroup.procs ]] && grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  cgroup=/sys/fs/cgroup/srunway-train-cli-$$ limit_file=memory.max
fi
if [[ -n $cgroup ]] && mkdir "$cgroup" 2>/dev/null && echo 2147483648 >"$cgroup/$limit_file"; then
  expect_exit 1 "cannot allocate .* host memory: this rank holds .* of the 2.00 GiB it may \\(what cgroup /.*srunway-train-cli-$$ had left of its 2.00 GiB limit when it started: Slurm's --mem sets it\\): the model" \
    bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' - "$cgroup" "$kTrain" "${common[@]}" --mock-data \
    --train-steps 1 --vocab-size 1048576 --hidden-size 1024 --device cpu
  echo "ok: a cgroup's memory limit bounds the rank"
  # A model that trains in 0.65 GiB saves and resumes in an 800 MiB cgroup: the checkpoint is written straight from
  # the model's buffers (a packed copy of the state, 0.4 GiB more, had the save OOM-killed, exit 137).
  echo $((800 << 20)) >"$cgroup/$limit_file"
  in_cgroup=(bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' - "$cgroup" "$kTrain" "${common[@]}" --mock-data
             --vocab-size 131072 --hidden-size 256 --device cpu --save "$kWork/cgroup-ckpt")
  "${in_cgroup[@]}" --train-steps 1 >"$kWork/out" 2>"$kWork/err" || fail "save in an 800 MiB cgroup: exit $?: $(cat "$kWork/err")"
  "${in_cgroup[@]}" --train-steps 2 --load "$kWork/cgroup-ckpt" >"$kWork/out" 2>"$kWork/err" ||
    fail "resume in an 800 MiB cgroup: exit $?: $(cat "$kWork/err")"
  grep -q "resumed from $kWork/cgroup-ckpt at step 1" "$kWork/err" || fail "no resume: $(cat "$kWork/err")"
  rm -rf "$kWork/cgroup-ckpt"
  rmdir "$cgroup"
  echo "ok: a model that trains within a cgroup's limit saves and resumes within it"
else
  [[ -n $cgroup ]] && rmdir "$cgroup" 2>/dev/null
  echo "skipped: no cgroup with a memory limit can be made here"
fi
echo "ok: bad input is refused with one line"

# 5. A failed save leaves the previous checkpoint in charge. The staging directory's name (where the shards are
# written) is taken by a file, which the removal of unfinished saves (directories) leaves alone and no mkdir can
# replace, root's included (a read-only directory would not stop root).
before=$(cat "$kWork/ckpt/latest_checkpointed_iteration.txt")
echo in-the-way >"$kWork/ckpt/.saving_iter_0000025"
expect_exit 1 "create checkpoint directory $kWork/ckpt/\.saving_iter_0000025: .*; the last complete checkpoint in $kWork/ckpt stays \(step 20\)$" \
  "${run[@]}" --load "$kWork/ckpt" --save "$kWork/ckpt" --train-steps 25
# The first save failing said a last complete checkpoint stays where there was none.
mkdir -p "$kWork/first"
echo in-the-way >"$kWork/first/.saving_iter_0000002"
expect_exit 1 "; there is no complete checkpoint in $kWork/first yet$" "${run[@]}" --save "$kWork/first" --train-steps 2
[[ ! -e $kWork/ckpt/iter_0000025 && ! -e $kWork/ckpt/.saving_iter_0000025 ]] || fail "the failed save left files behind"
[[ $(cat "$kWork/ckpt/latest_checkpointed_iteration.txt") == "$before" ]] || fail "latest checkpoint changed"
# A save killed midway (SIGKILL: no handler runs) left its staging directory for good, as large as a checkpoint,
# when no later save was of its step: the next save removes it.
mkdir -p "$kWork/ckpt/.saving_iter_0000023"
cp "$kWork/ckpt/iter_0000020/shard_00000_of_00001.ckpt" "$kWork/ckpt/.saving_iter_0000023/.shard_00000_of_00001.ckpt.tmp.x1Y2z3"
"${run[@]}" --load "$kWork/ckpt" --save "$kWork/ckpt" --train-steps 22 >"$kWork/out" 2>"$kWork/err" ||
  fail "save after a killed one: exit $?: $(cat "$kWork/err")"
grep -q "removed $kWork/ckpt/.saving_iter_0000023 (.* MiB): a save that did not finish" "$kWork/err" ||
  fail "no removal said: $(cat "$kWork/err")"
[[ ! -e $kWork/ckpt/.saving_iter_0000023 && -e $kWork/ckpt/iter_0000022/manifest.json ]] ||
  fail "the killed save's directory stayed, or the new checkpoint is missing: $(ls -a "$kWork/ckpt")"
echo "ok: a save that cannot be made fails with one line and leaves the previous checkpoint in charge"

# 6. SIGTERM (what Slurm sends before killing a job): a checkpoint at the end of the current step, exit 4.
"$kTrain" "${common[@]}" --mock-data --train-steps 100000 --save "$kWork/sig" --log-interval 1 \
  >"$kWork/sig.out" 2>"$kWork/sig.err" &
pid=$!
for _ in $(seq 1 100); do grep -q '^step' "$kWork/sig.out" 2>/dev/null && break; sleep 0.1; done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 4 ]] || fail "SIGTERM: exit $rc, want 4: $(cat "$kWork/sig.err")"
grep -q "stopped by signal 15 after step" "$kWork/sig.err" || fail "SIGTERM message: $(cat "$kWork/sig.err")"
step=$(cat "$kWork/sig/latest_checkpointed_iteration.txt")
[[ -f $kWork/sig/$(printf 'iter_%07d' "$step")/manifest.json ]] || fail "no checkpoint after SIGTERM"
echo "ok: SIGTERM saves step $step and exits 4"
[[ ! -e $kWork/sig/.srunway-save-lease.json ]] || fail "the run that ended left its lease on --save"
# 7. One run at a time saves in a --save directory: two (a job array sharing one, a script submitted twice) wrote
# their shards into the same staging directories and committed each other's. A second run is refused while the
# first lives, and takes the directory over once the first is gone (SIGKILL: its lease stays behind).
"$kTrain" "${common[@]}" --mock-data --train-steps 100000 --save "$kWork/shared" --log-interval 1 \
  >"$kWork/first.out" 2>"$kWork/first.err" &
pid=$!
for _ in $(seq 1 100); do grep -q '^step' "$kWork/first.out" 2>/dev/null && break; sleep 0.1; done
expect_exit 1 "error: --save $kWork/shared is in use by process $pid on $(hostname) \(its lease $kWork/shared/.srunway-save-lease.json touched [0-9]+ s ago\): two runs saving in one directory mix their checkpoints" \
  env -u SLURM_JOB_ID "$kTrain" "${common[@]}" --mock-data --train-steps 2 --save "$kWork/shared"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
env -u SLURM_JOB_ID "$kTrain" "${common[@]}" --mock-data --train-steps 2 --save "$kWork/shared" >/dev/null \
  2>"$kWork/err" || fail "after the first run was killed: exit $?: $(cat "$kWork/err")"
grep -q "info: --save $kWork/shared: took over the lease of process $pid on $(hostname) (that process is gone)" \
  "$kWork/err" || fail "no take-over said: $(cat "$kWork/err")"
[[ ! -e $kWork/shared/.srunway-save-lease.json ]] || fail "the second run left its lease on --save"
echo "ok: a second run saving in a live run's --save is refused; once that run is gone, it takes the lease over"
# SIGTERM while the sample index of a long run is built (40G samples of a one-document dataset: 2e8 epochs of it,
# 5 s here) stops it there, exit 4 and one line; it was noted and acted on only at the first step, after the whole
# build.
"$kTrain" "${common[@]}" --data-path "$kWork/data" --split 1 --train-steps 20000000000 >/dev/null 2>"$kWork/idx.err" &
pid=$!
sleep 1
kill -TERM "$pid"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  fail "SIGTERM while the sample index is built: still running 10 s later"
fi
rc=0
wait "$pid" || rc=$?
[[ $rc == 4 ]] || fail "SIGTERM while the sample index is built: exit $rc, want 4: $(cat "$kWork/idx.err")"
grep -qE "error: stopped by SIGTERM while building the sample index of .*data.bin \\([0-9]+ of [0-9]+ (epochs|documents counted|documents of an epoch shuffled)\\)" \
  "$kWork/idx.err" || fail "SIGTERM while the sample index is built: $(cat "$kWork/idx.err")"
echo "ok: SIGTERM while the sample index is built stops it, exit 4"
