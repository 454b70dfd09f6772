// Megatron datasets (write, read, every corruption), llm.c shards, the sample index, blends, splits, mock data.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <thread>

#include "common/sanitizers.h"

#ifdef SRUNWAY_ASAN
extern "C" size_t __sanitizer_get_current_allocated_bytes();  // sanitizer/allocator_interface.h, not packaged here
#else
#include <malloc.h>
#endif

#include "common/fs.h"
#include "tests/unit/temp_dir.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/prep.h"
#include "trainer/data/samples.h"

namespace srunway::trainer {
namespace {

namespace fs = std::filesystem;

// Bytes the allocator has handed out and not had back.
int64_t HeapBytes() {
#ifdef SRUNWAY_ASAN
  return static_cast<int64_t>(__sanitizer_get_current_allocated_bytes());
#else
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#endif
}

class DataTest : public ::testing::Test {
 protected:

  // Documents of lengths 5, 17, 1, 40, ..., token t of document d = (100 d + t) % vocab.
  std::string Write(const std::string& name, const std::vector<int>& lengths, int vocab = 1000, int offset = 0) {
    const std::string prefix = (dir_ / name).string();
    auto writer = IndexedDatasetWriter::Create(prefix, vocab);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    for (size_t d = 0; d < lengths.size(); ++d) {
      std::vector<int32_t> doc(lengths[d]);
      for (int t = 0; t < lengths[d]; ++t) doc[t] = static_cast<int32_t>(offset + (100 * d + t) % (vocab - offset));
      EXPECT_TRUE(writer->AddDocument(doc).ok());
    }
    EXPECT_TRUE(writer->Finish().ok());
    return prefix;
  }

  // 300 documents of 1 to 99 tokens, every token position of an epoch its own token, in samples of 8 (+ 1); `epoch`:
  // the samples of one epoch.
  DataConfig DistinctTokens(int64_t* epoch) {
    std::vector<int> lengths;
    int64_t tokens = 0;
    for (int d = 0; d < 300; ++d) tokens += lengths.emplace_back(1 + d * 37 % 99);
    DataConfig config;
    config.data_path = {Write("e", lengths, 100000)};
    config.split = "1";
    config.seq_len = 8;
    config.vocab = 100000;
    *epoch = (tokens - 1) / 8;
    return config;
  }

  // How often each token is an input (not the last, shifted-only token) of the first `count` samples.
  static std::map<int32_t, int> InputTokens(SampleSource& samples, int64_t count) {
    std::map<int32_t, int> seen;
    std::vector<int32_t> sample;
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_TRUE(samples.Sample(i, sample).ok());
      for (size_t t = 0; t + 1 < sample.size(); ++t) ++seen[sample[t]];
    }
    return seen;
  }

  // The whole of one dataset for training, in samples of seq_len (+ 1) tokens below vocab.
  static DataConfig OneDataset(const std::string& prefix, int seq_len, int vocab) {
    DataConfig config;
    config.data_path = {prefix};
    config.split = "1";
    config.seq_len = seq_len;
    config.vocab = vocab;
    return config;
  }

  std::string Bytes(const std::string& path) { return *common::ReadFile(path); }
  void Put(const std::string& path, const std::string& bytes) { ASSERT_TRUE(common::WriteFileAtomic(path, bytes).ok()); }

  testing::TempDir temp_{"srunway-data-test"};
  const fs::path& dir_ = temp_.path();
};

TEST_F(DataTest, WrittenDatasetReadsBackTokenForToken) {
  const std::string prefix = Write("a", {5, 17, 1, 40});
  auto source = OpenIndexedDataset(prefix);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ASSERT_EQ((*source)->size(), 4);
  for (int d = 0; d < 4; ++d) {
    std::vector<int32_t> tokens;
    ASSERT_TRUE((*source)->Read(d, 0, (*source)->length(d), tokens).ok());
    for (size_t t = 0; t < tokens.size(); ++t) EXPECT_EQ(tokens[t], static_cast<int32_t>(100 * d + t));
  }
  // uint16 for a small vocabulary (Megatron's code 8).
  EXPECT_EQ(Bytes(prefix + ".idx")[17], 8);
}

TEST_F(DataTest, LargeVocabularyUsesInt32) {
  const std::string prefix = Write("big", {3}, 100000);
  EXPECT_EQ(Bytes(prefix + ".idx")[17], 4);
  auto source = OpenIndexedDataset(prefix);
  ASSERT_TRUE(source.ok());
  std::vector<int32_t> tokens;
  ASSERT_TRUE((*source)->Read(0, 1, 2, tokens).ok());
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 2}));
}

