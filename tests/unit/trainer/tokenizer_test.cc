// Byte-level BPE: GPT-2's word split, training, lossless round trips, GPT-2 file formats, bad files.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/fs.h"
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

}  // namespace
}  // namespace srunway::trainer
