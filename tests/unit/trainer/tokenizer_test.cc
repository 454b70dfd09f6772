// Byte-level BPE: GPT-2's word split, training, lossless round trips, GPT-2 file formats, bad files; Hugging Face's
// tokenizer.json (patterns, ignore_merges, added tokens, templates, NFC, SentencePiece-style files, refusals); a
// SentencePiece model file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <tuple>

#include "common/fs.h"
#include "common/json.h"
#include "common/parse.h"
#include "tests/unit/temp_dir.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words;
  SplitWords(text, [&](std::string_view w) { words.emplace_back(w); });
  return words;
}

TEST(SplitWordsTest, FollowsGpt2Pattern) {
  EXPECT_EQ(Words("Hello world"), (std::vector<std::string>{"Hello", " world"}));
  EXPECT_EQ(Words("I'm here, don't"), (std::vector<std::string>{"I", "'m", " here", ",", " don", "'t"}));
  EXPECT_EQ(Words("abc123 45!!"), (std::vector<std::string>{"abc", "123", " 45", "!!"}));
  // Whitespace runs: all but the last space stay together; the last joins the next word.
  EXPECT_EQ(Words("a   b"), (std::vector<std::string>{"a", "  ", " b"}));
  EXPECT_EQ(Words("a\n\nb"), (std::vector<std::string>{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Words("end  "), (std::vector<std::string>{"end", "  "}));
  EXPECT_EQ(Words("caf\xc3\xa9 ok"), (std::vector<std::string>{"caf\xc3\xa9", " ok"}));
}

std::unordered_map<std::string, int64_t> Count(std::string_view text) {
  std::unordered_map<std::string, int64_t> counts;
  SplitWords(text, [&](std::string_view w) { ++counts[std::string(w)]; });
  return counts;
}

const char kCorpus[] =
    "the cat sat on the mat. the cat ate the rat. then the cat sat again, and the rat ran.\n"
    "Numbers 1234 and 1234 again; the end.\n";

TEST(TokenizerTest, TrainsMergesAndRoundTripsAnyBytes) {
  auto tok = Tokenizer::Train(Count(kCorpus), 300);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_LE(tok->vocab_size(), 300);
  EXPECT_GT(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eod(), tok->vocab_size() - 1);
  std::vector<int32_t> ids = tok->Encode(" the cat");
  EXPECT_LT(ids.size(), 8u) << "frequent words are merged";
  EXPECT_EQ(tok->Decode(tok->Encode(kCorpus)), kCorpus);
  Rng rng(5);
  for (int round = 0; round < 50; ++round) {
    std::string bytes(rng.Below(64), '\0');
    for (char& c : bytes) c = static_cast<char>(rng.Below(256));
    EXPECT_EQ(tok->Decode(tok->Encode(bytes)), bytes);
  }
}

TEST(TokenizerTest, TrainingIsDeterministic) {
  auto a = Tokenizer::Train(Count(kCorpus), 290);
  auto b = Tokenizer::Train(Count(kCorpus), 290);
  EXPECT_EQ(a->Encode(kCorpus), b->Encode(kCorpus));
  EXPECT_FALSE(Tokenizer::Train(Count(kCorpus), 100).ok());
}

class TokenizerFileTest : public ::testing::Test {
 protected:
  testing::TempDir temp_{"srunway-tok-test"};
  const fs::path& dir_ = temp_.path();
};

TEST_F(TokenizerFileTest, SavedFilesLoadAndEncodeTheSame) {
  auto tok = Tokenizer::Train(Count(kCorpus), 300);
  ASSERT_TRUE(tok->Save(dir_ / "vocab.json", dir_ / "merges.txt").ok());
  auto loaded = Tokenizer::Load(dir_ / "vocab.json", dir_ / "merges.txt");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->Encode(kCorpus), tok->Encode(kCorpus));
  EXPECT_EQ(loaded->eod(), tok->eod());
  // GPT-2's byte alphabet: a space is stored as "\u0120".
  const std::string vocab = *common::ReadFile(dir_ / "vocab.json");
  EXPECT_NE(vocab.find("\xc4\xa0the"), std::string::npos);
  EXPECT_EQ(common::ReadFile(dir_ / "merges.txt")->rfind("#version: 0.2\n", 0), 0u);
}

TEST_F(TokenizerFileTest, BadFilesNameTheProblem) {
  auto tok = Tokenizer::Train(Count(kCorpus), 280);
  ASSERT_TRUE(tok->Save(dir_ / "vocab.json", dir_ / "merges.txt").ok());
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "bad_merges.txt", "#version: 0.2\nzzq qqz\n").ok());
  auto bad = Tokenizer::Load(dir_ / "vocab.json", dir_ / "bad_merges.txt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad_merges.txt:2"), std::string::npos) << bad.status().message();
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "bad_vocab.json", "{\"a\": 0}").ok());
  auto no_bytes = Tokenizer::Load(dir_ / "bad_vocab.json", dir_ / "merges.txt");
  ASSERT_FALSE(no_bytes.ok());
  EXPECT_NE(no_bytes.status().message().find("all 256"), std::string::npos);
  EXPECT_FALSE(Tokenizer::Load(dir_ / "missing.json", dir_ / "merges.txt").ok());
}

