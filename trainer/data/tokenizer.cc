// Byte-level BPE: pre-tokenizer, encoder, decoder, trainer, GPT-2 file formats.
#include "trainer/data/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/fs.h"
#include "common/json.h"
#include "common/parse.h"

namespace srunway::trainer {
namespace {

uint64_t PairKey(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

enum class CharClass { kLetter, kDigit, kSpace, kOther };

CharClass Classify(unsigned char c) {
  if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return CharClass::kSpace;
  return CharClass::kOther;
}

// GPT-2 maps each byte to a printable character so vocab.json and merges.txt hold text: printable Latin-1 bytes
// stand for themselves, the other 68 bytes for U+0100 onwards, in order.
const std::vector<std::string>& ByteToUnicode() {
  static const std::vector<std::string> kTable = [] {
    std::vector<std::string> table(256);
    auto utf8 = [](uint32_t cp) {
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      return s;
    };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      table[b] = utf8(printable ? b : 256 + next++);
    }
    return table;
  }();
  return kTable;
}

common::StatusOr<std::string> UnicodeToBytes(std::string_view text, std::string_view where) {
  static const std::map<std::string, char> kInverse = [] {
    std::map<std::string, char> inverse;
    const auto& table = ByteToUnicode();
    for (int b = 0; b < 256; ++b) inverse[table[b]] = static_cast<char>(b);
    return inverse;
  }();
  std::string bytes;
  for (size_t i = 0; i < text.size();) {
    const size_t len = (static_cast<unsigned char>(text[i]) & 0x80) == 0 ? 1 : 2;
    auto it = kInverse.find(std::string(text.substr(i, len)));
    if (it == kInverse.end()) {
      return common::DataLoss("{}: '{}' is not in GPT-2's byte alphabet", where, common::Printable(text));
    }
    bytes += it->second;
    i += len;
  }
  return bytes;
}

std::string BytesToUnicode(std::string_view bytes) {
  std::string text;
  for (unsigned char b : bytes) text += ByteToUnicode()[b];
  return text;
}

}  // namespace

void SplitWords(std::string_view text, const std::function<void(std::string_view)>& emit) {
  static constexpr std::string_view kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  const size_t n = text.size();
  size_t i = 0;
  auto run_end = [&](size_t from, CharClass cls) {
    while (from < n && Classify(text[from]) == cls) ++from;
    return from;
  };
  while (i < n) {
    if (text[i] == '\'') {
      bool matched = false;
      for (std::string_view c : kContractions) {
        if (text.substr(i, c.size()) == c) {
          emit(text.substr(i, c.size()));
          i += c.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    const CharClass cls = Classify(text[i]);
    if (cls != CharClass::kSpace) {
      const size_t end = run_end(i, cls);
      emit(text.substr(i, end - i));
      i = end;
      continue;
    }
    const size_t end = run_end(i, CharClass::kSpace);
    if (end == n) {
      emit(text.substr(i));
      break;
    }
    // Whitespace before a word: all but the last character form one token; a last ' ' joins the word.
    if (end - i > 1) emit(text.substr(i, end - 1 - i));
    const size_t last = end - 1;
    if (text[last] == ' ') {
      const CharClass next = Classify(text[end]);
      const size_t word_end = run_end(end, next);
      emit(text.substr(last, word_end - last));
      i = word_end;
    } else {
      emit(text.substr(last, 1));
      i = end;
    }
  }
}

void Tokenizer::IndexTokens() {
  ids_.clear();
  for (size_t id = 0; id < tokens_.size(); ++id) ids_.emplace(tokens_[id], static_cast<int32_t>(id));
}

void Tokenizer::IndexMerges() {
  for (int b = 0; b < 256; ++b) byte_ids_[b] = ids_.at(std::string(1, static_cast<char>(b)));
  merge_rank_.clear();
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto [a, b] = merges_[rank];
    merge_rank_[PairKey(a, b)] = {static_cast<int32_t>(rank), ids_.at(tokens_[a] + tokens_[b])};
  }
  auto eod = ids_.find(std::string(kEndOfText));
  eod_ = eod == ids_.end() ? -1 : eod->second;
}

common::StatusOr<Tokenizer> Tokenizer::Load(const std::filesystem::path& vocab_json,
                                            const std::filesystem::path& merges_txt) {
  SRUNWAY_ASSIGN_OR_RETURN(std::string vocab, common::ReadFile(vocab_json));
  SRUNWAY_ASSIGN_OR_RETURN(std::string merges, common::ReadFile(merges_txt));
  return Parse(vocab, vocab_json, merges, merges_txt);
}

common::StatusOr<Tokenizer> Tokenizer::Parse(std::string_view vocab_text, const std::filesystem::path& vocab_json,
                                             std::string_view merges, const std::filesystem::path& merges_txt) {
  SRUNWAY_ASSIGN_OR_RETURN(common::Json vocab, common::ParseJson(vocab_text, vocab_json.string()));
  if (!vocab.is_object()) return common::DataLoss("{}: expected an object of token -> id", vocab_json.string());
  Tokenizer tok;
  tok.tokens_.resize(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [text, id_json] : vocab.items()) {
    if (!id_json.is_number_integer()) return common::DataLoss("{}: id of '{}' is not an integer", vocab_json.string(),
                              common::Printable(text));
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(vocab.size()) || seen[id]) {
      return common::DataLoss("{}: id {} of '{}' is out of range or repeated", vocab_json.string(), id,
                              common::Printable(text));
    }
    seen[id] = true;
    if (text == kEndOfText) {
      tok.tokens_[id] = text;
    } else {
      SRUNWAY_ASSIGN_OR_RETURN(tok.tokens_[id], UnicodeToBytes(text, vocab_json.string()));
    }
  }
  tok.IndexTokens();
  for (int b = 0; b < 256; ++b) {
    if (!tok.ids_.contains(std::string(1, static_cast<char>(b)))) {
      return common::DataLoss("{}: byte {} has no token; a byte-level vocabulary needs all 256", vocab_json.string(), b);
    }
  }
  const auto& ids = tok.ids_;
  int line_number = 0;
  size_t pos = 0;
  while (pos < merges.size()) {
    size_t end = merges.find('\n', pos);
    if (end == std::string::npos) end = merges.size();
    std::string_view line = merges.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t space = line.find(' ');
    const std::string where = fmt::format("{}:{}", merges_txt.string(), line_number);
    if (space == std::string_view::npos) return common::DataLoss("{}: expected two tokens separated by a space", where);
    SRUNWAY_ASSIGN_OR_RETURN(std::string a, UnicodeToBytes(line.substr(0, space), where));
    SRUNWAY_ASSIGN_OR_RETURN(std::string b, UnicodeToBytes(line.substr(space + 1), where));
    auto ia = ids.find(a), ib = ids.find(b), iab = ids.find(a + b);
    if (ia == ids.end() || ib == ids.end() || iab == ids.end()) {
      return common::DataLoss("{}: merge '{}' uses or makes a token that is not in {}", where, common::Printable(line),
                              vocab_json.filename().string());
    }
    tok.merges_.push_back({ia->second, ib->second});
  }
  tok.IndexMerges();
  return tok;
}

common::StatusOr<Tokenizer> Tokenizer::Train(const std::unordered_map<std::string, int64_t>& word_counts,
                                             int vocab_size, const std::function<bool(int, int)>& progress) {
  if (vocab_size < 257) return common::InvalidArgument("--train-vocab {}: must be at least 257 (256 bytes + end of text)", vocab_size);
  Tokenizer tok;
  for (int b = 0; b < 256; ++b) tok.tokens_.push_back(std::string(1, static_cast<char>(b)));
  // Words in a fixed order so that training is deterministic whatever the hash map's order.
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts.begin(), word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [word, count] : sorted) {
    words.emplace_back(word.begin(), word.end());
    for (int32_t& symbol : words.back()) symbol = static_cast<unsigned char>(symbol);
    counts.push_back(count);
  }
  // Pair counts, the pairs ordered by count (ties: smallest pair key first), and which words hold each pair.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::set<std::pair<int64_t, uint64_t>> by_count;  // (-count, key)
  std::unordered_map<uint64_t, std::vector<int32_t>> where;
  auto adjust = [&](uint64_t key, int64_t delta, int32_t word) {
    int64_t& count = pair_count[key];
    if (count > 0) by_count.erase({-count, key});
    count += delta;
    if (count > 0) by_count.insert({-count, key});
    if (delta > 0) where[key].push_back(word);
  };
  for (size_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) adjust(PairKey(words[w][i], words[w][i + 1]), counts[w], static_cast<int32_t>(w));
  }
  const int wanted = vocab_size - 257;
  std::vector<int32_t> visited(words.size(), -1);
  for (int m = 0; m < wanted && !by_count.empty(); ++m) {
    const auto [neg_count, key] = *by_count.begin();
    if (-neg_count < 2) break;
    const int32_t a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xffffffff);
    const int32_t merged = static_cast<int32_t>(tok.tokens_.size());
    tok.tokens_.push_back(tok.tokens_[a] + tok.tokens_[b]);
    tok.merges_.push_back({a, b});
    std::vector<int32_t> holders = std::move(where[key]);
    where.erase(key);
    for (int32_t w : holders) {
      if (visited[w] == m) continue;
      visited[w] = m;
      std::vector<int32_t>& symbols = words[w];
      bool has = false;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) has |= symbols[i] == a && symbols[i + 1] == b;
      if (!has) continue;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) adjust(PairKey(symbols[i], symbols[i + 1]), -counts[w], w);
      std::vector<int32_t> next;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(symbols[i]);
        }
      }
      symbols = std::move(next);
      for (size_t i = 0; i + 1 < symbols.size(); ++i) adjust(PairKey(symbols[i], symbols[i + 1]), counts[w], w);
    }
    if (progress && (m % 64 == 0 || m + 1 == wanted) && !progress(m + 1, wanted)) {
      return common::Aborted("{} of {} merges done", m + 1, wanted);
    }
  }
  tok.tokens_.push_back(std::string(kEndOfText));
  tok.IndexTokens();
  tok.IndexMerges();
  return tok;
}

