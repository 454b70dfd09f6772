// Byte-level BPE: pre-tokenizer, encoder, decoder, trainer, GPT-2 file formats, Hugging Face's tokenizer.json.
#include "trainer/data/tokenizer.h"

#include <fmt/format.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

#include "common/fs.h"
#include "common/json.h"
#include "common/parse.h"

namespace srunway::trainer {
namespace {

uint64_t PairKey(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

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

struct Tokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

namespace {

// GPT-2's pattern, as Hugging Face's ByteLevel pre-tokenizer applies it with use_regex.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The pattern compiled for UTF-8 text with Unicode properties (\s, \p{L} as Hugging Face's Oniguruma reads them);
// invalid UTF-8 matches nothing, and becomes pieces of its own instead of an error.
common::StatusOr<std::shared_ptr<const Tokenizer::Regex>> CompileSplit(std::string_view pattern,
                                                                       std::string_view where) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  auto regex = std::make_shared<Tokenizer::Regex>();
  regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &offset, nullptr);
  if (regex->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof(message));
    return common::DataLoss("{}: pre-tokenizer pattern '{}': {} at offset {}", where, common::Printable(pattern),
                            reinterpret_cast<const char*>(message), offset);
  }
  pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // faster where the JIT is there; the interpreter otherwise
  return std::shared_ptr<const Tokenizer::Regex>(std::move(regex));
}

// The files read here (a vocabulary of 128000 tokens is one object): keys sorted, found without a linear search.
using ReadJson = common::SortedJson;

// One JSON value's string, or an object's "content" (tokenizer_config.json's tokens come in both forms).
std::string TokenText(const ReadJson& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  return {};
}

std::string_view TypeOf(const ReadJson& value) {
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string()) return "";
  return value["type"].get_ref<const std::string&>();
}

bool FlagOf(const ReadJson& value, const char* key) {
  return value.contains(key) && value[key].is_boolean() && value[key].get<bool>();
}

// Whether a pre-tokenizer is of `type` or a Sequence that holds one.
bool HoldsType(const ReadJson& stage, std::string_view type) {
  if (TypeOf(stage) == type) return true;
  if (TypeOf(stage) != "Sequence" || !stage.contains("pretokenizers") || !stage["pretokenizers"].is_array()) {
    return false;
  }
  return std::any_of(stage["pretokenizers"].begin(), stage["pretokenizers"].end(),
                     [&](const ReadJson& inner) { return HoldsType(inner, type); });
}

// Every `from` in `text` replaced by `to` (nothing, where `from` is empty: a Replace of " " by "" makes the
// metaspace empty).
std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0;;) {
    const size_t found = text.find(from, at);
    out.append(text.substr(at, found == std::string_view::npos ? std::string_view::npos : found - at));
    if (found == std::string_view::npos) return out;
    out.append(to);
    at = found + from.size();
  }
}

// Whether `text` is UTF-8 throughout.
bool IsUtf8(std::string_view text) {
  utf8proc_int32_t code_point = 0;
  for (size_t at = 0; at < text.size();) {
    const utf8proc_ssize_t length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + at),
                                                     static_cast<utf8proc_ssize_t>(text.size() - at), &code_point);
    if (length <= 0) return false;
    at += static_cast<size_t>(length);
  }
  return true;
}

constexpr std::string_view kReplacementCharacter = "\uFFFD";

// The little-endian number in `bytes`' first four (or fewer) bytes: a protobuf fixed32, a SentencePiece map's.
uint32_t LittleEndian32(std::string_view bytes) {
  uint32_t value = 0;
  for (size_t i = std::min<size_t>(4, bytes.size()); i > 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[i - 1]);
  }
  return value;
}

// The length of the UTF-8 character that `text` starts with (1 for a byte that starts none).
size_t CharLength(std::string_view text) {
  utf8proc_int32_t code_point = 0;
  const utf8proc_ssize_t length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                                   static_cast<utf8proc_ssize_t>(text.size()), &code_point);
  return length > 0 ? static_cast<size_t>(length) : 1;
}

// A tokenizer.json's or tokenizer.model's config: tokenizer_config.json beside it, or PREFIX.tokenizer_config.json
// beside PREFIX.tokenizer.json or PREFIX.tokenizer.model (srunway-prep's copies beside a dataset).
std::filesystem::path ConfigBeside(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  const bool named = name.ends_with("tokenizer.json") || name.ends_with("tokenizer.model");
  return file.parent_path() / (named ? name.substr(0, name.rfind('.')) + "_config.json"
                                     : std::string("tokenizer_config.json"));
}

// Protobuf's wire format, read (a SentencePiece model is a ModelProto): each field of one message in turn, its
// number and its value, a varint, or the bytes of a length-delimited field (a string or a message), or the 4 or 8
// bytes of a fixed-size one. `where` names the file in errors.
struct WireField {
  uint32_t number = 0;
  int type = 0;  // 0 varint, 1 fixed 64, 2 length-delimited, 5 fixed 32
  uint64_t varint = 0;
  std::string_view bytes;
};