// Hugging Face's tokenizer.json, built here from a vocabulary trained on kCorpus (GPT-2's files as Save writes them).
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|)"
    R"(\s+(?!\S)|\s+)";

common::Json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

common::Json SplitThenByteLevel(std::string_view pattern) {
  const common::Json split = {{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"},
                              {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, ByteLevel(false)}}};
}

class HuggingFaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto trained = Tokenizer::Train(Count(kCorpus), 300);
    ASSERT_TRUE(trained.ok());
    gpt2_ = std::move(*trained);
    next_id_ = gpt2_.vocab_size();
    ASSERT_TRUE(gpt2_.Save(dir_ / "vocab.json", dir_ / "merges.txt").ok());
    vocab_ = *common::ParseJson(*common::ReadFile(dir_ / "vocab.json"), "vocab.json");
    const std::string merges = *common::ReadFile(dir_ / "merges.txt");
    merges_ = common::Json::array();
    for (size_t at = merges.find('\n') + 1; at < merges.size();) {
      const size_t end = merges.find('\n', at);
      merges_.push_back(merges.substr(at, end - at));
      at = end + 1;
    }
  }

  // GPT-2's tokenizer.json for the trained vocabulary: ByteLevel with GPT-2's pattern, <|endoftext|> added.
  common::Json File() const {
    const common::Json model = {{"type", "BPE"},        {"dropout", nullptr},       {"unk_token", nullptr},
                                {"continuing_subword_prefix", nullptr},          {"end_of_word_suffix", nullptr},
                                {"fuse_unk", false},    {"byte_fallback", false},   {"ignore_merges", false},
                                {"vocab", vocab_},      {"merges", merges_}};
    const common::Json eot = {{"id", gpt2_.eod()}, {"content", "<|endoftext|>"}, {"single_word", false},
                              {"lstrip", false},   {"rstrip", false},            {"normalized", true},
                              {"special", true}};
    return {{"version", "1.0"},        {"truncation", nullptr},     {"padding", nullptr},
            {"added_tokens", {eot}},   {"normalizer", nullptr},     {"pre_tokenizer", ByteLevel(true)},
            {"post_processor", ByteLevel(true)}, {"decoder", ByteLevel(true)}, {"model", model}};
  }

  static Tokenizer Parse(const common::Json& file, std::string_view config = "") {
    auto tok = Tokenizer::ParseHuggingFace(file.dump(), config, "tokenizer.json");
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    return tok.ok() ? std::move(*tok) : Tokenizer();
  }

  // Adds `text` (GPT-2's byte alphabet) to the vocabulary under the next id, and returns the id.
  int32_t AddToVocab(common::Json& file, const std::string& text) {
    const int32_t id = next_id_++;
    file["model"]["vocab"][text] = id;
    return id;
  }

  testing::TempDir temp_{"srunway-hf-tok-test"};
  const fs::path& dir_ = temp_.path();
  Tokenizer gpt2_;
  common::Json vocab_, merges_;
  int32_t next_id_ = 0;
};

TEST_F(HuggingFaceTest, Gpt2FileEncodesAsItsVocabAndMerges) {
  const Tokenizer hf = Parse(File());
  common::Json pairs = File();
  for (common::Json& merge : pairs["model"]["merges"]) {  // the newer form, ["a", "b"]
    const std::string text = merge.get<std::string>();
    merge = {text.substr(0, text.find(' ')), text.substr(text.find(' ') + 1)};
  }
  const Tokenizer hf_pairs = Parse(pairs);
  EXPECT_EQ(hf.vocab_size(), gpt2_.vocab_size());
  EXPECT_EQ(hf.eod(), -1) << "without tokenizer_config.json there is no eos_token";
  Rng rng(11);
  std::vector<std::string> texts = {kCorpus, "the cat's 1234 mat!!  \n\n  sat", ""};
  const std::string alphabet = "the cat sat on mat 0123456789 .,;!?'\n\t  ABCxyz";
  for (int round = 0; round < 40; ++round) {
    std::string text(rng.Below(80), ' ');
    for (char& c : text) c = alphabet[rng.Below(alphabet.size())];
    texts.push_back(text);
  }
  for (const std::string& text : texts) {  // ASCII, where SplitWords is GPT-2's pattern exactly
    EXPECT_EQ(hf.Encode(text), gpt2_.Encode(text)) << common::Printable(text);
    EXPECT_EQ(hf_pairs.Encode(text), gpt2_.Encode(text)) << common::Printable(text);
    EXPECT_EQ(hf.Decode(hf.Encode(text)), text);
  }
}