common::StatusOr<std::vector<common::AtomicFile>> Tokenizer::Stage(const std::filesystem::path& vocab_json,
                                                                   const std::filesystem::path& merges_txt) const {
  common::Json vocab = common::Json::object();
  for (size_t id = 0; id < tokens_.size(); ++id) {
    vocab[static_cast<int32_t>(id) == eod_ ? tokens_[id] : BytesToUnicode(tokens_[id])] = id;
  }
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : merges_) merges += BytesToUnicode(tokens_[a]) + " " + BytesToUnicode(tokens_[b]) + "\n";
  std::vector<common::AtomicFile> files;
  for (const auto& [path, text] : {std::pair{vocab_json, vocab.dump() + "\n"}, std::pair{merges_txt, merges}}) {
    SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile file, common::StageFile(path, text));
    files.push_back(std::move(file));
  }
  return files;
}

common::Status Tokenizer::Save(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt) const {
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<common::AtomicFile> files, Stage(vocab_json, merges_txt));
  return common::CommitTogether(files);
}

void Tokenizer::EncodeWord(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  for (unsigned char c : word) symbols.push_back(byte_ids_[c]);
  while (symbols.size() > 1) {
    int32_t best_rank = INT32_MAX, best_id = -1;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merge_rank_.find(PairKey(symbols[i], symbols[i + 1]));
      if (it != merge_rank_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best_id = it->second.second;
      }
    }
    if (best_id < 0) break;
    const auto [a, b] = merges_[best_rank];
    size_t out_i = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
        symbols[out_i++] = best_id;
        ++i;
      } else {
        symbols[out_i++] = symbols[i];
      }
    }
    symbols.resize(out_i);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  SplitWords(text, [&](std::string_view word) { EncodeWord(word, out); });
  return out;
}

std::string Tokenizer::Decode(const std::vector<int32_t>& tokens) const {
  std::string text;
  for (int32_t id : tokens) {
    if (id >= 0 && id < static_cast<int32_t>(tokens_.size())) text += tokens_[id];
  }
  return text;
}

}  // namespace srunway::trainer