common::Status ReadFields(std::string_view message, const std::string& where,
                          const std::function<common::Status(const WireField&)>& visit) {
  size_t at = 0;
  auto varint = [&](uint64_t& value) -> bool {
    value = 0;
    for (int shift = 0; shift < 64 && at < message.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(message[at++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  };
  while (at < message.size()) {
    const size_t start = at;
    uint64_t key = 0;
    WireField field;
    if (!varint(key)) return common::DataLoss("{}: not a SentencePiece model: a cut field at byte {}", where, start);
    field.number = static_cast<uint32_t>(key >> 3);
    field.type = static_cast<int>(key & 7);
    const size_t width = field.type == 1 ? 8 : field.type == 5 ? 4 : 0;
    bool whole = true;
    if (field.type == 0) {
      whole = varint(field.varint);
    } else if (field.type == 2) {
      uint64_t length = 0;
      whole = varint(length) && length <= message.size() - at;
      if (whole) field.bytes = message.substr(at, static_cast<size_t>(length));
      at += whole ? static_cast<size_t>(length) : 0;
    } else if (width > 0) {
      whole = width <= message.size() - at;
      if (whole) field.bytes = message.substr(at, width);
      at += whole ? width : 0;
    } else {
      return common::DataLoss("{}: not a SentencePiece model: field {} of wire type {} at byte {}", where,
                              field.number, field.type, start);
    }
    if (!whole) return common::DataLoss("{}: not a SentencePiece model: a cut field at byte {}", where, start);
    SRUNWAY_RETURN_IF_ERROR(visit(field));
  }
  return common::Status::Ok();
}

// GPT-2's pattern compiled once, for GPT-2's files, --train-vocab and a ByteLevel pre-tokenizer's use_regex.
const std::shared_ptr<const Tokenizer::Regex>& Gpt2Split() {
  static const std::shared_ptr<const Tokenizer::Regex> kGpt2 = *CompileSplit(kGpt2Pattern, "GPT-2's pattern");
  return kGpt2;
}

// Split's "Isolated" behaviour: each match of `code` in `text` is a piece, and so is each stretch between matches.
void ForEachSplit(pcre2_code* code, std::string_view text, const std::function<void(std::string_view)>& emit) {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  auto next = [&](size_t from, size_t to) {
    if (to > from) emit(text.substr(from, to - from));
  };
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t done = 0, from = 0;
  while (match != nullptr && from < text.size()) {
    if (pcre2_match(code, subject, text.size(), from, 0, match.get(), nullptr) < 0) break;
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
    if (span[1] == span[0]) {  // an empty match makes no piece: search again from the next character
      from = span[0] + 1;
      while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
      continue;
    }
    next(done, span[0]);
    next(span[0], span[1]);
    done = from = span[1];
  }
  next(done, text.size());
}

}  // namespace

// GPT-2's own pattern with Unicode's classes, as OpenAI's encoder, Megatron's GPT2BPETokenizer and Hugging Face's
// ByteLevel apply it. Until 2026-12-05 a hand-written splitter took every byte >= 0x80 for a letter: a space before
// a no-break space (U+00A0) joined it ("foo \u00a0bar" gave 21943 5624 5657 with GPT-2's files, not 21943 220 1849
// 5657), and merges learned from its words could cross GPT-2's boundaries.
void SplitWords(std::string_view text, const std::function<void(std::string_view)>& emit) {
  ForEachSplit(Gpt2Split()->code, text, emit);
}

void Tokenizer::IndexTokens() {
  ids_.clear();
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (!tokens_[id].empty()) ids_.emplace(tokens_[id], static_cast<int32_t>(id));  // empty: a gap in the ids
  }
}

void Tokenizer::IndexByteTokens(const std::function<bool(int32_t)>& is_byte) {
  for (int b = 0; b < 256; ++b) {
    auto found = ids_.find(fmt::format("<0x{:02X}>", b));
    byte_tokens_[b] = found != ids_.end() && (!is_byte || is_byte(found->second)) ? found->second : -1;
  }
}

void Tokenizer::IndexMerges() {
  for (int b = 0; b < 256; ++b) {
    auto it = ids_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }
  merge_rank_.clear();
  for (size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto [a, b] = merges_[rank];
    merge_rank_.emplace(PairKey(a, b), std::pair{static_cast<int32_t>(rank), ids_.at(tokens_[a] + tokens_[b])});
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
  SRUNWAY_ASSIGN_OR_RETURN(ReadJson vocab, common::ParseSortedJson(vocab_text, vocab_json.string()));
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

common::StatusOr<std::vector<common::AtomicFile>> Tokenizer::StageBeside(const std::string& prefix) const {
  if (!hugging_face() && !sentencepiece()) return Stage(prefix + ".vocab.json", prefix + ".merges.txt");
  std::vector<common::AtomicFile> files;
  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile json,
                           sentencepiece() ? common::StageFile(prefix + ".tokenizer.model", sp_model_)
                                           : common::StageFile(prefix + ".tokenizer.json", hf_json_));
  files.push_back(std::move(json));
  if (!hf_config_.empty()) {
    SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile config,
                             common::StageFile(prefix + ".tokenizer_config.json", hf_config_));
    files.push_back(std::move(config));
  }
  return files;
}

namespace {

// A tokenizer's file (`path`, or `name` in the directory `path`), and tokenizer_config.json beside it ("": none).
struct TokenizerFiles {
  std::filesystem::path path;
  std::string text, config;
};

common::StatusOr<TokenizerFiles> ReadTokenizerFiles(const std::filesystem::path& path, const char* name) {
  std::error_code ec;
  TokenizerFiles files;
  files.path = std::filesystem::is_directory(path, ec) ? path / name : path;
  SRUNWAY_ASSIGN_OR_RETURN(files.text, common::ReadFile(files.path));
  auto config = common::ReadFile(ConfigBeside(files.path));
  if (!config.ok() && config.status().code() != common::StatusCode::kNotFound) return config.status();
  if (config.ok()) files.config = std::move(*config);
  return files;
}

}  // namespace

common::StatusOr<Tokenizer> Tokenizer::LoadHuggingFace(const std::filesystem::path& path) {
  SRUNWAY_ASSIGN_OR_RETURN(TokenizerFiles files, ReadTokenizerFiles(path, "tokenizer.json"));
  return ParseHuggingFace(files.text, files.config, files.path);
}

common::StatusOr<Tokenizer> Tokenizer::LoadSentencePiece(const std::filesystem::path& path,
                                                         std::optional<bool> add_bos) {
  SRUNWAY_ASSIGN_OR_RETURN(TokenizerFiles files, ReadTokenizerFiles(path, "tokenizer.model"));
  return ParseSentencePiece(files.text, files.config, files.path, add_bos);
}

common::StatusOr<Tokenizer> TokenizerSource::Load() const {
  return model.empty() ? Tokenizer::Load(vocab, merges) : Tokenizer::LoadModel(model, type);
}

std::optional<TokenizerSource> TokenizerSource::Given(const std::string& model, const std::string& type,
                                                      const std::string& vocab, const std::string& merges) {
  if (!model.empty()) return TokenizerSource{model, type, "", ""};
  if (!vocab.empty() || !merges.empty()) return TokenizerSource{"", "", vocab, merges};
  return std::nullopt;
}

TokenizerSource TokenizerBeside(const std::string& prefix) {
  std::error_code ec;
  for (const char* beside : {".tokenizer.json", ".tokenizer.model"}) {
    if (std::filesystem::exists(prefix + beside, ec)) return TokenizerSource{prefix + beside, "", "", ""};
  }
  return TokenizerSource{"", "", prefix + ".vocab.json", prefix + ".merges.txt"};
}

common::StatusOr<Tokenizer> Tokenizer::LoadModel(const std::filesystem::path& path, std::string_view type) {
  if (SentencePieceType(type)) return LoadSentencePiece(path, type == "Llama2Tokenizer");
  std::error_code ec;
  const bool model = std::filesystem::is_directory(path, ec)
                         ? !std::filesystem::exists(path / "tokenizer.json", ec) &&
                               std::filesystem::exists(path / "tokenizer.model", ec)
                         : path.extension() == ".model";
  if (type.empty() && model) return LoadSentencePiece(path);
  return LoadHuggingFace(path);
}

namespace {

// A SentencePiece model's piece (ModelProto.SentencePiece) and its types.
enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
struct Piece {
  std::string text;
  float score = 0;
  int64_t type = kNormal;
};

}  // namespace

common::StatusOr<Tokenizer> Tokenizer::ParseSentencePiece(std::string_view model, std::string_view config,
                                                          const std::filesystem::path& where,
                                                          std::optional<bool> add_bos) {
  const std::string file = where.string();
  // ModelProto: pieces (1), trainer_spec (2), normalizer_spec (3), with the defaults of sentencepiece_model.proto.
  std::vector<Piece> pieces;
  uint64_t model_type = 1;  // UNIGRAM
  bool byte_fallback = false, suffix = false, dummy_prefix = true, strip = true, escape = true;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2;
  std::string normalizer_name;
  std::string_view charsmap;
  const common::Status read = ReadFields(model, file, [&](const WireField& field) -> common::Status {
    if (field.number == 1 && field.type == 2) {
      Piece& piece = pieces.emplace_back();
      return ReadFields(field.bytes, file, [&](const WireField& part) -> common::Status {
        if (part.number == 1 && part.type == 2) piece.text = std::string(part.bytes);
        if (part.number == 2 && part.type == 5) {
          piece.score = std::bit_cast<float>(LittleEndian32(part.bytes));
        }
        if (part.number == 3 && part.type == 0) piece.type = static_cast<int64_t>(part.varint);
        return common::Status::Ok();
      });
    }
    if (field.number == 2 && field.type == 2) {  // TrainerSpec
      return ReadFields(field.bytes, file, [&](const WireField& spec) -> common::Status {
        const auto int32 = static_cast<int64_t>(static_cast<int32_t>(spec.varint));  // negatives are 10 bytes
        if (spec.type != 0) return common::Status::Ok();
        if (spec.number == 3) model_type = spec.varint;
        if (spec.number == 24) suffix = spec.varint != 0;
        if (spec.number == 35) byte_fallback = spec.varint != 0;
        if (spec.number == 40) unk_id = int32;
        if (spec.number == 41) bos_id = int32;
        if (spec.number == 42) eos_id = int32;
        return common::Status::Ok();
      });
    }
    if (field.number == 3 && field.type == 2) {  // NormalizerSpec
      return ReadFields(field.bytes, file, [&](const WireField& spec) -> common::Status {
        if (spec.number == 1 && spec.type == 2) normalizer_name = std::string(spec.bytes);
        if (spec.number == 2 && spec.type == 2) charsmap = spec.bytes;
        if (spec.number == 3 && spec.type == 0) dummy_prefix = spec.varint != 0;
        if (spec.number == 4 && spec.type == 0) strip = spec.varint != 0;
        if (spec.number == 5 && spec.type == 0) escape = spec.varint != 0;
        return common::Status::Ok();
      });
    }
    return common::Status::Ok();
  });
  SRUNWAY_RETURN_IF_ERROR(read);
  if (pieces.empty()) return common::DataLoss("{}: not a SentencePiece model: no pieces", file);
  if (model_type != 2) {
    return common::InvalidArgument("{}: a SentencePiece {} model: srunway reads BPE models only (Llama 2's)", file,
                                   model_type == 1   ? "Unigram"
                                   : model_type == 3 ? "word"
                                   : model_type == 4 ? "character"
                                                     : fmt::format("type {}", model_type));
  }
  // The compiled map: the double array's size in bytes (4, little-endian), the array, the texts it maps to.
  auto map = std::make_shared<Charsmap>();
  if (!charsmap.empty()) {
    const uint32_t trie_bytes = LittleEndian32(charsmap);
    if (charsmap.size() < 4 || trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > charsmap.size() - 4) {
      return common::DataLoss("{}: normalizer '{}': its compiled character map of {} bytes is damaged (a double "
                              "array of {} bytes)", file, common::Printable(normalizer_name), charsmap.size(),
                              trie_bytes);
    }
    map->units.resize(trie_bytes / 4);
    for (size_t i = 0; i < map->units.size(); ++i) map->units[i] = LittleEndian32(charsmap.substr(4 + 4 * i));
    map->strings = std::string(charsmap.substr(4 + trie_bytes));
  }
  if (!escape || suffix) {
    return common::InvalidArgument("{}: {}: srunway reads models that write a space as \u2581 before a word (Llama "
                                   "2's)", file, suffix ? "treat_whitespace_as_suffix" : "escape_whitespaces off");
  }
  const auto count = static_cast<int64_t>(pieces.size());
  if (count >= (int64_t{1} << 24)) return common::DataLoss("{}: {} pieces: too many", file, count);
  for (const auto& [name, id, none] : {std::tuple{"unk_id", unk_id, false}, std::tuple{"bos_id", bos_id, true},
                                       std::tuple{"eos_id", eos_id, true}}) {
    if (!(id >= 0 && id < count) && !(none && id == -1)) {
      return common::DataLoss("{}: trainer_spec.{} {} is not the id of one of its {} pieces", file, name, id, count);
    }
  }

  Tokenizer tok;
  tok.sp_model_ = std::string(model);
  tok.characters_ = true;
  tok.normalize_first_ = true;
  tok.byte_fallback_ = byte_fallback;
  tok.fuse_unk_ = true;
  tok.unk_ = static_cast<int32_t>(unk_id);
  for (int64_t id = 0; id < count; ++id) {
    const Piece& piece = pieces[id];
    if (piece.text.empty() || !IsUtf8(piece.text) || piece.type < kNormal || piece.type > kByte) {
      return common::DataLoss("{}: piece {} is {}", file, id,
                              piece.text.empty()      ? "empty"
                              : !IsUtf8(piece.text) ? fmt::format("'{}', not UTF-8", common::Printable(piece.text))
                                                      : fmt::format("of an unknown type {}", piece.type));
    }
    tok.tokens_.push_back(piece.text);
    if (piece.type == kUserDefined) {  // matched in the text as they are, as added tokens
      tok.added_.emplace_back(piece.text, static_cast<int32_t>(id));
      tok.added_first_[static_cast<unsigned char>(piece.text[0])] = true;
    }
  }
  std::stable_sort(tok.added_.begin(), tok.added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  tok.IndexTokens();
  tok.IndexByteTokens([&](int32_t id) { return pieces[id].type == kByte; });
  // Merges as transformers' converter writes them: each normal piece's splits into two pieces, the pieces by score,
  // the highest first (ties in the order of their ids), a piece's splits by their halves' ids.
  std::vector<int32_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pieces[a].score > pieces[b].score; });
  for (int32_t id : order) {
    if (pieces[id].type != kNormal) continue;
    const std::string_view text = pieces[id].text;
    std::vector<std::pair<int32_t, int32_t>> splits;
    for (size_t cut = CharLength(text); cut < text.size(); cut += CharLength(text.substr(cut))) {
      auto left = tok.ids_.find(std::string(text.substr(0, cut))), right = tok.ids_.find(std::string(text.substr(cut)));
      if (left != tok.ids_.end() && right != tok.ids_.end()) splits.emplace_back(left->second, right->second);
    }
    std::sort(splits.begin(), splits.end());
    tok.merges_.insert(tok.merges_.end(), splits.begin(), splits.end());
  }
  tok.IndexMerges();
  // Normalized as SentencePiece does, the whole text before the user's pieces are found in it.
  tok.charsmap_ = std::move(map);
  tok.normalizers_.push_back({Normalizer::Kind::kCharsmap, "", ""});
  if (strip) tok.normalizers_.push_back({Normalizer::Kind::kStrip, "", ""});
  if (dummy_prefix) tok.normalizers_.push_back({Normalizer::Kind::kPrepend, "", tok.meta_});
  tok.normalizers_.push_back({Normalizer::Kind::kReplace, " ", tok.meta_});
  // SentencePiece's decoder takes the dummy prefix off again (transformers' converted Llama tokenizer: Strip).
  if (dummy_prefix) tok.strip_.start = 1;

  // <s> before each document: the flag's choice, else tokenizer_config.json's add_bos_token (true without it).
  bool bos = add_bos.value_or(true);
  if (!add_bos && !config.empty()) {
    SRUNWAY_ASSIGN_OR_RETURN(ReadJson settings, common::ParseSortedJson(config, ConfigBeside(where).string()));
    if (settings.is_object() && settings.contains("add_bos_token") && settings["add_bos_token"].is_boolean()) {
      bos = settings["add_bos_token"].get<bool>();
    }
  }
  tok.bos_ = static_cast<int32_t>(bos_id);
  if (bos && bos_id >= 0) tok.before_ = {tok.bos_};
  tok.eod_ = static_cast<int32_t>(eos_id);
  tok.eod_text_ = eos_id >= 0 ? pieces[eos_id].text : "";
  // tokenizer_config.json as transformers' LlamaTokenizer reads it beside the model.
  common::Json settings = {{"tokenizer_class", "LlamaTokenizer"}, {"add_bos_token", bos}, {"add_eos_token", false},
                           {"unk_token", pieces[unk_id].text}, {"legacy", true}};
  settings["bos_token"] = bos_id >= 0 ? common::Json(pieces[bos_id].text) : common::Json();
  settings["eos_token"] = eos_id >= 0 ? common::Json(pieces[eos_id].text) : common::Json();
  tok.hf_config_ = settings.dump(2) + "\n";
  return tok;
}