TEST_F(DataTest, WriterRefusesTokensOutsideTheVocabulary) {
  auto writer = IndexedDatasetWriter::Create((dir_ / "bad").string(), 10);
  ASSERT_TRUE(writer.ok());
  std::vector<int32_t> doc = {1, 10};
  EXPECT_NE(writer->AddDocument(doc).message().find("outside the vocabulary"), std::string::npos);
}

TEST_F(DataTest, CorruptIndexIsRejectedWithFileAndReason) {
  const std::string prefix = Write("c", {5, 17});
  const std::string idx = Bytes(prefix + ".idx");
  struct Case {
    std::string name;
    std::string bytes;
    std::string expected;
  };
  std::string bad_magic = idx;
  bad_magic[0] = 'X';
  std::string bad_version = idx;
  bad_version[9] = 2;
  std::string bad_dtype = idx;
  bad_dtype[17] = 42;
  std::string past_end = idx;
  const int64_t far = 1 << 30;
  std::memcpy(past_end.data() + 34 + 4 * 2 + 8, &far, 8);  // offset of sequence 1
  std::string backwards = idx;
  const int64_t two = 2, zero = 0;
  std::memcpy(backwards.data() + 34 + 12 * 2, &two, 8);
  std::memcpy(backwards.data() + 34 + 12 * 2 + 8, &zero, 8);
  const Case cases[] = {
      {"magic", bad_magic, "bad magic"},
      {"version", bad_version, "version 2"},
      {"dtype", bad_dtype, "unknown dtype code 42"},
      {"truncated", idx.substr(0, idx.size() - 3), "truncated"},
      {"header only", idx.substr(0, 20), "bad magic"},
      {"past end", past_end, "past the end"},
      {"document indices", backwards, "document indices"},
  };
  for (const Case& c : cases) {
    Put(prefix + ".idx", c.bytes);
    auto source = OpenIndexedDataset(prefix);
    ASSERT_FALSE(source.ok()) << c.name;
    EXPECT_NE(source.status().message().find(c.expected), std::string::npos) << c.name << ": " << source.status().message();
    EXPECT_NE(source.status().message().find(prefix), std::string::npos) << c.name << ": names the file";
  }
}

TEST_F(DataTest, MissingFilesAreNamed) {
  auto source = OpenTokenSource((dir_ / "nothing").string());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), common::StatusCode::kNotFound);
  EXPECT_NE(source.status().message().find("nothing.bin"), std::string::npos);
  const std::string prefix = Write("half", {4});
  fs::remove(prefix + ".bin");
  EXPECT_FALSE(OpenTokenSource(prefix).ok());
}

// A FIFO in a dataset's place blocked srunway-train in open() until a writer came, where SIGTERM could not end
// it; a directory failed as "mmap ...: No such device". Each is named for what it is.
TEST_F(DataTest, AnythingButAFileInADatasetsPlaceIsNamed) {
  const std::string prefix = Write("odd", {4});
  const std::string bin = prefix + ".bin";
  // Unblocks an open() that waits for a writer, so that without the check this test fails rather than hangs.
  std::atomic<bool> done = false;
  std::thread writer([&] {
    for (int i = 0; i < 100 && !done; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const int fd = ::open(bin.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO while no reader waits
      if (fd >= 0) ::close(fd);
    }
  });
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { ASSERT_EQ(::mkfifo(bin.c_str(), 0644), 0); }, "a FIFO"},
      {[&] { fs::create_directory(bin); }, "a directory"},
      {[&] { fs::create_symlink("/dev/zero", bin); }, "a device"},
  };
  for (const auto& [make, kind] : cases) {
    fs::remove(bin);
    make();
    auto source = OpenTokenSource(prefix);
    ASSERT_FALSE(source.ok()) << kind;
    EXPECT_EQ(source.status().message(), bin + " is " + kind + ", not a file");
    fs::remove(bin);
  }
  done = true;
  writer.join();
}

