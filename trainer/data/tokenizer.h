// Byte-level BPE as GPT-2 defines it: text is split into words (GPT-2's pre-tokenizer pattern, with every
// non-ASCII character counted as a letter), each word's bytes are merged pair by pair in the order of the merge
// list. Vocabularies load from and save to GPT-2's vocab.json + merges.txt, so a trained tokenizer also works
// with Megatron's and Hugging Face's GPT-2 tokenizer code.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
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
  static common::StatusOr<Tokenizer> Load(const std::filesystem::path& vocab_json,
                                          const std::filesystem::path& merges_txt);
  // The two files' contents, read already; the paths name them in errors.
  static common::StatusOr<Tokenizer> Parse(std::string_view vocab_text, const std::filesystem::path& vocab_json,
                                           std::string_view merges, const std::filesystem::path& merges_txt);
  // Learns merges from word counts until the vocabulary (256 bytes + merges + <|endoftext|>) has vocab_size
  // entries or no pair occurs twice. `progress` is called now and then with (merges done, merges wanted); when it
  // returns false, training stops there (Aborted).
  static common::StatusOr<Tokenizer> Train(const std::unordered_map<std::string, int64_t>& word_counts,
                                           int vocab_size, const std::function<bool(int, int)>& progress = {});
  common::Status Save(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) const;
  // The two files written under temporary names, for common::CommitTogether with others that belong with them.
  common::StatusOr<std::vector<common::AtomicFile>> Stage(const std::filesystem::path& vocab_json,
                                                          const std::filesystem::path& merges_txt) const;

  std::vector<int32_t> Encode(std::string_view text) const;
  std::string Decode(const std::vector<int32_t>& tokens) const;
  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  int32_t eod() const { return eod_; }

 private:
  // ids_ from tokens_; then byte_ids_, merge_rank_ and eod_, which need ids_ and merges_.
  void IndexTokens();
  void IndexMerges();
  void EncodeWord(std::string_view word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;  // id -> bytes
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::pair<int32_t, int32_t>> merges_;  // in rank order
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merge_rank_;  // (a, b) -> (rank, merged id)
  int32_t byte_ids_[256] = {};
  int32_t eod_ = -1;
};

// GPT-2's pre-tokenizer: contractions, " ?letters", " ?digits", " ?other", whitespace runs.
void SplitWords(std::string_view text, const std::function<void(std::string_view)>& emit);

}  // namespace srunway::trainer