namespace {

// A Hugging Face tokenizer's ids may leave gaps (a token taken out), but stay below twice its number of tokens and
// 65536 more, so that a file cannot make the table of tokens (one per id up to the largest) as large as it likes:
// an id of 16666666 among 14 tokens took 15 s to load (the fuzzer's). Qwen3's largest is 151668, of 151669 tokens.
int64_t HuggingFaceIdLimit(size_t tokens) { return 2 * static_cast<int64_t>(tokens) + 65536; }

}  // namespace

common::StatusOr<Tokenizer> Tokenizer::ParseHuggingFace(std::string_view tokenizer_json, std::string_view config,
                                                        const std::filesystem::path& where) {
  const std::string file = where.string();
  SRUNWAY_ASSIGN_OR_RETURN(ReadJson json, common::ParseSortedJson(tokenizer_json, file));
  if (!json.is_object() || !json.contains("model") || !json["model"].is_object()) {
    return common::DataLoss("{}: expected a tokenizer.json object with a \"model\"", file);
  }
  const ReadJson& model = json["model"];
  const std::string_view type = TypeOf(model);
  if (type != "BPE" && !(type.empty() && model.contains("merges"))) {
    return common::InvalidArgument("{}: model {}: srunway reads BPE tokenizers only (byte-level: GPT-2's, Llama 3's, "
                                   "Qwen2's and Qwen3's; SentencePiece-style: Llama 2's, Mistral's)", file,
                                   type.empty() ? "without a type" : type);
  }
  // Byte-level BPE (a ByteLevel pre-tokenizer: the vocabulary spells bytes in GPT-2's alphabet), or else
  // SentencePiece-style BPE over characters, which the checks below require to write spaces as a metaspace.
  const ReadJson null_json;
  const ReadJson& pre_tokenizer = json.contains("pre_tokenizer") ? json["pre_tokenizer"] : null_json;
  const bool characters = !HoldsType(pre_tokenizer, "ByteLevel");
  if (!characters && FlagOf(model, "byte_fallback")) {
    return common::InvalidArgument("{}: model.byte_fallback with a ByteLevel pre-tokenizer: byte-level BPE has every "
                                   "byte already", file);
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get_ref<const std::string&>().empty()) {
      return common::InvalidArgument("{}: model.{} '{}': not a byte-level BPE's", file, key,
                                     common::Printable(model[key].get_ref<const std::string&>()));
    }
  }
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0) {
    return common::InvalidArgument("{}: model.dropout: BPE dropout samples other tokens each time; data are "
                                   "tokenized without it", file);
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return common::DataLoss("{}: model.vocab: expected an object of token -> id", file);
  }
  const ReadJson& vocab = model["vocab"];
  const ReadJson empty = ReadJson::array();
  const ReadJson& added = json.contains("added_tokens") && !json["added_tokens"].is_null() ? json["added_tokens"]
                                                                                               : empty;
  if (!added.is_array()) return common::DataLoss("{}: added_tokens: expected an array", file);

  Tokenizer tok;
  tok.hf_json_ = std::string(tokenizer_json);
  tok.hf_config_ = std::string(config);
  tok.characters_ = characters;
  std::vector<bool> seen;
  const int64_t limit = HuggingFaceIdLimit(vocab.size() + added.size());
  auto place = [&](int64_t id, std::string bytes, std::string_view text) -> common::Status {
    if (id < 0 || id >= limit) {
      return common::DataLoss("{}: id {} of '{}' is out of range: {} tokens take ids 0 to {}", file, id,
                              common::Printable(text), vocab.size() + added.size(), limit - 1);
    }
    if (id >= static_cast<int64_t>(tok.tokens_.size())) {
      tok.tokens_.resize(static_cast<size_t>(id) + 1);
      seen.resize(static_cast<size_t>(id) + 1);
    }
    if (seen[id] && tok.tokens_[id] != bytes) {
      return common::DataLoss("{}: id {} is both '{}' and '{}'", file, id, common::Printable(tok.tokens_[id]),
                              common::Printable(text));
    }
    seen[id] = true;
    tok.tokens_[id] = std::move(bytes);
    return common::Status::Ok();
  };
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer()) {
      return common::DataLoss("{}: model.vocab: id of '{}' is not an integer", file, common::Printable(text));
    }
    // A token outside GPT-2's byte alphabet (a special token kept in the vocabulary) stands for its own text; so
    // does every token of a SentencePiece-style vocabulary.
    auto bytes = characters ? common::StatusOr<std::string>(text) : UnicodeToBytes(text, file);
    SRUNWAY_RETURN_IF_ERROR(place(id.get<int64_t>(), bytes.ok() ? std::move(*bytes) : text, text));
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const ReadJson& token = added[i];
    const std::string content = token.is_object() ? TokenText(token) : "";
    if (content.empty() || !token.contains("id") || !token["id"].is_number_integer()) {
      return common::DataLoss("{}: added_tokens[{}]: expected an id and a non-empty content", file, i);
    }
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      if (FlagOf(token, flag)) {
        return common::InvalidArgument("{}: added token '{}' has {}, which srunway does not apply", file,
                                       common::Printable(content), flag);
      }
    }
    SRUNWAY_RETURN_IF_ERROR(place(token["id"].get<int64_t>(), content, content));
    tok.added_.emplace_back(content, static_cast<int32_t>(token["id"].get<int64_t>()));
    tok.added_first_[static_cast<unsigned char>(content[0])] = true;
  }
  std::stable_sort(tok.added_.begin(), tok.added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  tok.IndexTokens();

  // Merges: "a b" (the older form) or ["a", "b"], of tokens in the vocabulary, the pair's text one too.
  const ReadJson& merges = model.contains("merges") ? model["merges"] : empty;
  if (!merges.is_array()) return common::DataLoss("{}: model.merges: expected an array", file);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const ReadJson& merge = merges[rank];
    std::string a, b;
    if (merge.is_string()) {
      const std::string& line = merge.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos) {
        return common::DataLoss("{}: model.merges[{}] '{}': expected two tokens separated by a space", file, rank,
                                common::Printable(line));
      }
      a = line.substr(0, space);
      b = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      return common::DataLoss("{}: model.merges[{}]: expected \"a b\" or [\"a\", \"b\"]", file, rank);
    }
    auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || iab == vocab.end()) {
      return common::DataLoss("{}: model.merges[{}] '{} {}' uses or makes a token that is not in model.vocab", file,
                              rank, common::Printable(a), common::Printable(b));
    }
    // Both halves in GPT-2's byte alphabet, as the pair then is: a merge of other tokens could never apply.
    if (!characters && (!UnicodeToBytes(a, file).ok() || !UnicodeToBytes(b, file).ok())) continue;
    tok.merges_.push_back({ia->get<int32_t>(), ib->get<int32_t>()});
  }
  tok.ignore_merges_ = FlagOf(model, "ignore_merges");
  if (characters) {
    tok.byte_fallback_ = FlagOf(model, "byte_fallback");
    tok.fuse_unk_ = FlagOf(model, "fuse_unk");
    const std::string unk = model.contains("unk_token") ? TokenText(model["unk_token"]) : "";
    if (!unk.empty()) {
      auto found = tok.ids_.find(unk);
      if (found == tok.ids_.end()) {
        return common::DataLoss("{}: model.unk_token '{}' is not in model.vocab", file, common::Printable(unk));
      }
      tok.unk_ = found->second;
    }
    tok.IndexByteTokens();
  }

  // The normalizer: NFC (Qwen2's), Prepend and Replace of a string (Llama 2's), alone or in a Sequence, in order.
  std::function<common::Status(const ReadJson&)> normalize = [&](const ReadJson& step) -> common::Status {
    const std::string_view kind = TypeOf(step);
    if (kind == "Sequence" && step.contains("normalizers") && step["normalizers"].is_array()) {
      for (const ReadJson& inner : step["normalizers"]) SRUNWAY_RETURN_IF_ERROR(normalize(inner));
      return common::Status::Ok();
    }
    if (kind == "NFC") {
      tok.normalizers_.push_back({Normalizer::Kind::kNfc, "", ""});
      return common::Status::Ok();
    }
    if (kind == "Prepend" && step.contains("prepend") && step["prepend"].is_string()) {
      tok.normalizers_.push_back({Normalizer::Kind::kPrepend, "", step["prepend"].get<std::string>()});
      return common::Status::Ok();
    }
    const bool string_pattern = step.contains("pattern") && step["pattern"].is_object() &&
                                step["pattern"].contains("String") && step["pattern"]["String"].is_string() &&
                                !step["pattern"]["String"].get_ref<const std::string&>().empty();
    if (kind == "Replace" && string_pattern && step.contains("content") && step["content"].is_string()) {
      tok.normalizers_.push_back({Normalizer::Kind::kReplace, step["pattern"]["String"].get<std::string>(),
                                  step["content"].get<std::string>()});
      return common::Status::Ok();
    }
    return common::InvalidArgument("{}: normalizer {}: srunway applies NFC (Qwen2's), Prepend and Replace of a "
                                   "string (Llama 2's), or none", file, kind.empty() ? step.dump() : kind);
  };
  if (json.contains("normalizer") && !json["normalizer"].is_null()) {
    SRUNWAY_RETURN_IF_ERROR(normalize(json["normalizer"]));
  }

  // The pre-tokenizer: Split patterns (Isolated) and ByteLevel last, alone or in a Sequence.
  bool byte_level = false;
  std::function<common::Status(const ReadJson&)> add = [&](const ReadJson& stage) -> common::Status {
    const std::string_view kind = TypeOf(stage);
    if (byte_level) {
      return common::InvalidArgument("{}: pre_tokenizer: {} after ByteLevel; srunway reads ByteLevel last", file,
                                     kind);
    }
    if (kind == "Sequence" && stage.contains("pretokenizers") && stage["pretokenizers"].is_array()) {
      for (const ReadJson& inner : stage["pretokenizers"]) SRUNWAY_RETURN_IF_ERROR(add(inner));
      return common::Status::Ok();
    }
    if (characters && kind == "Metaspace" && !tok.metaspace_) {
      tok.metaspace_ = true;
      if (stage.contains("replacement") && stage["replacement"].is_string()) {
        tok.meta_ = stage["replacement"].get<std::string>();
      }
      if (tok.meta_.empty() || CharLength(tok.meta_) != tok.meta_.size()) {
        return common::DataLoss("{}: pre_tokenizer Metaspace: replacement '{}' is not one character", file,
                                common::Printable(tok.meta_));
      }
      // prepend_scheme, or the older add_prefix_space (true: always); always where neither is there.
      std::string scheme = stage.contains("add_prefix_space") && !FlagOf(stage, "add_prefix_space") ? "never"
                                                                                                     : "always";
      if (stage.contains("prepend_scheme") && stage["prepend_scheme"].is_string()) {
        scheme = stage["prepend_scheme"].get<std::string>();
      }
      if (scheme != "always" && scheme != "first" && scheme != "never") {
        return common::DataLoss("{}: pre_tokenizer Metaspace: prepend_scheme '{}' is not always, first or never",
                                file, common::Printable(scheme));
      }
      tok.meta_prepend_ = scheme == "always" ? MetaPrepend::kAlways
                          : scheme == "first" ? MetaPrepend::kFirst
                                              : MetaPrepend::kNever;
      tok.meta_split_ = !stage.contains("split") || FlagOf(stage, "split");
      return common::Status::Ok();
    }
    if (kind == "ByteLevel") {
      byte_level = true;
      tok.prefix_space_ = FlagOf(stage, "add_prefix_space");
      if (!stage.contains("use_regex") || FlagOf(stage, "use_regex")) {
        tok.splits_.push_back(Gpt2Split());
      }
      return common::Status::Ok();
    }
    if (kind == "Split" && !characters) {
      const bool regex = stage.contains("pattern") && stage["pattern"].is_object() &&
                         stage["pattern"].contains("Regex") && stage["pattern"]["Regex"].is_string();
      const bool isolated = stage.contains("behavior") && stage["behavior"] == "Isolated";
      if (!regex || !isolated || FlagOf(stage, "invert")) {
        return common::InvalidArgument("{}: pre_tokenizer Split: srunway reads a Regex pattern whose matches are "
                                       "Isolated, not inverted (as Llama 3's and Qwen2's)", file);
      }
      SRUNWAY_ASSIGN_OR_RETURN(auto compiled, CompileSplit(stage["pattern"]["Regex"].get<std::string>(), file));
      tok.splits_.push_back(std::move(compiled));
      return common::Status::Ok();
    }
    return common::InvalidArgument("{}: pre_tokenizer {}: srunway reads byte-level BPE's (ByteLevel, Split, a "
                                   "Sequence of them) and SentencePiece-style BPE's (one Metaspace, or none)", file,
                                   kind.empty() ? stage.dump() : kind);
  };
  if (!pre_tokenizer.is_null()) SRUNWAY_RETURN_IF_ERROR(add(pre_tokenizer));
  // SentencePiece-style BPE: spaces are a metaspace, from the pre-tokenizer or (Llama 2's) a normalizer's Replace.
  const auto replace_space = std::find_if(tok.normalizers_.begin(), tok.normalizers_.end(), [](const Normalizer& n) {
    return n.kind == Normalizer::Kind::kReplace && n.from == " ";
  });
  if (characters && !tok.metaspace_ && replace_space == tok.normalizers_.end()) {
    return common::InvalidArgument("{}: neither a ByteLevel pre-tokenizer (byte-level BPE: GPT-2's, Llama 3's, "
                                   "Qwen2's) nor a Metaspace one or a normalizer that replaces spaces "
                                   "(SentencePiece-style BPE: Llama 2's, Mistral's)", file);
  }
  if (characters && !tok.metaspace_) tok.meta_ = replace_space->to;

  // The post-processor's special tokens around the document, as transformers' tokenizer(text) adds them.
  std::function<common::Status(const ReadJson&)> wrap = [&](const ReadJson& processor) -> common::Status {
    const std::string_view kind = TypeOf(processor);
    if (kind == "ByteLevel") return common::Status::Ok();  // offsets only
    if (kind == "Sequence" && processor.contains("processors") && processor["processors"].is_array()) {
      for (const ReadJson& inner : processor["processors"]) SRUNWAY_RETURN_IF_ERROR(wrap(inner));
      return common::Status::Ok();
    }
    if (kind != "TemplateProcessing" || !processor.contains("single") || !processor["single"].is_array()) {
      return common::InvalidArgument("{}: post_processor {}: srunway reads ByteLevel and TemplateProcessing", file,
                                     kind.empty() ? processor.dump() : kind);
    }
    const ReadJson& specials = processor.contains("special_tokens") ? processor["special_tokens"] : empty;
    bool after = false;
    for (const ReadJson& item : processor["single"]) {
      if (item.is_object() && item.contains("Sequence")) {
        after = true;
        continue;
      }
      const std::string name = item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object()
                                   ? TokenText(item["SpecialToken"].value("id", ReadJson()))
                                   : "";
      if (name.empty() || !specials.is_object() || !specials.contains(name) || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array()) {
        return common::DataLoss("{}: post_processor: template item {} names no special token with ids", file,
                                item.dump());
      }
      for (const ReadJson& id : specials[name]["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tok.vocab_size()) {
          return common::DataLoss("{}: post_processor: special token '{}' has id {}, not one of the vocabulary's",
                                  file, common::Printable(name), id.dump());
        }
        (after ? tok.after_ : tok.before_).push_back(id.get<int32_t>());
      }
    }
    return common::Status::Ok();
  };
  if (json.contains("post_processor") && !json["post_processor"].is_null()) {
    SRUNWAY_RETURN_IF_ERROR(wrap(json["post_processor"]));
  }

  // The decoder: only what it does at a text's ends is read; how tokens become text follows from the model's kind
  // (bytes, or characters with metaspaces and <0xXX> tokens), whatever decoders say so.
  std::function<common::Status(const ReadJson&)> decode = [&](const ReadJson& stage) -> common::Status {
    const std::string_view kind = TypeOf(stage);
    if (kind == "Sequence" && stage.contains("decoders") && stage["decoders"].is_array()) {
      for (const ReadJson& inner : stage["decoders"]) SRUNWAY_RETURN_IF_ERROR(decode(inner));
    } else if (kind == "Strip") {
      if (stage.contains("content")) {
        const ReadJson& content = stage["content"];
        if (!content.is_string() || content.get_ref<const std::string&>().empty() ||
            CharLength(content.get_ref<const std::string&>()) != content.get_ref<const std::string&>().size()) {
          return common::DataLoss("{}: decoder Strip: content {} is not one character", file, content.dump());
        }
        tok.strip_.content = content.get<std::string>();
      }
      for (const auto& [key, count] : {std::pair{"start", &tok.strip_.start}, std::pair{"stop", &tok.strip_.stop}}) {
        if (!stage.contains(key)) continue;
        if (!stage[key].is_number_unsigned()) {
          return common::DataLoss("{}: decoder Strip: {} {} is not a count", file, key, stage[key].dump());
        }
        *count = static_cast<int64_t>(std::min<uint64_t>(stage[key].get<uint64_t>(), INT64_MAX));
      }
    } else if (kind == "Metaspace" && characters) {
      // prepend_scheme, or the older add_prefix_space, as the pre-tokenizer reads them: anything but never drops.
      tok.meta_first_dropped_ = !(stage.contains("add_prefix_space") && !FlagOf(stage, "add_prefix_space"));
      if (stage.contains("prepend_scheme") && stage["prepend_scheme"].is_string()) {
        tok.meta_first_dropped_ = stage["prepend_scheme"].get_ref<const std::string&>() != "never";
      }
    }
    return common::Status::Ok();
  };
  if (json.contains("decoder") && !json["decoder"].is_null()) SRUNWAY_RETURN_IF_ERROR(decode(json["decoder"]));

  tok.IndexMerges();
  // The end of document (Megatron's eod, transformers' eos_token_id) and the beginning: tokenizer_config.json's.
  tok.eod_ = -1;
  tok.eod_text_.clear();
  if (!config.empty()) {
    const std::string config_file = ConfigBeside(where).string();
    SRUNWAY_ASSIGN_OR_RETURN(ReadJson settings, common::ParseSortedJson(config, config_file));
    auto id_of = [&](const char* key, int32_t& id, std::string* text) -> common::Status {
      if (!settings.is_object() || !settings.contains(key)) return common::Status::Ok();
      const std::string token = TokenText(settings[key]);
      if (token.empty()) return common::Status::Ok();  // null: none
      auto named = std::find_if(tok.added_.begin(), tok.added_.end(), [&](const auto& a) { return a.first == token; });
      auto in_vocab = vocab.find(token);
      if (named == tok.added_.end() && in_vocab == vocab.end()) {
        return common::DataLoss("{}: {} '{}' is not a token of {}", config_file, key, common::Printable(token), file);
      }
      id = named != tok.added_.end() ? named->second : in_vocab->get<int32_t>();
      if (text != nullptr) *text = token;
      return common::Status::Ok();
    };
    SRUNWAY_RETURN_IF_ERROR(id_of("eos_token", tok.eod_, &tok.eod_text_));
    SRUNWAY_RETURN_IF_ERROR(id_of("bos_token", tok.bos_, nullptr));
  }
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
  // {"token":id,...} in the order of the ids, as GPT-2's file; written a token at a time (a Json object finds each
  // new key by a linear search: 2.4 s for GPT-2's 50257 tokens).
  std::string vocab = "{";
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string text = static_cast<int32_t>(id) == eod_ ? tokens_[id] : BytesToUnicode(tokens_[id]);
    vocab += fmt::format("{}{}:{}", id == 0 ? "" : ",", common::Json(text).dump(), id);
  }
  vocab += "}\n";
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : merges_) merges += BytesToUnicode(tokens_[a]) + " " + BytesToUnicode(tokens_[b]) + "\n";
  std::vector<common::AtomicFile> files;
  for (const auto& [path, text] : {std::pair{vocab_json, vocab}, std::pair{merges_txt, merges}}) {
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
  if (ignore_merges_) {
    if (auto whole = ids_.find(std::string(word)); whole != ids_.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  if (characters_) {
    CharacterSymbols(word, symbols);
  } else {
    for (unsigned char c : word) {
      if (byte_ids_[c] >= 0) symbols.push_back(byte_ids_[c]);
    }
  }
  Merge(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void Tokenizer::CharacterSymbols(std::string_view word, std::vector<int32_t>& symbols) const {
  bool unknown = false;  // the last symbol is the unknown token, for fuse_unk
  std::string character;
  for (size_t at = 0; at < word.size();) {
    const size_t length = CharLength(word.substr(at));
    character.assign(word.substr(at, length));
    at += length;
    if (auto found = ids_.find(character); found != ids_.end()) {
      symbols.push_back(found->second);
      unknown = false;
      continue;
    }
    if (byte_fallback_ && std::all_of(character.begin(), character.end(), [&](char c) {
          return byte_tokens_[static_cast<unsigned char>(c)] >= 0;
        })) {
      for (char c : character) symbols.push_back(byte_tokens_[static_cast<unsigned char>(c)]);
      unknown = false;
      continue;
    }
    if (unk_ >= 0 && !(fuse_unk_ && unknown)) symbols.push_back(unk_);
    unknown = unk_ >= 0;
  }
}

void Tokenizer::Merge(std::vector<int32_t>& symbols) const {
  // A short word (a byte-level BPE's, split by its pattern): a scan for the best pair per merge, which costs less
  // than the queue below where there are a few symbols (srunway-prep, 4.9M tokens of English words, one worker:
  // 1.7 s against 2.6).
  constexpr size_t kShort = 48;
  while (symbols.size() > 1 && symbols.size() <= kShort) {
    int32_t best_rank = INT32_MAX, merged = -1;
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merge_rank_.find(PairKey(symbols[i], symbols[i + 1]));
      if (it != merge_rank_.end() && it->second.first < best_rank) {  // the leftmost of equal ranks
        std::tie(best_rank, merged) = it->second;
        best = i;
      }
    }
    if (merged < 0) return;
    symbols[best] = merged;
    symbols.erase(symbols.begin() + static_cast<ptrdiff_t>(best) + 1);
  }
  if (symbols.size() <= kShort) return;
  // A list of the symbols (a merged one's right half becomes -1) and a queue of the pairs that merge: O(n log n),
  // where a SentencePiece-style document without a splitting pre-tokenizer is one word of thousands of characters.
  const auto count = static_cast<int32_t>(symbols.size());
  std::vector<int32_t> next(symbols.size()), previous(symbols.size());
  for (int32_t i = 0; i < count; ++i) {
    next[i] = i + 1 < count ? i + 1 : -1;
    previous[i] = i - 1;
  }
  using Candidate = std::pair<int32_t, int32_t>;  // (rank, position of the left symbol)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto offer = [&](int32_t at) {
    if (at < 0 || next[at] < 0) return;
    auto it = merge_rank_.find(PairKey(symbols[at], symbols[next[at]]));
    if (it != merge_rank_.end()) queue.emplace(it->second.first, at);
  };
  for (int32_t i = 0; i + 1 < count; ++i) offer(i);
  while (!queue.empty()) {
    const auto [rank, at] = queue.top();
    queue.pop();
    const auto [a, b] = merges_[rank];
    const int32_t right = symbols[at] < 0 ? -1 : next[at];
    if (right < 0 || symbols[at] != a || symbols[right] != b) continue;  // merged or changed since it was offered
    symbols[at] = merge_rank_.at(PairKey(a, b)).second;
    symbols[right] = -1;
    next[at] = next[right];
    if (next[at] >= 0) previous[next[at]] = at;
    offer(previous[at]);
    offer(at);
  }
  std::erase(symbols, -1);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  if (!hugging_face() && !sentencepiece()) {
    SplitWords(text, [&](std::string_view word) { EncodeWord(word, out); });
    return out;
  }
  std::string normalized;
  if (normalize_first_) {
    normalized = Normalize(text);
    text = normalized;
  }
  out = before_;
  size_t start = 0;  // where the text not yet encoded begins
  for (size_t i = 0; i < text.size();) {
    const std::pair<std::string, int32_t>* found = nullptr;
    if (added_first_[static_cast<unsigned char>(text[i])]) {
      for (const auto& added : added_) {
        if (text.substr(i).starts_with(added.first)) {
          found = &added;
          break;
        }
      }
    }
    if (found == nullptr) {
      ++i;
      continue;
    }
    EncodeSegment(text.substr(start, i - start), start == 0, out);
    out.push_back(found->second);
    i += found->first.size();
    start = i;
  }
  EncodeSegment(text.substr(start), start == 0, out);
  out.insert(out.end(), after_.begin(), after_.end());
  return out;
}

std::string Tokenizer::MapCharacters(std::string_view text) const {
  const std::vector<uint32_t>& units = charsmap_->units;
  // Darts-clone's unit: a leaf flag (bit 8), a label (the low byte, and bit 31 set on a leaf, so no label matches
  // one), an offset to the children, a leaf's value (its low 31 bits).
  auto offset = [](uint32_t unit) { return (unit >> 10) << ((unit & (1U << 9)) >> 6); };
  if (units.empty() && IsUtf8(text)) return std::string(text);  // the identity's map: nothing to change
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const std::string_view rest = text.substr(at);
    const auto user = !added_first_[static_cast<unsigned char>(rest[0])]
                          ? added_.end()
                          : std::find_if(added_.begin(), added_.end(),
                                         [&](const auto& a) { return rest.starts_with(a.first); });
    if (user != added_.end()) {  // longest first
      out.append(user->first);
      at += user->first.size();
      continue;
    }
    size_t longest = 0, value = 0;
    size_t node = units.empty() ? 0 : offset(units[0]);
    for (size_t i = 0; i < rest.size() && !units.empty(); ++i) {
      const auto label = static_cast<unsigned char>(rest[i]);
      node ^= label;
      if (node >= units.size() || (units[node] & ((1U << 31) | 0xFF)) != label) break;
      const bool leaf = (units[node] >> 8) & 1;
      node ^= offset(units[node]);
      if (node >= units.size()) break;
      if (leaf) {
        longest = i + 1;
        value = units[node] & ((1U << 31) - 1);
      }
    }
    if (longest > 0 && value < charsmap_->strings.size()) {
      const std::string_view strings = charsmap_->strings;
      const size_t end = strings.find('\0', value);
      out.append(strings.substr(value, end == std::string_view::npos ? std::string_view::npos : end - value));
      at += longest;
    } else if (static_cast<unsigned char>(rest[0]) < 0x80) {
      out.push_back(rest[0]);
      ++at;
    } else if (const size_t length = CharLength(rest); length > 1) {  // 1: the lead byte starts no character
      out.append(rest.substr(0, length));
      at += length;
    } else {
      out.append(kReplacementCharacter);
      ++at;
    }
  }
  return out;
}

std::string Tokenizer::Normalize(std::string_view text) const {
  std::string changed(text);
  for (const Normalizer& step : normalizers_) {
    switch (step.kind) {
      case Normalizer::Kind::kNfc: {
        utf8proc_uint8_t* nfc = nullptr;
        const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                                     static_cast<utf8proc_ssize_t>(text.size()), &nfc, options);
        // Invalid UTF-8 stays as it is: Hugging Face's tokenizers take none to normalize.
        changed = length >= 0 ? std::string(reinterpret_cast<const char*>(nfc), static_cast<size_t>(length))
                              : std::string(text);
        std::free(nfc);
        break;
      }
      case Normalizer::Kind::kPrepend: changed = text.empty() ? std::string() : step.to + std::string(text); break;
      case Normalizer::Kind::kReplace: changed = ReplaceAll(text, step.from, step.to); break;
      case Normalizer::Kind::kCharsmap: changed = MapCharacters(text); break;
      case Normalizer::Kind::kStrip: {
        std::string stripped;
        bool space = true;  // drops the spaces before the first character, and each after another
        for (char c : text) {
          if (c != ' ' || !space) stripped.push_back(c);
          space = c == ' ';
        }
        if (!stripped.empty() && stripped.back() == ' ') stripped.pop_back();
        changed = std::move(stripped);
        break;
      }
    }
    text = changed;
  }
  return changed;
}