TEST_F(DataTest, SamplesPackDocumentsEndToEndAndShareTheBoundaryToken) {
  const std::string prefix = Write("p", {5, 17, 1, 40, 9, 33});
  DataConfig config = OneDataset(prefix, 8, 1000);
  auto samples = BuildSamples(config, Split::kTrain, 10);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  // Every sample is seq_len + 1 tokens; across all samples (in any order), each document's tokens appear in runs.
  std::map<int32_t, int> seen;
  std::vector<int32_t> sample;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*samples)->Sample(i, sample).ok());
    ASSERT_EQ(sample.size(), 9u);
    for (size_t t = 0; t + 1 < sample.size(); ++t) ++seen[sample[t]];
  }
  // 10 samples x 8 new tokens = 80 distinct positions of a 105-token epoch: no token position repeats.
  for (const auto& [token, count] : seen) EXPECT_EQ(count, 1) << token;
  // Deterministic for a seed, different for another.
  auto again = BuildSamples(config, Split::kTrain, 10);
  std::vector<int32_t> first, second;
  ASSERT_TRUE((*samples)->Sample(3, first).ok());
  ASSERT_TRUE((*again)->Sample(3, second).ok());
  EXPECT_EQ(first, second);
  config.seed = 99;
  auto other = BuildSamples(config, Split::kTrain, 10);
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*samples)->Sample(i, first).ok());
    ASSERT_TRUE((*other)->Sample(i, second).ok());
    differs |= first != second;
  }
  EXPECT_TRUE(differs);
}

// The index takes what its plan counted before any of it was allocated (the trainer checks that against the rank's
// memory): Megatron's 32-bit document table, 4 bytes a document of each epoch, 8 bytes for every 16 of them, and a
// blend's 8 a sample. It took 24 bytes a sample, 8 a document of each epoch, and up to twice that while its tables
// grew; then 12 a sample.
TEST_F(DataTest, IndexHoldsWhatItsPlanCounted) {
  const std::string prefix = Write("m", std::vector<int>(200, 37));
  DataConfig config;
  config.split = "1";
  config.seq_len = 64;
  config.vocab = 1000;
  constexpr int64_t kSamples = 200000;
  // 200 documents of 37 tokens a epoch; 200000 samples of 64 tokens (+ 1) need 1730 epochs.
  const double tables = 4.0 * 1730 * 200 + 8.0 * ((1730 * 200 + 15) / 16);
  for (bool blend : {false, true}) {
    config.data_path = blend ? std::vector<std::string>{"1", prefix, "1", prefix} : std::vector<std::string>{prefix};
    auto plan = PlanSamples(config, Split::kTrain, kSamples);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    if (!blend) {
      EXPECT_EQ(plan->bytes(), tables);
    } else {
      // Each half built 0.5% larger (100500 samples, 870 epochs), and the blend's own table.
      EXPECT_EQ(plan->bytes(), 2 * (4.0 * 870 * 200 + 8.0 * ((870 * 200 + 15) / 16)) + 8.0 * kSamples);
    }
    const int64_t before = HeapBytes();
    auto samples = BuildSamples(*plan);
    ASSERT_TRUE(samples.ok()) << samples.status().ToString();
    const int64_t held = HeapBytes() - before;
    EXPECT_EQ(static_cast<double>((*samples)->IndexBytes()), plan->bytes()) << "blend " << blend;
    EXPECT_GE(static_cast<double>(held), plan->bytes()) << "blend " << blend;
    EXPECT_LE(static_cast<double>(held), plan->bytes() + 64 * 1024) << "blend " << blend;
  }
}

