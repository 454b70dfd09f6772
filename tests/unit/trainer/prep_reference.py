#!/usr/bin/python3
"""srunway-prep against independent references: the Megatron .idx/.bin read with numpy by the published layout,
the tokens re-encoded with the GPT-2 BPE algorithm (OpenAI's encoder.py, rewritten here, with GPT-2's pattern over
Unicode's classes through Python's regex module, as encoder.py has it) from the vocab.json/merges.txt that
srunway-prep saved. Then the same input encoded with those files (--vocab-file/--merge-file) must give the
identical .bin, and JSONL input must give what the text gave.

Usage: prep_reference.py SRUNWAY_PREP WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import regex

DOCS = [
    "The quick brown fox jumps over the lazy dog. It's 12:45 and we're late!",
    "  Leading spaces,\ttabs\tand\n\nblank lines   inside.  ",
    "Unicode: caf\u00e9, na\u00efve, \u65e5\u672c\u8a9e, emoji \U0001F600 and numbers 3.14159 2718.",
    "don't won't they'll I'd you've she's -- punctuation!!! ??? (parens) [brackets] {braces}",
    "repeat repeat repeat the the the cat cat cat sat sat sat on on on the mat mat mat",
    # No-break spaces: whitespace to GPT-2's pattern, so a space before one stays a piece of its own (srunway took
    # their bytes for letters until 2026-12-05, and learned merges across that boundary).
    "foo \u00a0bar and \u00a0\u00a0lead, 10\u00a0000 \u00a0items \u00a0\u00a0more \u00a0and \u00a0so",
] * 3 + ["a single line without a newline at the end"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# GPT-2's pattern (encoder.py's).
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bpe_encode(text, encoder, ranks, byte_encoder):
    ids = []
    for word in PATTERN.findall(text):
        symbols = [byte_encoder[b] for b in word.encode("utf-8")]
        while len(symbols) > 1:
            pairs = [(ranks.get((symbols[i], symbols[i + 1]), 1 << 30), i) for i in range(len(symbols) - 1)]
            rank, _ = min(pairs)
            if rank == 1 << 30:
                break
            first, second = next((symbols[i], symbols[i + 1]) for r, i in pairs if r == rank)
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            symbols = merged
        ids.extend(encoder[s] for s in symbols)
    return ids


def read_megatron(prefix):
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
    version, dtype_code, sequences, documents = struct.unpack("<QBQQ", idx[9:34])
    assert version == 1
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}[dtype_code]
    off = 34
    lengths = np.frombuffer(idx, np.int32, sequences, off)
    off += 4 * sequences
    pointers = np.frombuffer(idx, np.int64, sequences, off)
    off += 8 * sequences
    doc_idx = np.frombuffer(idx, np.int64, documents, off)
    assert off + 8 * documents == len(idx), "no trailing bytes"
    assert doc_idx[0] == 0 and doc_idx[-1] == sequences
    data = np.fromfile(prefix + ".bin", dtype=dtype)
    size = np.dtype(dtype).itemsize
    return [data[p // size: p // size + n].tolist() for p, n in zip(pointers, lengths)]


def run(*args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def main():
    prep, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    text_path = os.path.join(work, "corpus.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write("\n%\n".join(DOCS))
    prefix = os.path.join(work, "trained")
    out = run(prep, "--input", text_path, "--output-prefix", prefix, "--train-vocab", "400",
              "--document-separator", "%", "--workers", "3", "--quiet")
    print(out.strip())
    assert f"{len(DOCS)} documents" in out, out

    with open(prefix + ".vocab.json", encoding="utf-8") as f:
        encoder = json.load(f)
    with open(prefix + ".merges.txt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0].startswith("#version")
    ranks = {tuple(line.split(" ")): i for i, line in enumerate(l for l in lines[1:] if l)}
    byte_encoder = bytes_to_unicode()
    eod = encoder["<|endoftext|>"]

    # Text documents are the lines between separators, newline included (as written above).
    docs = [d + "\n" for d in DOCS[:-1]] + [DOCS[-1]]
    got = read_megatron(prefix)
    assert len(got) == len(DOCS), f"{len(got)} sequences, expected {len(DOCS)}"
    for i, (doc, tokens) in enumerate(zip(docs, got)):
        want = bpe_encode(doc, encoder, ranks, byte_encoder) + [eod]
        if tokens != want:
            sys.exit(f"document {i}: srunway-prep wrote {tokens[:20]}..., the reference BPE gives {want[:20]}...")
    print(f"ok: {len(got)} documents match the reference BPE and Megatron layout token for token")

    again = os.path.join(work, "loaded")
    run(prep, "--input", text_path, "--output-prefix", again, "--vocab-file", prefix + ".vocab.json",
        "--merge-file", prefix + ".merges.txt", "--document-separator", "%", "--quiet")
    for ext in (".bin", ".idx"):
        with open(prefix + ext, "rb") as a, open(again + ext, "rb") as b:
            assert a.read() == b.read(), f"{ext} differs when encoding with the saved vocab.json/merges.txt"
    print("ok: the saved vocab.json + merges.txt encode the input identically")

    jsonl_path = os.path.join(work, "corpus.jsonl")
    with open(jsonl_path, "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps({"id": 1, "text": doc}) + "\n")
    from_json = os.path.join(work, "json")
    run(prep, "--input", jsonl_path, "--output-prefix", from_json, "--vocab-file", prefix + ".vocab.json",
        "--merge-file", prefix + ".merges.txt", "--json-keys", "text", "--quiet")
    assert read_megatron(from_json) == got, "JSONL input encodes differently from the same text"
    print("ok: JSONL input gives the same dataset")


if __name__ == "__main__":
    main()