TEST_F(HuggingFaceTest, SplitsAsLlama3AndQwen2PatternsWithIgnoreMerges) {
  // No merges: a piece is one token only where ignore_merges finds it whole in the vocabulary, else its bytes.
  common::Json file = File();
  file["model"]["merges"] = common::Json::array();
  file["model"]["ignore_merges"] = true;
  const int32_t n123 = AddToVocab(file, "123"), n45 = AddToVocab(file, "45");
  const int32_t dollar_hello = AddToVocab(file, "$hello"), world = AddToVocab(file, "\u0120world");
  const int32_t accented = AddToVocab(file, "h\u00c3\u00a9llo");  // "héllo": é is the bytes C3 A9
  const int32_t newlines = AddToVocab(file, "\u010a\u010a");       // "\n\n"
  auto byte = [&](char c) { return gpt2_.Encode(std::string(1, c)).at(0); };
  common::Json llama3 = file, qwen2 = file;
  llama3["pre_tokenizer"] = SplitThenByteLevel(kLlama3Pattern);
  qwen2["pre_tokenizer"] = SplitThenByteLevel(kQwen2Pattern);
  const Tokenizer l = Parse(llama3), q = Parse(qwen2), g = Parse(file);
  // Digits: in threes (Llama 3), one by one (Qwen2), as one run (GPT-2).
  EXPECT_EQ(l.Encode("12345"), (std::vector<int32_t>{n123, n45}));
  EXPECT_EQ(q.Encode("12345"), (std::vector<int32_t>{byte('1'), byte('2'), byte('3'), byte('4'), byte('5')}));
  EXPECT_EQ(g.Encode("12345").size(), 5u);
  // One character that is neither letter nor digit joins the letters after it; GPT-2 splits them.
  EXPECT_EQ(l.Encode("$hello"), (std::vector<int32_t>{dollar_hello}));
  EXPECT_EQ(q.Encode("$hello"), (std::vector<int32_t>{dollar_hello}));
  EXPECT_NE(g.Encode("$hello"), (std::vector<int32_t>{dollar_hello}));
  EXPECT_EQ(l.Encode(" world"), (std::vector<int32_t>{world}));
  EXPECT_EQ(l.Encode("h\xc3\xa9llo"), (std::vector<int32_t>{accented})) << "é is a letter (\\p{L})";
  EXPECT_EQ(l.Encode("x\n\n"), (std::vector<int32_t>{byte('x'), newlines}));
  // Without ignore_merges the whole word is not looked up.
  file["model"]["ignore_merges"] = false;
  llama3["model"]["ignore_merges"] = false;
  EXPECT_EQ(Parse(llama3).Encode("45"), (std::vector<int32_t>{byte('4'), byte('5')}));
  // Any bytes: invalid UTF-8 becomes pieces of its own, and every byte comes back.
  Rng rng(3);
  for (int round = 0; round < 50; ++round) {
    std::string bytes(rng.Below(48), '\0');
    for (char& c : bytes) c = static_cast<char>(rng.Below(256));
    EXPECT_EQ(l.Decode(l.Encode(bytes)), bytes);
    EXPECT_EQ(q.Decode(q.Encode(bytes)), bytes);
  }
}

TEST_F(HuggingFaceTest, AddedTokensTemplateAndConfig) {
  common::Json file = File();
  file["pre_tokenizer"] = SplitThenByteLevel(kLlama3Pattern);
  const int32_t start = next_id_, end = start + 1, bos = start + 2, prefix = start + 3;
  auto added = [](int32_t id, std::string content) {
    return common::Json{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                        {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  // "<|im" first: the file's order does not decide which of two added tokens at one place is taken.
  file["added_tokens"] = {added(prefix, "<|im"), added(start, "<|im_start|>"), added(end, "<|im_end|>"),
                          added(bos, "<|begin_of_text|>")};
  const common::Json begin = {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}};
  const common::Json text = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const common::Json special = {{"id", "<|begin_of_text|>"}, {"ids", {bos}}, {"tokens", {"<|begin_of_text|>"}}};
  const common::Json single = {begin, text}, pair = {begin, text, begin, text};
  const common::Json templated = {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair},
                                  {"special_tokens", {{"<|begin_of_text|>", special}}}};
  file["post_processor"] = {{"type", "Sequence"}, {"processors", {ByteLevel(false), templated}}};
  const std::string config = R"({"bos_token": {"content": "<|begin_of_text|>"}, "eos_token": "<|im_end|>"})";
  const Tokenizer tok = Parse(file, config);
  EXPECT_EQ(tok.vocab_size(), prefix + 1);
  EXPECT_EQ(tok.eod(), end);
  EXPECT_EQ(tok.eod_text(), "<|im_end|>");
  EXPECT_EQ(tok.bos(), bos);
  const Tokenizer plain = Parse([&] {
    common::Json same = file;
    same["added_tokens"] = common::Json::array();
    same["post_processor"] = nullptr;
    return same;
  }());
  std::vector<int32_t> expected = {bos, start};
  for (int32_t id : plain.Encode("user hi")) expected.push_back(id);
  expected.push_back(end);
  for (int32_t id : plain.Encode(" <|i")) expected.push_back(id);
  expected.push_back(prefix);
  // The longest added token wins where two start at the same place; the text between is encoded as usual.
  const std::string document = "<|im_start|>user hi<|im_end|> <|i<|im";
  EXPECT_EQ(tok.Encode(document), expected);
  EXPECT_EQ(tok.Decode(tok.Encode(document)), "<|begin_of_text|>" + document);
  EXPECT_EQ(tok.Encode(""), (std::vector<int32_t>{bos}));
}

TEST_F(HuggingFaceTest, NfcAndPrefixSpace) {
  common::Json file = File();
  file["pre_tokenizer"] = SplitThenByteLevel(kQwen2Pattern);
  const Tokenizer raw = Parse(file);
  file["normalizer"] = {{"type", "NFC"}};
  const Tokenizer nfc = Parse(file);
  const std::string composed = "caf\xc3\xa9 na\xc3\xafve", decomposed = "cafe\xcc\x81 nai\xcc\x88ve";
  EXPECT_EQ(nfc.Encode(decomposed), nfc.Encode(composed));
  EXPECT_EQ(nfc.Encode(composed), raw.Encode(composed));
  EXPECT_NE(raw.Encode(decomposed), raw.Encode(composed));
  EXPECT_EQ(nfc.Decode(nfc.Encode("\xff\xfe ok")), "\xff\xfe ok") << "invalid UTF-8 is left as it is";

  common::Json spaced = File();
  spaced["pre_tokenizer"]["add_prefix_space"] = true;
  const Tokenizer prefix = Parse(spaced);
  EXPECT_EQ(prefix.Encode("the cat"), gpt2_.Encode(" the cat"));
  EXPECT_EQ(prefix.Encode(" the cat"), gpt2_.Encode(" the cat"));
  // A Replace that leaves nothing leaves nothing to put a space before.
  spaced["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", ""}};
  EXPECT_TRUE(Parse(spaced).Encode("aaa").empty());
}