void Tokenizer::EncodeSegment(std::string_view text, bool first, std::vector<int32_t>& out) const {
  std::string changed;  // the text as the normalizers and the pre-tokenizer leave it, where they change it
  if (!normalize_first_) {
    changed = Normalize(text);
    text = changed;
  }
  if (text.empty()) return;  // also where a Replace took all of it
  if (metaspace_) {
    changed = ReplaceAll(text, " ", meta_);
    const bool prepend = meta_prepend_ == MetaPrepend::kAlways || (meta_prepend_ == MetaPrepend::kFirst && first);
    if (prepend && !std::string_view(changed).starts_with(meta_)) changed.insert(0, meta_);
    text = changed;
  }
  if (prefix_space_ && text.front() != ' ') {
    changed = " " + std::string(text);
    text = changed;
  }
  if (!characters_) {
    SplitPieces(text, 0, [&](std::string_view piece) { EncodeWord(piece, out); });
    return;
  }
  if (!(metaspace_ && meta_split_)) {
    EncodeWord(text, out);
    return;
  }
  // Metaspace's split: each piece starts at a metaspace (the first one where the text does not).
  size_t start = 0;
  for (size_t at = text.find(meta_, 1); at != std::string_view::npos; at = text.find(meta_, at + 1)) {
    EncodeWord(text.substr(start, at - start), out);
    start = at;
  }
  EncodeWord(text.substr(start), out);
}

