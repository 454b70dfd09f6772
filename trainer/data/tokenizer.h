// Byte-level BPE as GPT-2 defines it: text is split into words (GPT-2's pre-tokenizer pattern, with Unicode's
// letter and number classes), each word's bytes are merged pair by pair in the order of the merge
// list. Vocabularies load from and save to GPT-2's vocab.json + merges.txt, so a trained tokenizer also works
// with Megatron's and Hugging Face's GPT-2 tokenizer code.
//
// The same BPE also reads a Hugging Face tokenizer.json of byte-level BPE (GPT-2's, Llama 3's, Qwen2's and
// Qwen3's), as Megatron's HuggingFaceTokenizer uses it: its added tokens are split out of the text first, the rest
// NFC-normalized where it says so, split by its pre-tokenizer's patterns (PCRE2, with Unicode properties), each
// piece merged (whole where `ignore_merges` finds it in the vocabulary), and its post-processor's special tokens
// (Llama 3's <|begin_of_text|>) put around the document. The end of document is tokenizer_config.json's
// eos_token, as Megatron's eod is transformers' eos_token_id.
//
// And a tokenizer.json of SentencePiece-style BPE (Llama 2's, Mistral's): spaces written as ▁ by Llama 2's
// normalizer or the Metaspace pre-tokenizer, characters (not bytes) merged, a character outside the vocabulary
// its bytes' <0xXX> tokens (byte fallback) or the unknown token. A SentencePiece BPE model itself (Llama 2's
// tokenizer.model, Megatron's Llama2Tokenizer and GPTSentencePieceTokenizer) becomes the same: its pieces the
// vocabulary, its merges each piece's splits into two pieces by the piece's score, as transformers converts it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/fs.h"
#include "common/status.h"

namespace srunway::trainer {

inline constexpr std::string_view kEndOfText = "<|endoftext|>";

class Tokenizer {
 public:
  struct Regex;  // a compiled PCRE2 pattern (tokenizer.cc)

  static common::StatusOr<Tokenizer> Load(const std::filesystem::path& vocab_json,
                                          const std::filesystem::path& merges_txt);
  // The two files' contents, read already; the paths name them in errors.
  static common::StatusOr<Tokenizer> Parse(std::string_view vocab_text, const std::filesystem::path& vocab_json,
                                           std::string_view merges, const std::filesystem::path& merges_txt);
  // A Hugging Face tokenizer: `path` is tokenizer.json or the directory holding it (a model's directory);
  // tokenizer_config.json beside it, if there, names the end-of-document token. Anything but BPE as those
  // tokenizers use it (WordPiece, Unigram, a normalizer, pre-tokenizer or post-processor of other kinds) is refused,
  // naming what it found.
  static common::StatusOr<Tokenizer> LoadHuggingFace(const std::filesystem::path& path);
  // The files' contents, read already (`config` empty where there is none); `where` names tokenizer.json in errors.
  static common::StatusOr<Tokenizer> ParseHuggingFace(std::string_view tokenizer_json, std::string_view config,
                                                      const std::filesystem::path& where);
  // A SentencePiece model: `path` is tokenizer.model or the directory holding it. `add_bos`: <s> before each
  // document (Megatron's Llama2Tokenizer), or not (GPTSentencePieceTokenizer); unset, tokenizer_config.json beside
  // it says (add_bos_token, true where it is not there, as transformers' LlamaTokenizer). BPE models only, with any
  // normalizer (the identity, Llama 2's, or a compiled character map, nmt_nfkc's and the like); a Unigram model is
  // refused.
  static common::StatusOr<Tokenizer> LoadSentencePiece(const std::filesystem::path& path,
                                                       std::optional<bool> add_bos = std::nullopt);
  // The model's bytes, read already; `config` (tokenizer_config.json's text) may be empty.
  static common::StatusOr<Tokenizer> ParseSentencePiece(std::string_view model, std::string_view config,
                                                        const std::filesystem::path& where,
                                                        std::optional<bool> add_bos = std::nullopt);
  // --tokenizer-model PATH of Megatron's --tokenizer-type: HuggingFaceTokenizer a tokenizer.json, Llama2Tokenizer
  // and GPTSentencePieceTokenizer a SentencePiece model, with and without <s> before each document. No type: a file
  // named *.model (or a directory with tokenizer.model and no tokenizer.json) is a SentencePiece model, else a
  // tokenizer.json.
  static common::StatusOr<Tokenizer> LoadModel(const std::filesystem::path& path, std::string_view type);
  static bool SentencePieceType(std::string_view type) {
    return type == "Llama2Tokenizer" || type == "GPTSentencePieceTokenizer";
  }
  // Learns merges from word counts until the vocabulary (256 bytes + merges + <|endoftext|>) has vocab_size
  // entries or no pair occurs twice. `progress` is called now and then with (merges done, merges wanted); when it
  // returns false, training stops there (Aborted).
  static common::StatusOr<Tokenizer> Train(const std::unordered_map<std::string, int64_t>& word_counts,
                                           int vocab_size, const std::function<bool(int, int)>& progress = {});
  common::Status Save(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) const;
  // The two files written under temporary names, for common::CommitTogether with others that belong with them.
  common::StatusOr<std::vector<common::AtomicFile>> Stage(const std::filesystem::path& vocab_json,
                                                          const std::filesystem::path& merges_txt) const;