TEST_F(HuggingFaceTest, IdsMayLeaveGaps) {
  common::Json file = File();
  file["added_tokens"].push_back({{"id", next_id_ + 5}, {"content", "<|far|>"}, {"special", true}});
  const Tokenizer tok = Parse(file);
  EXPECT_EQ(tok.vocab_size(), next_id_ + 6);
  EXPECT_EQ(tok.Encode("a<|far|>"), (std::vector<int32_t>{gpt2_.Encode("a").at(0), next_id_ + 5}));
  EXPECT_EQ(tok.Decode({next_id_ + 1, next_id_ + 5}), "<|far|>") << "a gap decodes to nothing";
}

TEST_F(HuggingFaceTest, BytesMissingFromTheVocabularyAreDropped) {
  common::Json file = File();
  file["model"]["merges"] = common::Json::array();
  file["model"]["vocab"].erase("z");
  const Tokenizer tok = Parse(file);
  EXPECT_EQ(tok.Encode("azb"), tok.Encode("ab"));
}

// A SentencePiece-style BPE as transformers writes Llama 2's tokenizer.json: <unk> <s> </s>, the 256 byte tokens,
// then characters and merged pieces, spaces written as \u2581 (▁); Llama 2's (legacy) normalizer, <s> before each
// document.
common::Json SentencePieceFile() {
  common::Json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  int32_t id = 259;
  for (const char* piece : {"\u2581", "t", "h", "e", "a", "\u2581t", "he", "\u2581the", "a\u2581"}) vocab[piece] = id++;
  const common::Json merges = {"a \u2581", "\u2581 t", "h e", "\u2581t he"};
  auto special = [](int32_t token, const char* content) {
    return common::Json{{"id", token}, {"content", content}, {"special", true}, {"normalized", false}};
  };
  const common::Json bos = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  const common::Json sequence = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  return {{"version", "1.0"},
          {"added_tokens", {special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", {bos, sequence}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"}, {"unk_token", "<unk>"}, {"fuse_unk", true}, {"byte_fallback", true},
            {"vocab", vocab}, {"merges", merges}}}};
}