// The samples of an epoch in a keyed order: a run of the whole epoch draws each once (every token position but the
// last once), and a longer run over the same epochs draws a shorter one's samples first, in the same order (the
// order was a shuffle of the run's own samples, so a run of other --train-steps drew others, and a resumed run
// with more steps saw some samples again).
TEST_F(DataTest, AnEpochsSamplesComeOnceEachAndLongerRunsDrawShorterOnesFirst) {
  int64_t epoch = 0;
  const DataConfig config = DistinctTokens(&epoch);
  auto plan = PlanSamples(config, Split::kTrain, epoch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->datasets[0].epochs, 1);
  ASSERT_EQ(plan->datasets[0].epoch_samples, epoch);
  auto all = BuildSamples(*plan);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  const std::map<int32_t, int> seen = InputTokens(**all, epoch);
  EXPECT_EQ(static_cast<int64_t>(seen.size()), 8 * epoch);
  for (const auto& [token, count] : seen) ASSERT_EQ(count, 1) << token;
  std::vector<int32_t> sample, other;
  for (int64_t shorter : {int64_t{1}, int64_t{100}, epoch / 2}) {
    auto part = BuildSamples(config, Split::kTrain, shorter);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    for (int64_t i = 0; i < shorter; ++i) {
      ASSERT_TRUE((*part)->Sample(i, sample).ok());
      ASSERT_TRUE((*all)->Sample(i, other).ok());
      ASSERT_EQ(sample, other) << "sample " << i << " of a run of " << shorter;
    }
  }
}

// Past one epoch, Megatron's rule: a last epoch that the run takes under 80% of is shuffled by itself after the
// others, so every sample of the earlier epochs comes before any sample of it; one taken further is shuffled with
// them.
TEST_F(DataTest, ALastEpochTakenInPartComesAfterTheOthers) {
  int64_t epoch = 0;
  const DataConfig config = DistinctTokens(&epoch);
  auto plan = PlanSamples(config, Split::kTrain, epoch + epoch / 4);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->datasets[0].epochs, 2);
  EXPECT_EQ(plan->datasets[0].shuffled_first, epoch);
  auto samples = BuildSamples(*plan);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  // None of them twice: all from the first epoch.
  EXPECT_EQ(static_cast<int64_t>(InputTokens(**samples, epoch).size()), 8 * epoch);
  auto most = PlanSamples(config, Split::kTrain, 2 * epoch - 1);
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->datasets[0].shuffled_first, most->datasets[0].epoch_samples);
}

// Past 2^32 positions or samples the tables are 64-bit; they draw the same samples as 32-bit ones, in the same
// order (a run resumed by a build with the other width reads on where it stopped).
TEST_F(DataTest, WideTablesDrawTheSameSamplesAsNarrowOnes) {
  const std::string a = Write("wa", {5, 17, 1, 40, 9, 33, 12});
  const std::string b = Write("wb", {50, 3, 21});
  DataConfig config;
  config.split = "1";
  config.seq_len = 8;
  config.vocab = 1000;
  for (const auto& path : {std::vector<std::string>{a}, std::vector<std::string>{"0.6", a, "0.4", b}}) {
    config.data_path = path;
    config.wide_index = false;
    auto narrow_plan = PlanSamples(config, Split::kTrain, 300);
    config.wide_index = true;
    auto wide_plan = PlanSamples(config, Split::kTrain, 300);
    ASSERT_TRUE(narrow_plan.ok() && wide_plan.ok());
    ASSERT_TRUE(narrow_plan->datasets[0].narrow);
    ASSERT_FALSE(wide_plan->datasets[0].narrow);
    const DatasetPlan& dataset = narrow_plan->datasets[0];
    EXPECT_EQ(wide_plan->datasets[0].bytes() - dataset.bytes(), 4.0 * dataset.epochs * (dataset.end - dataset.begin));
    auto narrow = BuildSamples(*narrow_plan);
    auto wide = BuildSamples(*wide_plan);
    ASSERT_TRUE(narrow.ok() && wide.ok());
    std::vector<int32_t> x, y;
    for (int64_t i = 0; i < 900; ++i) {  // three times round
      ASSERT_TRUE((*narrow)->Sample(i, x).ok());
      ASSERT_TRUE((*wide)->Sample(i, y).ok());
      ASSERT_EQ(x, y) << "sample " << i << " of " << path.size() << " words";
    }
  }
}