  // The files that describe it beside a dataset PREFIX, written under temporary names for CommitTogether:
  // PREFIX.vocab.json and PREFIX.merges.txt (GPT-2's), or a Hugging Face tokenizer's PREFIX.tokenizer.json and
  // PREFIX.tokenizer_config.json, as they were read; or a SentencePiece model's PREFIX.tokenizer.model and a
  // PREFIX.tokenizer_config.json that says whether <s> begins each document.
  common::StatusOr<std::vector<common::AtomicFile>> StageBeside(const std::string& prefix) const;

  std::vector<int32_t> Encode(std::string_view text) const;
  // The tokens' text as transformers' decode gives it (special tokens kept): where the tokenizer puts a space before
  // a text, its decoder takes it off again (Llama 2's Strip, a Metaspace decoder, a SentencePiece model's dummy
  // prefix). `continues`: the tokens go on from a text before them (a prompt's), so nothing comes off their start.
  // Bytes that are not UTF-8 stay as they are (Decode(Encode(text)) is the text).
  std::string Decode(const std::vector<int32_t>& tokens, bool continues = false) const {
    return Decode(tokens, continues, false);
  }
  // The same as text to show: UTF-8 throughout, where the bytes are not, U+FFFD as the library's decoders put it
  // (ByteLevel: one for each maximal invalid part, as Python's and Rust's lossy decoding; ByteFallback: one for each
  // byte of a run of <0xXX> tokens that is not UTF-8 as a whole).
  std::string DecodeText(const std::vector<int32_t>& tokens, bool continues = false) const {
    return Decode(tokens, continues, true);
  }
  // A document as srunway-prep wrote it back to its text (DecodeText): the special tokens Encode puts around a text
  // (the post-processor's, <s>) and the end of document after it taken off, those inside the text kept.
  std::string DecodeDocument(std::span<const int32_t> tokens) const;
  // The highest id + 1 (transformers' len(tokenizer) where the ids leave no gap).
  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  int32_t eod() const { return eod_; }
  // The end of document's text: <|endoftext|>, or a Hugging Face tokenizer's eos_token.
  const std::string& eod_text() const { return eod_text_; }
  // A Hugging Face tokenizer's: its bos_token's id (-1: none), and its files' contents.
  int32_t bos() const { return bos_; }
  bool hugging_face() const { return !hf_json_.empty(); }
  const std::string& hf_json() const { return hf_json_; }
  // tokenizer_config.json: a Hugging Face tokenizer's as read, or a SentencePiece model's (LlamaTokenizer's form).
  const std::string& hf_config() const { return hf_config_; }
  // A SentencePiece model's bytes (empty: not one).
  bool sentencepiece() const { return !sp_model_.empty(); }
  const std::string& sp_model() const { return sp_model_; }

 private:
  // ids_ from tokens_; then byte_ids_, merge_rank_ and eod_, which need ids_ and merges_.
  void IndexTokens();
  void IndexMerges();
  // byte_tokens_ from ids_: the tokens <0x00> to <0xFF>, where `is_byte` (if given) takes them for bytes.
  void IndexByteTokens(const std::function<bool(int32_t)>& is_byte = {});
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const;
  // A SentencePiece-style BPE's first symbols: the word's characters, each a token of the vocabulary, else its
  // bytes' <0xXX> tokens (byte fallback), else the unknown token.
  void CharacterSymbols(std::string_view word, std::vector<int32_t>& symbols) const;
  // Merges the symbols' pairs, the lowest rank first and the leftmost of equal ones, as Hugging Face's BPE does.
  void Merge(std::vector<int32_t>& symbols) const;
  // The text after normalizers_.
  std::string Normalize(std::string_view text) const;
  // A Hugging Face tokenizer's text between added tokens (`first`: it begins the document): normalized (unless
  // normalize_first_), split, merged.
  void EncodeSegment(std::string_view text, bool first, std::vector<int32_t>& out) const;
  void SplitPieces(std::string_view text, size_t stage, const std::function<void(std::string_view)>& emit) const;
  std::string Decode(const std::vector<int32_t>& tokens, bool continues, bool valid) const;

  std::vector<std::string> tokens_;  // id -> bytes (a SentencePiece-style token's: its text, ▁ and all)
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::pair<int32_t, int32_t>> merges_;  // in rank order
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_rank_;  // (a, b) -> (rank, merged id)
  int32_t byte_ids_[256] = {};  // -1: a Hugging Face vocabulary without that byte (the byte is dropped, as there)
  int32_t eod_ = -1;
  std::string eod_text_{kEndOfText};