TEST_F(HuggingFaceTest, SentencePieceStyleBpe) {
  constexpr int32_t kBos = 1, kSpace = 259, kT = 260, kA = 263, kHe = 265, kThe = 266, kASpace = 267;
  auto byte = [](unsigned char b) { return 3 + static_cast<int32_t>(b); };
  // Llama 2's: a metaspace before every text between added tokens, even one that starts with a space.
  const Tokenizer legacy = Parse(SentencePieceFile(), R"({"bos_token": "<s>", "eos_token": "</s>"})");
  EXPECT_EQ(legacy.vocab_size(), 268);
  EXPECT_EQ(legacy.eod(), 2);
  EXPECT_EQ(legacy.bos(), kBos);
  EXPECT_EQ(legacy.Encode("the the"), (std::vector<int32_t>{kBos, kThe, kThe}));
  EXPECT_EQ(legacy.Encode(" the"), (std::vector<int32_t>{kBos, kSpace, kThe}));
  // A character outside the vocabulary is its UTF-8 bytes' tokens; decoding gives it back, ▁ as a space.
  const std::vector<int32_t> cjk = legacy.Encode("the\u65e5");
  EXPECT_EQ(cjk, (std::vector<int32_t>{kBos, kThe, byte(0xE6), byte(0x97), byte(0xA5)}));
  EXPECT_EQ(legacy.Decode({cjk.begin() + 1, cjk.end()}), "the\u65e5");
  EXPECT_EQ(legacy.Decode({kThe, kThe}), "the the");
  // Without byte fallback: the unknown token, one for a run of them with fuse_unk.
  common::Json unk = SentencePieceFile();
  unk["model"]["byte_fallback"] = false;
  EXPECT_EQ(Parse(unk).Encode("the\u65e5\u672c"), (std::vector<int32_t>{kBos, kThe, 0}));
  unk["model"]["fuse_unk"] = false;
  EXPECT_EQ(Parse(unk).Encode("the\u65e5\u672c"), (std::vector<int32_t>{kBos, kThe, 0, 0}));

  // The Metaspace pre-tokenizer (Mistral's; Llama 2's with legacy off): spaces become ▁, one goes before the text
  // unless it starts with one; "first" only before the document's own start, not after an added token.
  common::Json meta = SentencePieceFile();
  meta["normalizer"] = nullptr;
  meta["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"},
                           {"split", false}};
  const Tokenizer first = Parse(meta);
  EXPECT_EQ(first.Encode("the"), (std::vector<int32_t>{kBos, kThe}));
  EXPECT_EQ(first.Encode(" the"), (std::vector<int32_t>{kBos, kThe}));
  EXPECT_EQ(first.Encode("<s>the"), (std::vector<int32_t>{kBos, kBos, kT, kHe}));
  meta["pre_tokenizer"]["prepend_scheme"] = "always";
  EXPECT_EQ(Parse(meta).Encode("<s>the"), (std::vector<int32_t>{kBos, kBos, kThe}));
  // Unsplit, the merge "a ▁" (rank 0) joins across the space; split at each ▁, it cannot.
  EXPECT_EQ(Parse(meta).Encode("a the"), (std::vector<int32_t>{kBos, kSpace, kASpace, kT, kHe}));
  meta["pre_tokenizer"]["split"] = true;
  EXPECT_EQ(Parse(meta).Encode("a the"), (std::vector<int32_t>{kBos, kSpace, kA, kThe}));
  meta["pre_tokenizer"]["prepend_scheme"] = "never";
  EXPECT_EQ(Parse(meta).Encode("the"), (std::vector<int32_t>{kBos, kT, kHe}));
  // Spaces replaced by nothing: no metaspace to decode (this looped forever in Decode).
  common::Json no_space = SentencePieceFile();
  no_space["normalizer"]["normalizers"][1]["content"] = "";
  const Tokenizer spaceless = Parse(no_space);
  EXPECT_EQ(spaceless.Encode("the the"), (std::vector<int32_t>{kBos, kThe, kT, kHe}));
  EXPECT_EQ(spaceless.Decode({kSpace, kThe}), "\u2581\u2581the");

  // A long word (here a whole document) merges through a queue, a short one by scanning: the same tokens. Without
  // the merge across a space, each piece split at ▁ encodes as it does within the whole.
  std::string many;
  std::vector<int32_t> want = {kBos};
  for (int i = 0; i < 100; ++i, many += "the ") want.push_back(kThe);
  want.push_back(kSpace);
  EXPECT_EQ(legacy.Encode(many), want);
  meta["model"]["merges"].erase(0);
  meta["pre_tokenizer"]["prepend_scheme"] = "always";
  common::Json split = meta, whole = meta;
  split["pre_tokenizer"]["split"] = true;
  whole["pre_tokenizer"]["split"] = false;
  const Tokenizer by_piece = Parse(split), at_once = Parse(whole);
  Rng rng(5);
  const std::vector<std::string> alphabet = {"t", "h", "e", "a", " ", "\u65e5"};
  for (int round = 0; round < 30; ++round) {
    std::string text;
    for (uint64_t n = 60 + rng.Below(400); n > 0; --n) text += alphabet[rng.Below(alphabet.size())];
    EXPECT_EQ(at_once.Encode(text), by_piece.Encode(text)) << text;
    const std::vector<int32_t> tokens = at_once.Encode(text);
    EXPECT_EQ(at_once.Decode({tokens.begin() + 1, tokens.end()}), text.starts_with(' ') ? text.substr(1) : text);
  }
}