// --data-cache-path: the index is written once and later runs map it (no private copy), drawing the same samples as
// one built in memory; another plan's index is another file, and a damaged file is refused, then rebuilt.
TEST_F(DataTest, CachedIndexIsMappedAndDrawsTheSameSamples) {
  const std::string a = Write("ca", {5, 17, 1, 40, 9, 33, 12});
  const std::string b = Write("cb", {50, 3, 21});
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  DataConfig config;
  config.split = "1";
  config.seq_len = 8;
  config.vocab = 1000;
  auto same = [](SampleSource& x, SampleSource& y) {
    std::vector<int32_t> p, q;
    for (int64_t i = 0; i < 900; ++i) {
      if (!x.Sample(i, p).ok() || !y.Sample(i, q).ok() || p != q) return false;
    }
    return true;
  };
  for (const auto& path : {std::vector<std::string>{a}, std::vector<std::string>{"0.6", a, "0.4", b}}) {
    config.data_path = path;
    auto plan = PlanSamples(config, Split::kTrain, 300);
    ASSERT_TRUE(plan.ok());
    auto built = BuildSamples(*plan);
    ASSERT_TRUE(built.ok());
    EXPECT_EQ(CachedSamples(*plan, cache, false).status().code(), common::StatusCode::kNotFound);
    bool fresh = false;
    auto first = CachedSamples(*plan, cache, true, &fresh);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    EXPECT_TRUE(fresh);
    auto again = CachedSamples(*plan, cache, true, &fresh);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_FALSE(fresh);
    EXPECT_EQ((*first)->IndexBytes(), 0);
    EXPECT_EQ((*again)->IndexBytes(), 0);
    EXPECT_TRUE(same(**built, **first)) << path.size() << " words";
    EXPECT_TRUE(same(**built, **again)) << path.size() << " words";
    // Cut short: refused, then rebuilt.
    const fs::path file = SampleCachePath(*plan, cache);
    fs::resize_file(file, fs::file_size(file) / 2);
    EXPECT_EQ(CachedSamples(*plan, cache, false).status().code(), common::StatusCode::kFailedPrecondition);
    auto rebuilt = CachedSamples(*plan, cache, true);
    ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
    EXPECT_TRUE(same(**built, **rebuilt));
    // Another seed is another index, in another file.
    config.seed = 99;
    auto other = PlanSamples(config, Split::kTrain, 300);
    config.seed = 1234;
    ASSERT_TRUE(other.ok());
    EXPECT_NE(SampleCachePath(*other, cache), file);
    // Another plan's bytes under this plan's name are not taken for its index.
    ASSERT_TRUE(CachedSamples(*other, cache, true).ok());
    fs::copy_file(SampleCachePath(*other, cache), file, fs::copy_options::overwrite_existing);
    EXPECT_NE(CachedSamples(*plan, cache, false).status().message().find("not this run's index"), std::string::npos);
    ASSERT_TRUE(CachedSamples(*plan, cache, true).ok());
    // A run one sample longer, over the same 21 epochs: one dataset's tables are the same file (its samples' order
    // is not in it), a blend's holds each sample and is another.
    auto longer = PlanSamples(config, Split::kTrain, 301);
    ASSERT_TRUE(longer.ok());
    ASSERT_EQ(longer->datasets[0].epochs, plan->datasets[0].epochs);
    EXPECT_EQ(SampleCachePath(*longer, cache) == file, path.size() == 1) << path.size() << " words";
    auto longer_built = BuildSamples(*longer);
    auto longer_cached = CachedSamples(*longer, cache, true, &fresh);
    ASSERT_TRUE(longer_built.ok() && longer_cached.ok());
    EXPECT_EQ(fresh, path.size() > 1);
    EXPECT_TRUE(same(**longer_built, **longer_cached)) << path.size() << " words";
  }
}

// Data prepared again under the same prefix with the same documents and tokens, in another order: the same counts
// and totals, other lengths at each position. Its old index must not be taken for it.
TEST_F(DataTest, DataPreparedAgainIsNotTakenForItsOldIndex) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  const std::vector<int> lengths = {5, 17, 1, 40, 9, 33, 12};
  const DataConfig config = OneDataset(Write("again", lengths), 8, 1000);
  auto before = PlanSamples(config, Split::kTrain, 300);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(CachedSamples(*before, cache, true).ok());
  Write("again", {lengths.rbegin(), lengths.rend()});
  auto after = PlanSamples(config, Split::kTrain, 300);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(CachedSamples(*after, cache, false).status().code(), common::StatusCode::kNotFound);
  bool fresh = false;
  auto cached = CachedSamples(*after, cache, true, &fresh);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  EXPECT_TRUE(fresh);
  auto built = BuildSamples(*after);
  ASSERT_TRUE(built.ok());
  std::vector<int32_t> p, q;
  for (int64_t i = 0; i < 300; ++i) {
    ASSERT_TRUE((*built)->Sample(i, p).ok() && (*cached)->Sample(i, q).ok());
    ASSERT_EQ(p, q) << "sample " << i;
  }
}