  // A Hugging Face tokenizer's parts, or a SentencePiece model's (both empty: GPT-2's, split by SplitWords).
  std::string hf_json_, hf_config_;
  std::string sp_model_;  // the model file's bytes
  bool normalize_first_ = false;  // SentencePiece's order: the whole text normalized, then added tokens split out
  std::vector<std::shared_ptr<const Regex>> splits_;  // applied one after another, each to the last one's pieces
  struct Normalizer {
    // kStrip: SentencePiece's remove_extra_whitespaces (no space at either end, one for a run of them).
    // kCharsmap: SentencePiece's character by character normalization (MapCharacters), with its compiled
    // character map where it has one (charsmap_: nmt_nfkc, nfkc, a rule file's).
    enum class Kind { kNfc, kPrepend, kReplace, kStrip, kCharsmap } kind;
    std::string from, to;  // kReplace: every `from` becomes `to`; kPrepend: `to` goes before a non-empty text
  };
  std::vector<Normalizer> normalizers_;  // in order
  // A SentencePiece model's precompiled_charsmap (none: the identity normalizer): a double array (Darts-clone's
  // units) of the texts it changes, each leaf's value the offset of what it becomes in `strings` (NUL-terminated).
  struct Charsmap {
    std::vector<uint32_t> units;
    std::string strings;
  };
  std::shared_ptr<const Charsmap> charsmap_;
  // kCharsmap: at each place the longest text the map holds becomes what it maps to; a user-defined piece stays as
  // it is, any other character too, a byte that starts none U+FFFD (SentencePiece's NormalizePrefix).
  std::string MapCharacters(std::string_view text) const;
  bool prefix_space_ = false;   // ByteLevel's add_prefix_space
  // A SentencePiece-style BPE (Llama 2's, Mistral's): its symbols are characters, spaces are written as `meta_`
  // (the Metaspace pre-tokenizer's, or a normalizer's Replace), a character outside the vocabulary is its bytes'
  // <0xXX> tokens (byte fallback) or the unknown token.
  bool characters_ = false;
  bool metaspace_ = false;  // the Metaspace pre-tokenizer: spaces become meta_, one goes before the text where...
  enum class MetaPrepend { kAlways, kFirst, kNever } meta_prepend_ = MetaPrepend::kAlways;  // ...this says so
  bool meta_split_ = true;  // ...and each piece then starts at a meta_
  std::string meta_ = "\u2581";  // ▁
  // The decoder's ends of a text: a Strip decoder's (content, start, stop: up to that many `content` characters come
  // off the start and the end), and a Metaspace decoder that drops the first token's metaspaces.
  struct Strip {
    std::string content = " ";
    int64_t start = 0, stop = 0;
  } strip_;
  bool meta_first_dropped_ = false;
  bool byte_fallback_ = false;
  int32_t byte_tokens_[256] = {};  // <0x00> to <0xFF>: -1 where the vocabulary lacks one
  int32_t unk_ = -1;
  bool fuse_unk_ = false;  // a run of unknown characters is one unknown token
  bool ignore_merges_ = false;  // a piece that is a token of the vocabulary is that token
  std::vector<std::pair<std::string, int32_t>> added_;  // split out of the text first, longest first
  bool added_first_[256] = {};                          // the bytes an added token starts with
  std::vector<int32_t> before_, after_;  // the post-processor's special tokens around a document
  int32_t bos_ = -1;
};

// Where a tokenizer's files are: a tokenizer.json or SentencePiece model (`model`, read as Tokenizer::LoadModel reads
// it with `type`, Megatron's --tokenizer-type), or GPT-2's vocab.json and merges.txt.
struct TokenizerSource {
  std::string model, type;
  std::string vocab, merges;

  common::StatusOr<Tokenizer> Load() const;
  // The flags' (Megatron's): --tokenizer-model's with --tokenizer-type, else --vocab-file's and --merge-file's;
  // none where neither is given.
  static std::optional<TokenizerSource> Given(const std::string& model, const std::string& type,
                                              const std::string& vocab, const std::string& merges);
};
// The files srunway-prep writes beside a dataset PREFIX (Tokenizer::StageBeside), as srunway-train looks for them:
// PREFIX.tokenizer.json, else PREFIX.tokenizer.model, else PREFIX.vocab.json and PREFIX.merges.txt.
TokenizerSource TokenizerBeside(const std::string& prefix);

// `text` with each maximal part that is not UTF-8 (the longest start of a well-formed sequence, else one byte)
// replaced by U+FFFD, as Rust's String::from_utf8_lossy and Python's decode(errors="replace") do.
std::string ValidUtf8(std::string_view text);

// GPT-2's pre-tokenizer, its pattern with Unicode's classes: contractions, " ?letters", " ?digits", " ?other",
// whitespace runs; bytes that are not UTF-8 are pieces of their own.
void SplitWords(std::string_view text, const std::function<void(std::string_view)>& emit);

}  // namespace srunway::trainer