// What the decoder takes off a text's ends, as Hugging Face's tokenizers library (0.23.2) decodes Llama 2's
// tokenizer.json and the same file with the other decoders (transformers' decode, special tokens kept).
TEST_F(HuggingFaceTest, DecoderTakesThePrefixSpaceOff) {
  constexpr int32_t kBos = 1, kSpace = 259, kThe = 266, kA = 263;
  const Tokenizer llama2 = Parse(SentencePieceFile(), R"({"bos_token": "<s>", "eos_token": "</s>"})");
  EXPECT_EQ(llama2.Decode({kBos, kThe, kThe}), "<s> the the") << "Strip finds '<', not a space";
  EXPECT_EQ(llama2.Decode({kThe, kThe}), "the the");
  EXPECT_EQ(llama2.Decode({kSpace, kThe}), " the") << "one space only";
  EXPECT_EQ(llama2.Decode({kThe, kThe}, true), " the the") << "going on from a prompt: nothing comes off";
  EXPECT_EQ(llama2.Decode({kA, kSpace}), "a ");

  common::Json file = SentencePieceFile();
  file["decoder"]["decoders"][3]["start"] = 2;
  file["decoder"]["decoders"][3]["stop"] = 1;
  const Tokenizer both = Parse(file);
  EXPECT_EQ(both.Decode({kSpace, kSpace, kThe}), " the");
  EXPECT_EQ(both.Decode({kA, kSpace, kSpace}), "a ");
  EXPECT_EQ(both.Decode({kA, kSpace, kSpace}, true), "a ") << "the end comes off either way";

  // A Metaspace decoder drops the first token's metaspaces (not a space: the first token's alone), unless its
  // prepend_scheme is never.
  file = SentencePieceFile();
  file["normalizer"] = nullptr;
  file["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"},
                           {"split", false}};
  file["decoder"] = file["pre_tokenizer"];
  const Tokenizer first = Parse(file);
  EXPECT_EQ(first.Decode({kSpace, kSpace, kThe}), "  the");
  EXPECT_EQ(first.Decode({kThe, kThe}), "the the");
  EXPECT_EQ(first.Decode({kBos, kThe}), "<s> the");
  EXPECT_EQ(first.Decode({kThe}, true), " the");
  file["decoder"]["prepend_scheme"] = "never";
  EXPECT_EQ(Parse(file).Decode({kSpace, kThe}), "  the");
  file["decoder"] = {{"type", "Metaspace"}, {"add_prefix_space", false}};
  EXPECT_EQ(Parse(file).Decode({kThe}), " the") << "the older add_prefix_space";

  // Byte-level BPE: the text is the tokens' bytes, a leading space and all (GPT-2's and Llama 3's ByteLevel).
  const Tokenizer gpt2 = Parse(File());
  EXPECT_EQ(gpt2.Decode(gpt2.Encode(" the the")), " the the");

  // Text to show: bytes that are not UTF-8 become U+FFFD as the library's ByteFallback puts it, one for each byte of
  // a run of <0xXX> tokens that is not UTF-8 as a whole (its 'A' too), and as its ByteLevel does, one for each
  // maximal invalid part (Rust's from_utf8_lossy; here GPT-2's files, whose split keeps bytes that are not UTF-8);
  // Decode keeps the bytes.
  auto byte = [](unsigned char b) { return 3 + static_cast<int32_t>(b); };
  const std::string kBad = "\uFFFD";
  EXPECT_EQ(llama2.DecodeText({byte(0xE6), byte(0x97)}), kBad + kBad);
  EXPECT_EQ(llama2.DecodeText({byte(0x41), byte(0xE6), kThe, byte(0x97)}), kBad + kBad + " the" + kBad);
  EXPECT_EQ(llama2.DecodeText({byte(0xE6), byte(0x97), byte(0xA5)}), "\u65e5");
  EXPECT_EQ(llama2.Decode({byte(0x41), byte(0xE6), kThe, byte(0x97)}), "A\xe6 the\x97");
  for (const auto& [bytes, text] : std::vector<std::pair<std::string, std::string>>{
           {"\xe6\x97", kBad}, {"\xe6\x97\xa5\xff", "\u65e5" + kBad}, {"A\xe6\x41\x97", "A" + kBad + "A" + kBad},
           {"\xf0\x9f\x41", kBad + "A"}, {"\xed\xa0\x80", kBad + kBad + kBad}, {"\xc0\xaf", kBad + kBad},
           {"\xf4\x90\x80\x80", kBad + kBad + kBad + kBad}, {"\xf0\x9f\x98\x80 ok", "\U0001F600 ok"}}) {
    EXPECT_EQ(gpt2_.DecodeText(gpt2_.Encode(bytes)), text) << common::Printable(bytes);
    EXPECT_EQ(gpt2_.Decode(gpt2_.Encode(bytes)), bytes);
  }

  file = SentencePieceFile();
  file["decoder"]["decoders"][3]["content"] = "ab";
  auto bad = Tokenizer::ParseHuggingFace(file.dump(), "", "dir/tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "dir/tokenizer.json: decoder Strip: content \"ab\" is not one character");
  file["decoder"]["decoders"][3]["content"] = " ";
  file["decoder"]["decoders"][3]["start"] = -1;
  bad = Tokenizer::ParseHuggingFace(file.dump(), "", "dir/tokenizer.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "dir/tokenizer.json: decoder Strip: start -1 is not a count");
}

// A SentencePiece model file, written field by field in protobuf's wire format (ModelProto): pieces (text, score,
// type), then the trainer's and the normalizer's specs as `trainer` and `normalizer` give them, already encoded.
std::string Varint(uint64_t value) {
  std::string out;
  for (; value >= 0x80; value >>= 7) out.push_back(static_cast<char>((value & 0x7F) | 0x80));
  out.push_back(static_cast<char>(value));
  return out;
}
std::string Field(int number, std::string_view bytes) {  // length-delimited
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(bytes.size()) + std::string(bytes);
}
std::string VarintField(int number, uint64_t value) {
  return Varint(static_cast<uint64_t>(number) << 3) + Varint(value);
}
std::string SentencePieceModel(const std::vector<std::tuple<std::string, float, int>>& pieces, std::string trainer,
                               std::string normalizer) {
  std::string model;
  for (const auto& [text, score, type] : pieces) {
    std::string piece = Field(1, text) + Varint(2 << 3 | 5);
    const auto bits = std::bit_cast<uint32_t>(score);
    for (int i = 0; i < 4; ++i) piece.push_back(static_cast<char>(bits >> (8 * i)));
    model += Field(1, piece + VarintField(3, static_cast<uint64_t>(type)));
  }
  return model + Field(2, trainer) + Field(3, normalizer);
}