// A cache file whose header is this plan's but whose tables are damaged (a disk's fault, an edit): every sample
// drawn from it is refused with the file's name, never read from outside the data.
TEST_F(DataTest, DamagedCacheTablesAreRefusedNotFollowed) {
  const fs::path cache = dir_ / "cache";
  fs::create_directories(cache);
  const std::string a = Write("da", {5, 17, 1, 40, 9, 33, 12}), b = Write("db", {50, 3, 21});
  // table: which table of the file (each dataset's documents and block counts, then a blend's); fill: its bytes;
  // said: what the refusal says of the sample.
  struct Damage {
    std::vector<std::string> path;
    size_t table;
    char fill;
    std::string said;
  };
  const std::vector<std::string> one = {a}, blend = {"0.6", a, "0.4", b};
  const std::string outside = "lies outside the documents of ", uncounted = "falls outside the token counts of ";
  for (const Damage& damage : {Damage{one, 0, '\xff', outside + a + ".bin"},
                               Damage{one, 1, '\x7f', uncounted + a + ".bin"},   // past every sample's start
                               Damage{one, 1, '\xff', uncounted + a + ".bin"},   // negative
                               Damage{one, 1, '\0', outside + a + ".bin"},       // every sample in the last block
                               Damage{blend, 4, '\xff', "is drawn from dataset 65536 of the blend's 2"},
                               Damage{blend, 2, '\xff', outside + b + ".bin"}}) {
    DataConfig config = OneDataset(a, 8, 1000);
    config.data_path = damage.path;
    auto plan = PlanSamples(config, Split::kTrain, 300);
    ASSERT_TRUE(plan.ok());
    const fs::path file = SampleCachePath(*plan, cache);
    fs::remove(file);  // the last case's damage
    ASSERT_TRUE(CachedSamples(*plan, cache, true).ok());
    std::string bytes = Bytes(file);
    uint64_t tables = 0;
    std::memcpy(&tables, bytes.data() + 16, sizeof tables);
    ASSERT_LT(damage.table, tables);
    size_t at = (24 + 8 * tables + 7) & ~size_t{7};
    for (size_t t = 0;; ++t) {
      uint64_t size = 0;
      std::memcpy(&size, bytes.data() + 24 + 8 * t, sizeof size);
      if (t == damage.table) {
        std::memset(bytes.data() + at, damage.fill, size);
        break;
      }
      at += (size + 7) & ~size_t{7};
    }
    Put(file, bytes);
    auto damaged = CachedSamples(*plan, cache, false);
    ASSERT_TRUE(damaged.ok()) << damaged.status().ToString();
    std::vector<int32_t> sample;
    int refused = 0;
    for (int64_t i = 0; i < 300; ++i) {
      const common::Status status = (*damaged)->Sample(i, sample);
      if (status.ok()) continue;
      ++refused;
      EXPECT_NE(status.message().find(file.string() + ": sample "), std::string::npos) << status.message();
      EXPECT_NE(status.message().find(damage.said), std::string::npos) << status.message();
      EXPECT_NE(status.message().find("delete the file"), std::string::npos) << status.message();
    }
    EXPECT_GT(refused, 0) << "table " << damage.table << " of " << damage.path.size() << " words";
  }
}

// A dataset rewritten in place while a run reads it (`cp` over it, a preprocessing script writing to the same
// prefix): reading its mapping past the new end is a bus error, which ended the run without a word.
TEST_F(DataTest, DatasetCutShortUnderTheRunIsNamed) {
  const std::string prefix = Write("cut", {500, 600, 700});
  auto samples = BuildSamples(OneDataset(prefix, 16, 1000), Split::kTrain, 50);
  ASSERT_TRUE(samples.ok());
  std::vector<int32_t> sample;
  ASSERT_TRUE((*samples)->Sample(0, sample).ok());
  const uintmax_t opened = fs::file_size(prefix + ".bin");
  fs::resize_file(prefix + ".bin", 0);
  for (int64_t i = 0; i < 3; ++i) {  // and again: the guard holds after a bus error
    const common::Status status = (*samples)->Sample(i, sample);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), common::StatusCode::kDataLoss);
    EXPECT_NE(status.message().find(fmt::format("{}.bin: cut short while the run read it ({} bytes when opened, 0 now)",
                                                prefix, opened)),
              std::string::npos)
        << status.message();
  }
}