void Tokenizer::SplitPieces(std::string_view text, size_t stage,
                            const std::function<void(std::string_view)>& emit) const {
  if (stage == splits_.size()) {
    emit(text);
    return;
  }
  ForEachSplit(splits_[stage]->code, text, [&](std::string_view piece) { SplitPieces(piece, stage + 1, emit); });
}

std::string Tokenizer::Decode(const std::vector<int32_t>& tokens, bool continues, bool valid) const {
  std::string text;
  bool first = !continues;
  std::string bytes;  // a SentencePiece-style run of <0xXX> tokens
  auto end_bytes = [&] {
    if (valid && !IsUtf8(bytes)) {
      for (size_t i = 0; i < bytes.size(); ++i) text += kReplacementCharacter;
    } else {
      text += bytes;
    }
    bytes.clear();
  };
  for (int32_t id : tokens) {
    if (id < 0 || id >= static_cast<int32_t>(tokens_.size())) continue;
    const bool at_start = std::exchange(first, false);
    if (!characters_) {
      text += tokens_[id];
      continue;
    }
    // A SentencePiece-style token: <0xXX> is that byte, a metaspace a space (none in a Metaspace decoder's first).
    const std::string& token = tokens_[id];
    unsigned int byte = 0;
    if (token.size() == 6 && token.starts_with("<0x") && token.ends_with('>') &&
        std::sscanf(token.c_str(), "<0x%2X>", &byte) == 1 && byte_tokens_[byte & 0xFF] == id) {
      bytes += static_cast<char>(byte);
    } else {
      end_bytes();
      text += ReplaceAll(token, meta_, at_start && meta_first_dropped_ ? "" : " ");
    }
  }
  end_bytes();
  if (valid && !characters_) text = ValidUtf8(text);
  // The decoder's Strip, on the whole text (it comes after Fuse in the decoders that have it).
  const std::string_view strip = strip_.content;
  std::string_view kept = text;
  for (int64_t n = continues ? 0 : strip_.start; n > 0 && kept.starts_with(strip); --n) {
    kept.remove_prefix(strip.size());
  }
  for (int64_t n = strip_.stop; n > 0 && kept.ends_with(strip); --n) kept.remove_suffix(strip.size());
  return std::string(kept);
}

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const auto lead = static_cast<unsigned char>(text[at]);
    // The sequence's length and its second byte's range (Unicode's table of well-formed UTF-8).
    const int length = lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                                      : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    const unsigned char low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    int good = length == 0 ? 0 : 1;  // bytes of a well-formed start
    while (good > 0 && good < length && at + good < text.size()) {
      const auto next = static_cast<unsigned char>(text[at + good]);
      if (next < (good == 1 ? low : 0x80) || next > (good == 1 ? high : 0xBF)) break;
      ++good;
    }
    if (length > 0 && good == length) {
      out.append(text.substr(at, static_cast<size_t>(length)));
    } else {
      out.append(kReplacementCharacter);
    }
    at += static_cast<size_t>(std::max(good, 1));
  }
  return out;
}

std::string Tokenizer::DecodeDocument(std::span<const int32_t> tokens) const {
  if (!tokens.empty() && eod_ >= 0 && tokens.back() == eod_) tokens = tokens.first(tokens.size() - 1);
  if (tokens.size() >= after_.size() && std::equal(after_.rbegin(), after_.rend(), tokens.rbegin())) {
    tokens = tokens.first(tokens.size() - after_.size());
  }
  if (tokens.size() >= before_.size() && std::equal(before_.begin(), before_.end(), tokens.begin())) {
    tokens = tokens.subspan(before_.size());
  }
  return DecodeText(std::vector<int32_t>(tokens.begin(), tokens.end()));
}

}  // namespace srunway::trainer