TEST(SentencePieceModelTest, ReadsABpeModelAndRefusesWhatItCannotRead) {
  const std::vector<std::tuple<std::string, float, int>> pieces = {
      {"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {"\u2581", -5, 1}, {"t", -6, 1}, {"h", -7, 1}, {"e", -8, 1},
      {"\u2581t", -1, 1}, {"he", -2, 1}, {"\u2581the", -3, 1}, {"<x>", 0, 4}};
  const std::string bpe = VarintField(3, 2), identity = Field(1, "identity") + VarintField(4, 0);
  auto tok = Tokenizer::ParseSentencePiece(SentencePieceModel(pieces, bpe, identity), "", "m.model");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_TRUE(tok->sentencepiece());
  EXPECT_EQ(tok->vocab_size(), 11);
  EXPECT_EQ(tok->eod(), 2);
  EXPECT_EQ(tok->bos(), 1);
  // <s> first (LlamaTokenizer's add_bos_token), the dummy prefix once for the whole text, <x> matched whole.
  EXPECT_EQ(tok->Encode("the the<x>"), (std::vector<int32_t>{1, 9, 9, 10}));
  EXPECT_EQ(tok->Encode(" the"), (std::vector<int32_t>{1, 3, 9})) << "no whitespace removal: the space stays";
  EXPECT_EQ(tok->Encode("theq"), (std::vector<int32_t>{1, 9, 0})) << "no byte fallback: <unk>";
  EXPECT_EQ(tok->Decode({9, 9}), "the the") << "the dummy prefix comes off again";
  auto no_prefix = Tokenizer::ParseSentencePiece(SentencePieceModel(pieces, bpe, identity + VarintField(3, 0)), "",
                                                 "m.model");
  ASSERT_TRUE(no_prefix.ok());
  EXPECT_EQ(no_prefix->Encode("the"), (std::vector<int32_t>{1, 4, 8})) << "add_dummy_prefix off";
  EXPECT_EQ(no_prefix->Decode({9, 9}), " the the");
  auto plain = Tokenizer::ParseSentencePiece(SentencePieceModel(pieces, bpe, identity),
                                             R"({"add_bos_token": false})", "m.model");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Encode("the"), (std::vector<int32_t>{9})) << "tokenizer_config.json's add_bos_token";
  auto llama2 = Tokenizer::ParseSentencePiece(SentencePieceModel(pieces, bpe, identity), R"({"add_bos_token": false})",
                                              "m.model", true);
  ASSERT_TRUE(llama2.ok());
  EXPECT_EQ(llama2->Encode("the"), (std::vector<int32_t>{1, 9})) << "Llama2Tokenizer's <s> over the config";
  // SentencePiece's default: no space at either end, one for a run of them.
  auto stripped = Tokenizer::ParseSentencePiece(SentencePieceModel(pieces, bpe, Field(1, "identity")), "", "m.model",
                                                false);
  ASSERT_TRUE(stripped.ok());
  EXPECT_EQ(stripped->Encode("  the   the  "), (std::vector<int32_t>{9, 9}));
  // No <s> where bos_id is -1 (a negative int32 is a 10-byte varint).
  auto no_bos = Tokenizer::ParseSentencePiece(
      SentencePieceModel(pieces, bpe + VarintField(41, static_cast<uint64_t>(int64_t{-1})), identity), "", "m.model");
  ASSERT_TRUE(no_bos.ok()) << no_bos.status().ToString();
  EXPECT_EQ(no_bos->bos(), -1);
  EXPECT_EQ(no_bos->Encode("the"), (std::vector<int32_t>{9}));

  const std::string whole = SentencePieceModel(pieces, bpe, identity);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {whole.substr(0, whole.size() - 3), "not a SentencePiece model: a cut field at byte"},
      {whole + Varint(7 << 3 | 3), "not a SentencePiece model: field 7 of wire type 3"},
      {Field(2, bpe), "not a SentencePiece model: no pieces"},
      {SentencePieceModel(pieces, "", identity), "a SentencePiece Unigram model: srunway reads BPE models only"},
      {SentencePieceModel(pieces, bpe, Field(1, "nmt_nfkc") + Field(2, "\x01\x02")),
       "normalizer 'nmt_nfkc': its compiled character map of 2 bytes is damaged"},
      {SentencePieceModel(pieces, bpe, Field(1, "nmt_nfkc") + Field(2, std::string("\x08\0\0\0\0\0\0\0", 8))),
       "normalizer 'nmt_nfkc': its compiled character map of 8 bytes is damaged (a double array of 8 bytes)"},
      {SentencePieceModel(pieces, bpe + VarintField(42, 11), identity), "trainer_spec.eos_id 11 is not the id"},
      {SentencePieceModel(pieces, bpe + VarintField(24, 1), identity), "treat_whitespace_as_suffix"},
      {SentencePieceModel({{"", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}}, bpe, identity), "piece 0 is empty"},
  };
  for (const auto& [model, message] : refused) {
    auto bad = Tokenizer::ParseSentencePiece(model, "", "dir/m.model");
    ASSERT_FALSE(bad.ok()) << message;
    EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("dir/m.model: " + message));
  }
  // A piece that is not UTF-8 (the fuzzer's: tokenizer_config.json could not be written from it).
  auto latin1 = Tokenizer::ParseSentencePiece(
      SentencePieceModel({{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {"caf\xe9", 0, 1}}, bpe, identity), "",
      "dir/m.model");
  ASSERT_FALSE(latin1.ok());
  EXPECT_THAT(latin1.status().message(), ::testing::AllOf(::testing::HasSubstr("dir/m.model: piece 3 is 'caf"),
                                                          ::testing::HasSubstr("', not UTF-8")));
}