TEST_F(DataTest, TokenBeyondTheModelVocabularyNamesTheFile) {
  const std::string prefix = Write("v", {50}, 1000);
  const DataConfig config = OneDataset(prefix, 16, 20);  // tokens go up to 49
  auto samples = BuildSamples(config, Split::kTrain, 2);
  ASSERT_TRUE(samples.ok());
  std::vector<int32_t> sample;
  common::Status status = (*samples)->Sample(0, sample);
  if (status.ok()) status = (*samples)->Sample(1, sample);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("v.bin"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("vocabulary size 20 (--vocab-size sets it"), std::string::npos) << status.message();
}

// An int32 dataset can hold a negative token (a corrupt or foreign file): named as negative, not as too large.
TEST_F(DataTest, NegativeTokenIsNamedAsSuch) {
  const std::string prefix = Write("n", {50}, 100000);
  std::string bin = Bytes(prefix + ".bin");
  const int32_t negative = -5;
  for (size_t at = 0; at + sizeof negative <= bin.size(); at += sizeof negative) {  // in every sample
    std::memcpy(bin.data() + at, &negative, sizeof negative);
  }
  Put(prefix + ".bin", bin);
  auto samples = BuildSamples(OneDataset(prefix, 16, 100000), Split::kTrain, 2);
  ASSERT_TRUE(samples.ok());
  std::vector<int32_t> sample;
  const common::Status status = (*samples)->Sample(0, sample);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("n.bin: token -5 in sample"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("is negative"), std::string::npos) << status.message();
}

TEST_F(DataTest, BlendFollowsTheWeights) {
  // Dataset a holds tokens below 500, dataset b tokens from 500: a sample's first token tells its source.
  const std::string a = Write("blend_a", std::vector<int>(50, 30), 500);
  const std::string b = Write("blend_b", std::vector<int>(50, 30), 1000, 500);
  DataConfig config;
  config.data_path = {"0.7", a, "0.3", b};
  config.split = "1";
  config.seq_len = 8;
  config.vocab = 1000;
  auto samples = BuildSamples(config, Split::kTrain, 1000);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  int from_a = 0;
  std::vector<int32_t> sample;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE((*samples)->Sample(i, sample).ok());
    from_a += sample[0] < 500;
    // Megatron's greedy interleaving keeps every prefix within one sample of its share.
    if (i == 99) {
      EXPECT_NEAR(from_a, 70, 1);
    }
  }
  EXPECT_NEAR(from_a, 700, 1);
}

TEST(DataPathTest, MalformedBlendsAreRefused) {
  EXPECT_FALSE(ParseDataPath({}).ok());
  EXPECT_FALSE(ParseDataPath({"0.5", "a", "b"}).ok());
  EXPECT_NE(ParseDataPath({"x", "a", "0.5", "b"}).status().message().find("weight 'x'"), std::string::npos);
  EXPECT_FALSE(ParseDataPath({"-1", "a", "2", "b"}).ok());
  for (const char* bad : {"0", "inf", "nan", "1e999", "0.5x", ""}) {
    EXPECT_FALSE(ParseDataPath({bad, "a", "2", "b"}).ok()) << bad;
  }
  // A blend's table numbers its datasets in 16 bits: the 65537th would have read the first one's samples.
  std::vector<std::string> many;
  for (int d = 0; d <= 65536; ++d) many.insert(many.end(), {"1", "d" + std::to_string(d)});
  EXPECT_NE(ParseDataPath(many).status().message().find("a blend of 65537 datasets; at most 65536"), std::string::npos);
  many.resize(many.size() - 2);
  EXPECT_TRUE(ParseDataPath(many).ok());
  auto blend = ParseDataPath({"3", "a", "1", "b"});
  ASSERT_TRUE(blend.ok());
  EXPECT_DOUBLE_EQ((*blend)[0].weight, 0.75);
}

TEST(SplitTest, MegatronShares) {
  EXPECT_EQ(*SplitRange("969,30,1", 1000, Split::kTrain), (std::pair<int64_t, int64_t>{0, 969}));
  EXPECT_EQ(*SplitRange("969,30,1", 1000, Split::kValid), (std::pair<int64_t, int64_t>{969, 999}));
  EXPECT_EQ(*SplitRange("969,30,1", 1000, Split::kTest), (std::pair<int64_t, int64_t>{999, 1000}));
  EXPECT_EQ(*SplitRange("1", 10, Split::kTrain), (std::pair<int64_t, int64_t>{0, 10}));
  EXPECT_FALSE(SplitRange("a,b", 10, Split::kTrain).ok());
  EXPECT_FALSE(SplitRange("0,0,0", 10, Split::kTrain).ok());
  EXPECT_FALSE(SplitRange("90,-5,15", 10, Split::kTrain).ok());
  EXPECT_EQ(SplitRange("90,,10", 10, Split::kTrain).status().message(),
            "--split '90,,10': '' is not a non-negative number");
  EXPECT_EQ(*SplitRange(" 9 / 1 ", 10, Split::kValid), (std::pair<int64_t, int64_t>{9, 10}));
}

TEST(MockDataTest, DeterministicAndInVocabulary) {
  DataConfig config;
  config.mock = true;
  config.seq_len = 32;
  config.vocab = 50;
  auto a = BuildSamples(config, Split::kTrain, 4);
  auto b = BuildSamples(config, Split::kTrain, 4);
  std::vector<int32_t> x, y;
  ASSERT_TRUE((*a)->Sample(7, x).ok());
  ASSERT_TRUE((*b)->Sample(7, y).ok());
  EXPECT_EQ(x, y);
  EXPECT_EQ(x.size(), 33u);
  for (int32_t t : x) EXPECT_TRUE(t >= 0 && t < 50);
}

TEST_F(DataTest, LlmcShardsReadAndCorruptOnesAreRefused) {
  std::string shard(1024, '\0');
  const int32_t header[3] = {20240520, 1, 40};
  std::memcpy(shard.data(), header, sizeof header);
  for (uint16_t t = 0; t < 40; ++t) shard.append(reinterpret_cast<const char*>(&t), 2);
  Put((dir_ / "shard_000.bin").string(), shard);
  Put((dir_ / "shard_001.bin").string(), shard);
  auto source = OpenTokenSource((dir_ / "shard_*.bin").string());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->size(), 2);
  std::vector<int32_t> tokens;
  ASSERT_TRUE((*source)->Read(1, 38, 2, tokens).ok());
  EXPECT_EQ(tokens, (std::vector<int32_t>{38, 39}));
  Put((dir_ / "short.bin").string(), shard.substr(0, 1024 + 20));
  auto short_source = OpenTokenSource((dir_ / "short.bin").string());
  ASSERT_FALSE(short_source.ok());
  EXPECT_NE(short_source.status().message().find("header says 40 tokens"), std::string::npos);
}

// srunway-prep --decode stopped by a signal between documents: the lines given so far are whole, and it says after
// how many of how many (a stop while a write waits is train_cli.sh's).
TEST_F(DataTest, DecodeStoppedBetweenDocumentsSaysAfterHowMany) {
  std::string jsonl;
  for (int d = 0; d < 5; ++d) jsonl += fmt::format("{{\"text\": \"document {} of five\"}}\n", d);
  Put((dir_ / "docs.jsonl").string(), jsonl);
  PrepOptions prep;
  prep.input = (dir_ / "docs.jsonl").string();
  prep.output_prefix = (dir_ / "docs").string();
  prep.train_vocab = 300;
  prep.progress = false;
  ASSERT_TRUE(RunPrep(prep).ok());
  volatile std::sig_atomic_t stop = 0;
  DecodeOptions decode;
  decode.prefix = prep.output_prefix;
  decode.stop = &stop;
  std::vector<std::string> lines;
  auto decoded = DecodeDataset(decode, [&](std::string_view line) {
    lines.emplace_back(line);
    if (lines.size() == 2) stop = SIGINT;  // as the handler sets it while the second line is written
    return common::Status::Ok();
  });
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), common::StatusCode::kAborted);
  EXPECT_EQ(decoded.status().message(), "stopped by SIGINT after 2 of 5 documents");
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"text\":\"document 0 of five\"}\n",
                                             "{\"text\":\"document 1 of five\"}\n"}));
}

}  // namespace
}  // namespace srunway::trainer