TEST_F(HuggingFaceTest, RefusalsNameWhatTheyFound) {
  const std::vector<std::pair<std::function<void(common::Json&)>, std::string>> cases = {
      {[](common::Json& f) { f["model"]["type"] = "WordPiece"; }, "model WordPiece: srunway reads BPE tokenizers"},
      {[](common::Json& f) { f["model"]["byte_fallback"] = true; }, "model.byte_fallback with a ByteLevel"},
      {[](common::Json& f) { f["model"]["continuing_subword_prefix"] = "##"; }, "continuing_subword_prefix '##'"},
      {[](common::Json& f) { f["normalizer"] = {{"type", "Lowercase"}}; }, "normalizer Lowercase"},
      {[](common::Json& f) {
         f["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Metaspace"}}, ByteLevel(false)}}};
       },
       "pre_tokenizer Metaspace"},
      {[](common::Json& f) { f["pre_tokenizer"] = nullptr; }, "neither a ByteLevel pre-tokenizer"},
      {[](common::Json& f) { f["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}}; },
       "replacement 'ab' is not one character"},
      {[](common::Json& f) { f["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "twice"}}; },
       "prepend_scheme 'twice'"},
      {[](common::Json& f) {
         f["pre_tokenizer"] = {{"type", "Metaspace"}};
         f["model"]["unk_token"] = "<nope>";
       },
       "model.unk_token '<nope>' is not in model.vocab"},
      {[](common::Json& f) {
         f["pre_tokenizer"] = nullptr;
         f["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "x"}};
       },
       "normalizer Replace"},
      {[](common::Json& f) {
         f["pre_tokenizer"] = SplitThenByteLevel("x");
         f["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}};
       },
       "Split: srunway reads a Regex pattern"},
      {[](common::Json& f) { f["pre_tokenizer"] = SplitThenByteLevel("(\\p{L}"); }, "pre-tokenizer pattern"},
      {[](common::Json& f) {
         f["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {ByteLevel(false), ByteLevel(false)}}};
       },
       "after ByteLevel"},
      {[](common::Json& f) { f["post_processor"] = {{"type", "BertProcessing"}}; }, "post_processor BertProcessing"},
      {[](common::Json& f) { f["added_tokens"][0]["lstrip"] = true; }, "'<|endoftext|>' has lstrip"},
      {[](common::Json& f) { f["model"]["merges"][0] = "zzq qqz"; }, "model.merges[0] 'zzq qqz'"},
      {[](common::Json& f) { f["model"]["vocab"]["big"] = 1 << 30; }, "id 1073741824 of 'big' is out of range"},
      {[](common::Json& f) { f["model"]["vocab"]["far"] = 70000; }, "id 70000 of 'far' is out of range: "},
      {[](common::Json& f) { f["model"]["vocab"]["dup"] = 5; }, "id 5 is both"},
  };
  for (const auto& [change, message] : cases) {
    common::Json file = File();
    change(file);
    auto tok = Tokenizer::ParseHuggingFace(file.dump(), "", "dir/tokenizer.json");
    ASSERT_FALSE(tok.ok()) << message;
    EXPECT_NE(tok.status().message().find("dir/tokenizer.json"), std::string::npos) << tok.status().message();
    EXPECT_NE(tok.status().message().find(message), std::string::npos) << tok.status().message();
  }
  auto eos = Tokenizer::ParseHuggingFace(File().dump(), R"({"eos_token": "<nope>"})", "dir/tokenizer.json");
  ASSERT_FALSE(eos.ok());
  EXPECT_NE(eos.status().message().find("dir/tokenizer_config.json: eos_token '<nope>' is not a token of "
                                        "dir/tokenizer.json"), std::string::npos) << eos.status().message();
  EXPECT_FALSE(Tokenizer::ParseHuggingFace("{not json", "", "dir/tokenizer.json").ok());
}

TEST_F(HuggingFaceTest, LoadsFromItsDirectoryAndBesideADataset) {
  fs::create_directories(dir_ / "model");
  const std::string json = File().dump(), config = R"({"eos_token": "<|endoftext|>"})";
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "model" / "tokenizer.json", json).ok());
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "model" / "tokenizer_config.json", config).ok());
  for (const fs::path& path : {dir_ / "model", dir_ / "model" / "tokenizer.json"}) {
    auto tok = Tokenizer::LoadHuggingFace(path);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EXPECT_EQ(tok->eod(), gpt2_.eod());
    EXPECT_EQ(tok->Encode(kCorpus), gpt2_.Encode(kCorpus));
  }
  auto tok = Tokenizer::LoadHuggingFace(dir_ / "model");
  auto staged = tok->StageBeside((dir_ / "corpus").string());
  ASSERT_TRUE(staged.ok());
  ASSERT_TRUE(common::CommitTogether(*staged).ok());
  EXPECT_EQ(*common::ReadFile(dir_ / "corpus.tokenizer.json"), json);
  EXPECT_EQ(*common::ReadFile(dir_ / "corpus.tokenizer_config.json"), config);
  auto beside = Tokenizer::LoadHuggingFace(dir_ / "corpus.tokenizer.json");
  ASSERT_TRUE(beside.ok());
  EXPECT_EQ(beside->eod(), gpt2_.eod()) << "PREFIX.tokenizer_config.json goes with PREFIX.tokenizer.json";
  auto missing = Tokenizer::LoadHuggingFace(dir_ / "nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nowhere"), std::string::npos);
}

}  // namespace
}  // namespace srunway::trainer
