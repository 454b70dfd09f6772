// Checkpoints: round trip, the latest pointer, another model's checkpoint, corruption and truncation.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <span>

#include "common/fs.h"
#include "tests/unit/temp_dir.h"
#include "trainer/ckpt/checkpoint.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/ckpt/weights.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/model/params.h"
#include "trainer/model/rng.h"
#include "trainer/optim/schedule.h"

namespace srunway::trainer {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = *Preset("gpt-tiny");
    const int64_t n = ParamLayout(config_).numel();
    params_.resize(n);
    m_.resize(n);
    v_.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      params_[i] = static_cast<float>(i) * 0.5f;
      m_[i] = -static_cast<float>(i);
      v_[i] = static_cast<float>(i % 7);
    }
  }
  TrainingState State(int64_t step) {
    TrainingState state;
    state.model = config_;
    state.step = step;
    state.consumed_samples = step * 8;
    state.rng = {1, 2, 3, 4};
    return state;
  }

  testing::TempDir temp_{"srunway-ckpt-test"};
  const fs::path& dir_ = temp_.path();
  ModelConfig config_;
  std::vector<float> params_, m_, v_;
};

TEST_F(CheckpointTest, RoundTripThroughTheLatestPointer) {
  ASSERT_TRUE(SaveCheckpoint(dir_, State(10), {params_, m_, v_}).ok());
  params_[3] = 42.0f;
  auto path = SaveCheckpoint(dir_, State(20), {params_, m_, v_});
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(path->filename(), "iter_0000020.ckpt");
  EXPECT_EQ(*common::ReadFile(dir_ / "latest_checkpointed_iteration.txt"), "20\n");

  std::vector<float> p(params_.size()), m(m_.size()), v(v_.size());
  auto state = LoadCheckpoint(dir_, config_, {p, m, v});
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->step, 20);
  EXPECT_EQ(state->consumed_samples, 160);
  EXPECT_EQ(state->rng, (std::array<uint64_t, 4>{1, 2, 3, 4}));
  EXPECT_EQ(p, params_);
  EXPECT_EQ(m, m_);
  EXPECT_EQ(v, v_);
  // An explicit older file loads that one.
  auto older = LoadCheckpoint(dir_ / "iter_0000010.ckpt", config_, {p, m, v});
  ASSERT_TRUE(older.ok());
  EXPECT_EQ(older->step, 10);
  EXPECT_EQ(p[3], 1.5f);
}

TEST_F(CheckpointTest, EmptyDirectoryIsNotFound) {
  fs::create_directories(dir_);
  auto state = LoadCheckpoint(dir_, config_, {params_, m_, v_});
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), common::StatusCode::kNotFound);
}

// The pointer naming a step whose checkpoint is gone (deleted by hand, an edited pointer) is an error, not "no
// checkpoint yet": that would train from scratch and later save over the checkpoints that are there. A pointer or
// manifest that does not parse is corrupt data (exit 1), not a bad command line.
TEST_F(CheckpointTest, APointerToAMissingOrUnreadableCheckpointIsDataLoss) {
  ASSERT_TRUE(SaveCheckpoint(dir_, State(5), {params_, m_, v_}).ok());
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "latest_checkpointed_iteration.txt", "7\n").ok());
  auto state = LoadCheckpoint(dir_, config_, {params_, m_, v_});
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), common::StatusCode::kDataLoss);
  EXPECT_NE(state.status().message().find("latest_checkpointed_iteration.txt names step 7, but neither "
                                          "iter_0000007/ nor iter_0000007.ckpt is there (complete: step 5)"),
            std::string::npos)
      << state.status().message();
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "latest_checkpointed_iteration.txt", "seven\n").ok());
  state = LoadCheckpoint(dir_, config_, {params_, m_, v_});
  EXPECT_EQ(state.status().code(), common::StatusCode::kDataLoss) << state.status().ToString();
  EXPECT_NE(state.status().message().find("'seven' is not an integer"), std::string::npos);
}

TEST_F(CheckpointTest, LastCompleteCheckpointNamesTheStepOrThatThereIsNone) {
  EXPECT_EQ(LastCompleteCheckpoint(dir_), fmt::format("there is no complete checkpoint in {} yet", dir_.string()));
  ASSERT_TRUE(SaveCheckpoint(dir_, State(5), {params_, m_, v_}).ok());
  EXPECT_EQ(LastCompleteCheckpoint(dir_),
            fmt::format("the last complete checkpoint in {} stays (step 5)", dir_.string()));
}

// Which of two directories holds the newer checkpoint (non-persistent checkpoints beside --load's) is read off
// their pointers; a directory without one has none.
TEST_F(CheckpointTest, LatestStepIsThePointersStep) {
  EXPECT_EQ(LatestStep(dir_).status().code(), common::StatusCode::kNotFound);
  ASSERT_TRUE(SaveCheckpoint(dir_, State(5), {params_, m_, v_}).ok());
  ASSERT_TRUE(SaveCheckpoint(dir_, State(7), {params_, m_, v_}).ok());
  auto step = LatestStep(dir_);
  ASSERT_TRUE(step.ok()) << step.status().message();
  EXPECT_EQ(*step, 7);
}

TEST_F(CheckpointTest, AnotherModelIsRefusedNamingTheDifference) {
  ASSERT_TRUE(SaveCheckpoint(dir_, State(5), {params_, m_, v_}).ok());
  ModelConfig other = config_;
  other.n_layer = 3;
  other.d_model = 128;
  std::vector<float> p(ParamLayout(other).numel()), m(p.size()), v(p.size());
  auto state = LoadCheckpoint(dir_, other, {p, m, v});
  ASSERT_FALSE(state.ok());
  EXPECT_NE(state.status().message().find("n_layer is 2 in the checkpoint and 3 here"), std::string::npos)
      << state.status().message();
  EXPECT_NE(state.status().message().find("d_model is 64 in the checkpoint and 128 here"), std::string::npos);
  EXPECT_NE(state.status().message().find("iter_0000005.ckpt"), std::string::npos);
}

TEST_F(CheckpointTest, CorruptAndTruncatedFilesAreRefused) {
  auto path = SaveCheckpoint(dir_, State(1), {params_, m_, v_});
  ASSERT_TRUE(path.ok());
  std::string bytes = *common::ReadFile(*path);
  std::string flipped = bytes;
  flipped[flipped.size() - 100] ^= 1;
  ASSERT_TRUE(common::WriteFileAtomic(*path, flipped).ok());
  auto corrupt = LoadCheckpoint(*path, config_, {params_, m_, v_});
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("checksum"), std::string::npos);
  ASSERT_TRUE(common::WriteFileAtomic(*path, bytes.substr(0, bytes.size() / 2)).ok());
  auto truncated = LoadCheckpoint(*path, config_, {params_, m_, v_});
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos) << truncated.status().message();
  ASSERT_TRUE(common::WriteFileAtomic(*path, "not a checkpoint at all, just text").ok());
  EXPECT_NE(LoadCheckpoint(*path, config_, {params_, m_, v_}).status().message().find("bad magic"), std::string::npos);
  // --export's safetensors file is the likely mistake: said so.
  std::string safetensors(8, '\0');
  safetensors[0] = 2;
  safetensors += "{}";
  ASSERT_TRUE(common::WriteFileAtomic(*path, safetensors).ok());
  EXPECT_NE(LoadCheckpoint(*path, config_, {params_, m_, v_}).status().message().find(
                "not a srunway checkpoint but a safetensors file (--export's weights, without the optimizer state "
                "and data position that --load resumes)"),
            std::string::npos)
      << LoadCheckpoint(*path, config_, {params_, m_, v_}).status().message();
}

// A checkpoint or a weights file cut short while a run loads it (rewritten in place, by cp or a script writing to the
// same name) ended the process with SIGBUS, without a word: the loads read them mapped. Now one error names the
// file. The cut falls between the mapping and the reads, where MappedFile::Open's test hook runs; cut to nothing,
// the header's read meets it, cut after the header, the tensors' reads do.
void CutShortWhenOpened(const fs::path& victim, uintmax_t size) {
  SetMappedFileOpenedForTest([victim, size](const fs::path& opened) {
    if (opened == victim) fs::resize_file(opened, size);
  });
}

void ExpectCutShort(const common::Status& status, const fs::path& file, uintmax_t size, uintmax_t now) {
  SetMappedFileOpenedForTest({});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), common::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find(fmt::format("{}: cut short while the run read it ({} bytes when opened, {} now)",
                                              file.string(), size, now)),
            std::string::npos)
      << status.message();
}

TEST_F(CheckpointTest, ACheckpointCutShortWhileItLoadsIsNamed) {
  auto path = SaveCheckpoint(dir_, State(1), {params_, m_, v_});
  ASSERT_TRUE(path.ok());
  const uintmax_t size = fs::file_size(*path);
  for (const uintmax_t cut : {uintmax_t{0}, uintmax_t{8192}}) {
    ASSERT_TRUE(SaveCheckpoint(dir_, State(1), {params_, m_, v_}).ok());
    CutShortWhenOpened(*path, cut);
    ExpectCutShort(LoadCheckpoint(*path, config_, {params_, m_, v_}).status(), *path, size, cut);
  }
}

TEST_F(CheckpointTest, WeightsCutShortWhileTheyLoadAreNamed) {
  ASSERT_TRUE(ExportHuggingFace(dir_ / "hf", config_, params_, std::nullopt).ok());
  const fs::path file = dir_ / "hf" / "model.safetensors";
  const uintmax_t size = fs::file_size(file);
  uint64_t header = 0;
  std::memcpy(&header, common::ReadFile(file)->data(), sizeof header);
  ASSERT_LT(8 + header + 4096, size);
  for (const uintmax_t cut : {uintmax_t{0}, 8 + header + 4096}) {  // the header's read meets it; the tensors' do
    CutShortWhenOpened(file, cut);
    ExpectCutShort(ImportWeights(file, config_, params_).status(), file, size, cut);
    ASSERT_TRUE(ExportHuggingFace(dir_ / "hf", config_, params_, std::nullopt).ok());
  }
}

// The header's numbers come from a file anyone may have edited: nothing converts them unchecked.
TEST_F(CheckpointTest, HeaderNumbersOutOfRangeAreRefusedNamingTheField) {
  auto path = SaveCheckpoint(dir_, State(3), {params_, m_, v_});
  ASSERT_TRUE(path.ok());
  const std::string good = *common::ReadFile(*path);
  // The file with its JSON header edited by `edit` (the length field follows; the tensors are not needed).
  auto with_header = [&](const std::function<void(common::Json&)>& edit) {
    uint64_t length = 0;
    std::memcpy(&length, good.data() + 16, 8);
    common::Json header = common::ParseJson(good.substr(24, length), "header").value();
    edit(header);
    const std::string text = header.dump();
    std::string bytes = good.substr(0, 24) + text;
    length = text.size();
    std::memcpy(bytes.data() + 16, &length, 8);
    auto read = ReadCheckpointHeader(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                     "c.ckpt");
    return read.ok() ? std::string("ok") : read.status().message();
  };
  auto header = ReadCheckpointHeader(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(good.data()), good.size()), "c.ckpt");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->state.step, 3);
  EXPECT_EQ(header->data_offset % 64, 0u);
  EXPECT_EQ(with_header([](common::Json&) {}), "ok");
  EXPECT_EQ(with_header([](common::Json& h) { h["model"]["n_layer"] = 9e99; }),
            "c.ckpt: model: key 'n_layer'=9e+99 is not an integer in [-2147483648, 2147483647]");
  EXPECT_EQ(with_header([](common::Json& h) { h["model"]["n_layer"] = 2.5; }),
            "c.ckpt: model: key 'n_layer'=2.5 is not an integer in [-2147483648, 2147483647]");
  EXPECT_EQ(with_header([](common::Json& h) { h["model"]["d_model"] = 1 << 30; }),
            "c.ckpt: model: d_model (--hidden-size) 1073741824 is larger than srunway supports (131072)");
  EXPECT_EQ(with_header([](common::Json& h) { h["model"]["norm_eps"] = 1e300; }),
            "c.ckpt: model: key 'norm_eps'=1e+300 is out of range");
  EXPECT_EQ(with_header([](common::Json& h) { h["step"] = -3; }),
            "c.ckpt: step -3 and consumed_samples 24 cannot be negative");
  EXPECT_EQ(with_header([](common::Json& h) { h["step"] = 1e30; }),
            "c.ckpt: key 'step'=1e+30 is not an integer in [-9223372036854775808, 9223372036854775807]");
  EXPECT_EQ(with_header([](common::Json& h) { h["rng"][0] = -1; }),
            "c.ckpt: rng[0]=-1 is not an integer in [0, 18446744073709551615]");
  EXPECT_EQ(with_header([](common::Json& h) { h["rng"] = {1, 2}; }), "c.ckpt: rng is not an array of 4 numbers");
  // The tensors it lists: all three or the parameters alone, in that order.
  EXPECT_EQ(with_header([](common::Json& h) { h["tensors"].erase(2); }),
            "c.ckpt: tensors is not a list of 1 or 3 tensors");
  EXPECT_EQ(with_header([](common::Json& h) { h["tensors"] = common::Json::array({h["tensors"][1]}); }),
            "c.ckpt: tensors[0] is adam_m, not params");
  EXPECT_EQ(with_header([](common::Json& h) { h["tensors"][2].erase("name"); }),
            "c.ckpt: tensors[2]: missing key 'name'");
  // A key missing is corrupt data, never NotFound, which a resume takes for "no checkpoint yet: start from scratch"
  // (and then saves over the checkpoints there).
  std::string bytes = good;
  const size_t at = bytes.find("\"step\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = 'X';
  ASSERT_TRUE(common::WriteFileAtomic(*path, bytes).ok());
  const auto loaded = LoadCheckpoint(dir_, config_, {params_, m_, v_});
  EXPECT_EQ(loaded.status().code(), common::StatusCode::kDataLoss) << loaded.status().ToString();
  EXPECT_NE(loaded.status().message().find("missing key 'step'"), std::string::npos) << loaded.status().ToString();
}

TEST_F(CheckpointTest, SafetensorsHeaderReadBackAndEveryRuleChecked) {
  const std::vector<float> a(6, 1.0f), b(4, 2.0f);
  const fs::path file = dir_ / "w.safetensors";
  fs::create_directories(dir_);
  ASSERT_TRUE(WriteSafetensors(file, {{"a", {2, 3}, a.data()}, {"b", {4}, b.data()}}, {{"step", "7"}}).ok());
  const std::string good = *common::ReadFile(file);
  auto read = [](const std::string& bytes) {
    return ReadSafetensorsHeader(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                                 bytes.size(), "w.safetensors");
  };
  auto header = read(good);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  ASSERT_EQ(header->tensors.size(), 2u);
  EXPECT_EQ(header->tensors[0].name, "a");
  EXPECT_EQ(header->tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(header->tensors[1].begin, 24u);
  EXPECT_EQ(header->tensors[1].end, 40u);
  EXPECT_EQ(header->metadata.at("step"), "7");
  EXPECT_EQ(header->data_start + 40, good.size());

  auto edited = [&](const std::string& from, const std::string& to) {
    std::string bytes = good;
    bytes.replace(bytes.find(from), from.size(), to);
    // The header grew or shrank by the edit: its length field follows, so only the edited value is wrong.
    uint64_t length = 0;
    std::memcpy(&length, good.data(), 8);
    length = length + to.size() - from.size();
    std::memcpy(bytes.data(), &length, 8);
    auto result = read(bytes);
    return result.ok() ? std::string("ok") : result.status().message();
  };
  EXPECT_NE(edited("\"F32\"", "\"F99\"").find("unknown dtype 'F99'"), std::string::npos);
  EXPECT_NE(edited("[2,3]", "[2,-3]").find("negative dimension -3"), std::string::npos);
  EXPECT_NE(edited("[2,3]", "[2,9e99]").find("shape dimension=9e+99"), std::string::npos);
  EXPECT_NE(edited("[2,3]", "[4294967296,4294967296]").find("overflows 64 bits"), std::string::npos);
  EXPECT_NE(edited("[2,3]", "[3,3]").find("do not hold 36 bytes"), std::string::npos);
  EXPECT_NE(edited("[24,40]", "[28,44]").find("a hole or an overlap"), std::string::npos);
  EXPECT_NE(edited("[0,24]", "[0,-24]").find("data_offsets[1]=-24"), std::string::npos);
  // Past the end, and a header length larger than the file.
  EXPECT_NE(read(good.substr(0, good.size() - 4)).status().message().find("cover 40 bytes of data, the file holds 36"),
            std::string::npos);
  std::string huge = good;
  const uint64_t length = uint64_t{1} << 62;
  std::memcpy(huge.data(), &length, 8);
  EXPECT_NE(read(huge).status().message().find("does not fit the file"), std::string::npos);
  EXPECT_FALSE(read("short").ok());
}

// Sharded: 3 ranks each write their slices of every bucket (as ZeRO-1 owns them) with the packed moments.
class ShardedCheckpointTest : public CheckpointTest {
 protected:
  static constexpr int kRanks = 3;
  std::vector<ParamRange> Ranges(int rank) const {
    // Slices of buckets of 1000 floats, each divided in three: the trainer's own layout.
    std::vector<ParamRange> ranges;
    for (int64_t end = static_cast<int64_t>(params_.size()); end > 0; end -= 1000) {
      const int64_t begin = std::max<int64_t>(0, end - 1000), shard = (end - begin + kRanks - 1) / kRanks;
      const int64_t first = std::min(end - begin, rank * shard), last = std::min(end - begin, (rank + 1) * shard);
      if (last > first) ranges.push_back({begin + first, last - first});
    }
    return ranges;
  }
  // Rank `rank`'s shard, written with the ranges of rank `ranges_of`.
  common::Status WriteOne(int64_t step, int rank, int ranges_of) {
    std::vector<float> pp, pm, pv;
    for (const ParamRange& range : Ranges(ranges_of)) {
      pp.insert(pp.end(), params_.begin() + range.offset, params_.begin() + range.offset + range.count);
      pm.insert(pm.end(), m_.begin() + range.offset, m_.begin() + range.offset + range.count);
      pv.insert(pv.end(), v_.begin() + range.offset, v_.begin() + range.offset + range.count);
    }
    return WriteShard(dir_, State(step), rank, kRanks, Ranges(ranges_of),
                      {ShardTensor{pp, false}, ShardTensor{pm, false}, ShardTensor{pv, false}});
  }
  // The same shard from the whole buffers, as the trainer writes those it holds whole.
  common::Status WriteOneWhole(int64_t step, int rank) {
    return WriteShard(dir_, State(step), rank, kRanks, Ranges(rank),
                      {ShardTensor{params_, true}, ShardTensor{m_, true}, ShardTensor{v_, true}});
  }
  void WriteAll(int64_t step) {
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(WriteOne(step, r, r).ok());
    ASSERT_TRUE(CommitShards(dir_, step, kRanks).ok());
  }
  common::Status Load() {
    std::vector<float> p(params_.size()), m(m_.size()), v(v_.size());
    auto state = LoadCheckpoint(dir_, config_, {p, m, v});
    if (!state.ok()) return state.status();
    EXPECT_EQ(p, params_);
    EXPECT_EQ(m, m_);
    EXPECT_EQ(v, v_);
    return common::Status::Ok();
  }
  fs::path Shard(int64_t step, int rank) const { return ShardDir(dir_, step) / ShardName(rank, kRanks); }
};

TEST_F(ShardedCheckpointTest, ShardsFromThreeRanksMakeTheWholeState) {
  WriteAll(7);
  EXPECT_TRUE(fs::exists(ShardDir(dir_, 7) / "manifest.json"));
  EXPECT_EQ(*common::ReadFile(dir_ / "latest_checkpointed_iteration.txt"), "7\n");
  const common::Status loaded = Load();
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
}

TEST_F(ShardedCheckpointTest, AMissingShardIsNamed) {
  WriteAll(7);
  fs::remove(Shard(7, 1));
  const common::Status loaded = Load();
  EXPECT_EQ(loaded.code(), common::StatusCode::kDataLoss);
  EXPECT_NE(loaded.message().find(Shard(7, 1).string() + ": missing (listed in"), std::string::npos) << loaded.message();
}

TEST_F(ShardedCheckpointTest, ACorruptShardIsNamed) {
  WriteAll(7);
  std::string bytes = *common::ReadFile(Shard(7, 2));
  bytes[bytes.size() - 100] ^= 0x40;
  ASSERT_TRUE(common::WriteFileAtomic(Shard(7, 2), bytes).ok());
  const common::Status loaded = Load();
  EXPECT_NE(loaded.message().find(Shard(7, 2).string() + ": checksum mismatch"), std::string::npos) << loaded.message();
}

TEST_F(ShardedCheckpointTest, AManifestWithoutItsShardsIsAnErrorAndUncommittedShardsAreNotLoaded) {
  WriteAll(7);
  for (int r = 0; r < kRanks; ++r) fs::remove(Shard(7, r));
  EXPECT_NE(Load().message().find("shard_00000_of_00003.ckpt: missing"), std::string::npos) << Load().message();
  // Shards without a manifest (a save that did not finish) are never read: latest still names step 7.
  WriteAll(7);
  ASSERT_TRUE(WriteOne(9, 0, 0).ok());
  EXPECT_TRUE(Load().ok());
  EXPECT_EQ(*common::ReadFile(dir_ / "latest_checkpointed_iteration.txt"), "7\n");
  // Committing with a shard missing is refused and leaves latest alone.
  EXPECT_EQ(CommitShards(dir_, 9, kRanks).code(), common::StatusCode::kDataLoss);
  EXPECT_EQ(*common::ReadFile(dir_ / "latest_checkpointed_iteration.txt"), "7\n");
}

TEST_F(ShardedCheckpointTest, AManifestThatDoesNotParseIsDataLoss) {
  WriteAll(7);
  ASSERT_TRUE(common::WriteFileAtomic(ShardDir(dir_, 7) / "manifest.json", "{\n").ok());
  common::Status loaded = Load();
  EXPECT_EQ(loaded.code(), common::StatusCode::kDataLoss) << loaded.ToString();
  EXPECT_NE(loaded.message().find("iter_0000007/manifest.json:2:1: syntax error"), std::string::npos)
      << loaded.message();
  // A key missing: corrupt too, not NotFound (a resume's "no checkpoint yet").
  ASSERT_TRUE(common::WriteFileAtomic(ShardDir(dir_, 7) / "manifest.json", "{\"step\": 7}\n").ok());
  loaded = Load();
  EXPECT_EQ(loaded.code(), common::StatusCode::kDataLoss) << loaded.ToString();
  EXPECT_NE(loaded.message().find("missing key 'shards'"), std::string::npos) << loaded.message();
}

TEST_F(ShardedCheckpointTest, AShardWrittenFromTheWholeBuffersIsTheOneWrittenFromPackedRanges) {
  for (int r = 0; r < kRanks; ++r) {
    const fs::path staged = StagingDir(dir_, 5) / ShardName(r, kRanks);
    ASSERT_TRUE(WriteOne(5, r, r).ok());
    const std::string packed = *common::ReadFile(staged);
    ASSERT_TRUE(WriteOneWhole(5, r).ok());
    EXPECT_EQ(*common::ReadFile(staged), packed) << "rank " << r;
  }
  ASSERT_TRUE(CommitShards(dir_, 5, kRanks).ok());
  const common::Status loaded = Load();
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
}

// --no-save-optim and --no-save-rng: shards of the parameters alone, a third of the bytes, that load without the
// moments and refuse to give them.
TEST_F(ShardedCheckpointTest, ShardsSavedWithoutTheMomentsOrTheRandomStateLoadTheParametersAlone) {
  const std::vector<float> none;
  for (int r = 0; r < kRanks; ++r) {
    TrainingState state = State(7);
    state.rng.reset();
    // The moments' tensors are not read: empty spans of the wrong size are no error.
    ASSERT_TRUE(WriteShard(dir_, state, r, kRanks, Ranges(r),
                           {ShardTensor{params_, true}, ShardTensor{none, false}, ShardTensor{none, true}},
                           /*moments=*/false).ok());
  }
  ASSERT_TRUE(CommitShards(dir_, 7, kRanks).ok());
  int64_t held = 0;
  for (const ParamRange& range : Ranges(0)) held += range.count;
  EXPECT_LT(fs::file_size(Shard(7, 0)), 4096 + static_cast<uintmax_t>(held) * sizeof(float));
  auto summary = ReadCheckpointSummary(dir_);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_FALSE(summary->moments);
  EXPECT_TRUE(summary->model == config_);

  std::vector<float> p(params_.size());
  static const std::vector<ParamRange> kNoMoments;
  auto state = LoadCheckpoint(dir_, config_, {p, {}, {}, &kNoMoments});
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(p, params_);
  EXPECT_EQ(state->step, 7);
  EXPECT_FALSE(state->rng.has_value());

  // Asked for the moments (a resume without --no-load-optim): one line naming the shard and the flag.
  const common::Status loaded = Load();
  EXPECT_EQ(loaded.code(), common::StatusCode::kFailedPrecondition);
  EXPECT_NE(loaded.message().find(Shard(7, 0).string() + ": saved without optimizer state (--no-save-optim): resume "
                                  "from it with --no-load-optim"), std::string::npos) << loaded.message();
  // A ZeRO-1 rank's slices of the moments, likewise.
  std::vector<ParamRange> slice = {{10, 20}};
  std::vector<float> m(20), v(20);
  EXPECT_EQ(LoadCheckpoint(dir_, config_, {p, m, v, &slice}).status().code(), common::StatusCode::kFailedPrecondition);

  // A full save says it has the moments; its rng comes back.
  WriteAll(8);
  summary = ReadCheckpointSummary(dir_);
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(summary->moments);
  EXPECT_TRUE(Load().ok());
}

TEST_F(ShardedCheckpointTest, BuffersMustMatchTheRangesOrTheModel) {
  int64_t held = 0;
  for (const ParamRange& range : Ranges(0)) held += range.count;
  std::vector<float> fits(static_cast<size_t>(held)), too_short(3);
  auto write = [&](const std::vector<ParamRange>& ranges, ShardTensor p, ShardTensor m, ShardTensor v) {
    return WriteShard(dir_, State(1), 0, kRanks, ranges, {p, m, v});
  };
  EXPECT_EQ(write(Ranges(0), {fits}, {too_short}, {too_short}).code(), common::StatusCode::kInvalidArgument);
  common::Status status = write(Ranges(0), {params_}, {fits}, {fits});  // the whole parameters, said to be packed
  EXPECT_EQ(status.code(), common::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(fmt::format("{} packed parameters, want {}", params_.size(), held)), std::string::npos)
      << status.message();
  status = write(Ranges(0), {params_, true}, {fits}, {fits, true});  // packed moments, said to be whole
  EXPECT_NE(status.message().find(fmt::format("{} whole second moments, want {}", held, params_.size())),
            std::string::npos) << status.message();
  EXPECT_TRUE(write(Ranges(0), {params_, true}, {fits}, {v_, true}).ok());
  std::vector<ParamRange> outside = {{static_cast<int64_t>(params_.size()) - 2, 3}};
  EXPECT_NE(write(outside, {too_short}, {too_short}, {too_short}).message().find("is outside the"), std::string::npos);
}

// ZeRO-1 on another number of ranks: a rank's slices of the moments (crossing the writers' ranges, in any order)
// are read straight into its packed buffers, from shards or from a single checkpoint file.
TEST_F(ShardedCheckpointTest, MomentSlicesLoadIntoPackedBuffers) {
  const auto n = static_cast<int64_t>(params_.size());
  const std::vector<ParamRange> mine = {{n - 1500, 1200}, {5, 333}, {n - 1, 1}};
  auto slices = [&mine](const std::vector<float>& whole) {
    std::vector<float> out;
    for (const ParamRange& r : mine) out.insert(out.end(), whole.begin() + r.offset, whole.begin() + r.offset + r.count);
    return out;
  };
  auto load = [&](const fs::path& where) {
    std::vector<float> p(params_.size()), m(1534, -1.0f), v(1534, -1.0f);
    auto state = LoadCheckpoint(where, config_, {p, m, v, &mine});
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    EXPECT_EQ(p, params_);
    EXPECT_EQ(m, slices(m_));
    EXPECT_EQ(v, slices(v_));
  };
  WriteAll(7);
  load(dir_);
  ASSERT_TRUE(SaveCheckpoint(dir_ / "single", State(3), {params_, m_, v_}).ok());
  load(dir_ / "single");

  std::vector<float> p(params_.size()), m(1534), v(1534), short_v(1533);
  const std::vector<ParamRange> outside = {{n - 2, 3}};
  EXPECT_NE(LoadCheckpoint(dir_, config_, {p, m, v, &outside}).status().message().find("is outside the"),
            std::string::npos);
  const auto mismatch = LoadCheckpoint(dir_, config_, {p, m, short_v, &mine}).status();
  EXPECT_EQ(mismatch.code(), common::StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.message().find("moment buffers of 1534 and 1533 elements to load 1534 into"), std::string::npos)
      << mismatch.message();
}

// Each tensor has its own checksum: a ZeRO-1 rank checks and reads the parameters of every shard but only the
// moments of the shards that hold its slices, so a damaged moment elsewhere is found by the rank that needs it.
TEST_F(ShardedCheckpointTest, ARankChecksAndReadsOnlyTheMomentsItHolds) {
  WriteAll(7);
  std::string bytes = *common::ReadFile(Shard(7, 2));
  bytes[bytes.size() - 3 * 8 - 8 - 5] ^= 0x10;  // the last second moment, before the three checksums and the marker
  ASSERT_TRUE(common::WriteFileAtomic(Shard(7, 2), bytes).ok());
  auto load = [&](const std::vector<ParamRange>& mine) {
    int64_t held = 0;
    for (const ParamRange& r : mine) held += r.count;
    std::vector<float> p(params_.size()), m(static_cast<size_t>(held)), v(static_cast<size_t>(held));
    return LoadCheckpoint(dir_, config_, {p, m, v, &mine}).status();
  };
  const common::Status rank0 = load(Ranges(0));
  EXPECT_TRUE(rank0.ok()) << rank0.ToString();
  const common::Status rank2 = load(Ranges(2));
  EXPECT_NE(rank2.message().find(Shard(7, 2).string() + ": checksum mismatch: the tensor adam_v is corrupt"),
            std::string::npos) << rank2.message();
  const common::Status whole = Load();
  EXPECT_NE(whole.message().find("checksum mismatch: the tensor adam_v is corrupt"), std::string::npos)
      << whole.message();
}

// Checkpoints of version 1 (one FNV-1a over all three tensors) are still read, and their damage still found.
TEST_F(ShardedCheckpointTest, VersionOneCheckpointsStillLoad) {
  // `path` rewritten as version 1 wrote it: the version field, then one checksum in place of three.
  auto to_version_1 = [](const fs::path& path) {
    std::string bytes = *common::ReadFile(path);
    const uint32_t version = 1;
    std::memcpy(bytes.data() + 8, &version, 4);
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + 16, 8);
    const size_t data = (24 + length + 63) / 64 * 64, end = bytes.size() - 3 * 8 - 8;
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t i = data; i < end; ++i) {
      hash ^= static_cast<uint8_t>(bytes[i]);
      hash *= 0x100000001b3ULL;
    }
    bytes.resize(end);
    bytes.append(reinterpret_cast<const char*>(&hash), 8);
    bytes.append("SRWYEND", 8);
    ASSERT_TRUE(common::WriteFileAtomic(path, bytes).ok());
  };
  WriteAll(7);
  for (int r = 0; r < kRanks; ++r) to_version_1(Shard(7, r));
  common::Status loaded = Load();
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
  auto single = SaveCheckpoint(dir_ / "single", State(3), {params_, m_, v_});
  ASSERT_TRUE(single.ok());
  to_version_1(*single);
  std::vector<float> p(params_.size()), m(m_.size()), v(v_.size());
  auto state = LoadCheckpoint(*single, config_, {p, m, v});
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->step, 3);
  EXPECT_EQ(p, params_);
  EXPECT_EQ(v, v_);
  std::string bytes = *common::ReadFile(*single);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(common::WriteFileAtomic(*single, bytes).ok());
  EXPECT_NE(LoadCheckpoint(*single, config_, {p, m, v}).status().message().find(
                "checksum mismatch: the tensors are corrupt"), std::string::npos);
}

// --load naming one shard file: it holds a third of the parameters, and loading it alone would train on from a
// model part resumed, part freshly initialised.
TEST_F(ShardedCheckpointTest, OneShardAloneIsRefused) {
  WriteAll(7);
  std::vector<float> p(params_.size()), m(m_.size()), v(v_.size());
  const common::Status loaded = LoadCheckpoint(Shard(7, 1), config_, {p, m, v}).status();
  EXPECT_EQ(loaded.code(), common::StatusCode::kFailedPrecondition) << loaded.ToString();
  EXPECT_NE(loaded.message().find(fmt::format("{} is one shard of a sharded checkpoint (", Shard(7, 1).string())),
            std::string::npos) << loaded.message();
  EXPECT_NE(loaded.message().find(fmt::format("parameters): --load its directory, {}", ShardDir(dir_, 7).string())),
            std::string::npos) << loaded.message();
}

// A run rewound to an older checkpoint saves a step it saved before. Shards replaced one by one under the old
// manifest made a save that died midway a mix of two runs that passed every check: the old checkpoint stays whole
// until the new one is complete, then is replaced whole.
TEST_F(ShardedCheckpointTest, ASaveOfAStepSavedBeforeReplacesItWhole) {
  WriteAll(7);
  const std::vector<float> before = params_;
  for (float& p : params_) p += 1.0f;
  ASSERT_TRUE(WriteOne(7, 0, 0).ok());  // the new save dies after rank 0's shard
  std::vector<float> p(params_.size()), m(m_.size()), v(v_.size());
  ASSERT_TRUE(LoadCheckpoint(dir_, config_, {p, m, v}).ok());
  EXPECT_EQ(p, before);
  // A later attempt on two ranks: rank 0's and the first attempt's files are not part of it.
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(WriteOne(7, r, r).ok());
  ASSERT_TRUE(common::WriteFileAtomic(StagingDir(dir_, 7) / "shard_00005_of_00009.ckpt", "stale").ok());
  ASSERT_TRUE(CommitShards(dir_, 7, kRanks).ok());
  EXPECT_TRUE(Load().ok());
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"iter_0000007", "latest_checkpointed_iteration.txt"}));
  names.clear();
  for (const auto& entry : fs::directory_iterator(ShardDir(dir_, 7))) names.push_back(entry.path().filename().string());
  EXPECT_EQ(names.size(), 4u);  // three shards and the manifest
}

// A re-save of step 7 that died between CommitShards' two renames: latest names step 7, iter_0000007 is set aside
// and the new one is still staged. The set-aside one (complete) is loaded (it was "names step 7, but neither
// iter_0000007/ nor iter_0000007.ckpt is there"); the next commit of step 7 removes it.
TEST_F(ShardedCheckpointTest, ACheckpointSetAsideByADeadSaveIsLoaded) {
  WriteAll(7);
  const std::vector<float> before = params_;
  for (float& p : params_) p += 1.0f;
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(WriteOne(7, r, r).ok());
  fs::rename(ShardDir(dir_, 7), dir_ / ".replaced_iter_0000007");
  std::vector<float> p(params_.size()), m(m_.size()), v(v_.size());
  auto state = LoadCheckpoint(dir_, config_, {p, m, v});
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->step, 7);
  EXPECT_EQ(p, before);
  ASSERT_TRUE(CommitShards(dir_, 7, kRanks).ok());
  EXPECT_FALSE(fs::exists(dir_ / ".replaced_iter_0000007"));
  ASSERT_TRUE(LoadCheckpoint(dir_, config_, {p, m, v}).ok());
  EXPECT_EQ(p, params_);
}

// Saves killed midway (a time limit's SIGKILL) left their staging directories for good unless a later save was of
// the same step: as large as a checkpoint each, they filled a --save directory at its quota.
TEST_F(ShardedCheckpointTest, UnfinishedSavesAreRemovedAndTheCheckpointsStay) {
  WriteAll(5);
  ASSERT_TRUE(WriteOne(9, 0, 0).ok());
  ASSERT_TRUE(WriteOne(9, 1, 1).ok());
  fs::create_directories(StagingDir(dir_, 12));
  ASSERT_TRUE(common::WriteFileAtomic(StagingDir(dir_, 12) / ".shard_00000_of_00003.ckpt.tmp.Ab12Cd", "partial").ok());
  ASSERT_TRUE(common::WriteFileAtomic(dir_ / "notes.txt", "mine").ok());
  const uintmax_t shards9 = fs::file_size(StagingDir(dir_, 9) / ShardName(0, kRanks)) +
                            fs::file_size(StagingDir(dir_, 9) / ShardName(1, kRanks));
  auto removed = RemoveUnfinishedSaves(dir_);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  std::map<std::string, uintmax_t> sizes;
  for (const RemovedSave& save : *removed) sizes[save.path.filename().string()] = save.bytes;
  EXPECT_EQ(sizes, (std::map<std::string, uintmax_t>{{".saving_iter_0000009", shards9}, {".saving_iter_0000012", 7}}));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"iter_0000005", "latest_checkpointed_iteration.txt", "notes.txt"}));
  EXPECT_TRUE(Load().ok());
  removed = RemoveUnfinishedSaves(dir_);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->empty());
  // A --save directory not made yet has none.
  removed = RemoveUnfinishedSaves(dir_ / "none");
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_TRUE(removed->empty());
}

TEST_F(ShardedCheckpointTest, ShardsThatDoNotTileTheBuffersAreRefused) {
  // Rank 2's shard written with rank 1's ranges: some elements twice, rank 2's in none.
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(WriteOne(7, r, r == 2 ? 1 : r).ok());
  ASSERT_TRUE(CommitShards(dir_, 7, kRanks).ok());
  EXPECT_NE(Load().message().find("the shards do not tile the parameters"), std::string::npos) << Load().message();
}

// --pretrained-checkpoint's test of --load, and --ckpt-step's choice: only complete checkpoints count, and an empty
// --load is no checkpoint (not the working directory's manifest.json).
TEST_F(ShardedCheckpointTest, ACheckpointOfAStepIsOnlyACompleteOne) {
  EXPECT_FALSE(HoldsCheckpoint(dir_));
  EXPECT_EQ(CheckpointOfStep(dir_, 5).status().code(), common::StatusCode::kNotFound);
  WriteAll(5);
  WriteAll(10);
  ASSERT_TRUE(WriteOne(15, 0, 0).ok());  // a save that died before its commit
  EXPECT_TRUE(HoldsCheckpoint(dir_));
  EXPECT_TRUE(HoldsCheckpoint(ShardDir(dir_, 5)));
  EXPECT_FALSE(HoldsCheckpoint(dir_ / "nothing"));
  const fs::path previous = fs::current_path();
  fs::current_path(ShardDir(dir_, 5));  // which holds a manifest.json
  EXPECT_FALSE(HoldsCheckpoint(""));
  fs::current_path(previous);
  auto five = CheckpointOfStep(dir_, 5);
  ASSERT_TRUE(five.ok()) << five.status().message();
  EXPECT_EQ(*five, ShardDir(dir_, 5));
  auto fifteen = CheckpointOfStep(dir_, 15);
  EXPECT_EQ(fifteen.status().code(), common::StatusCode::kNotFound);
  EXPECT_EQ(fifteen.status().message(),
            fmt::format("{} holds no complete checkpoint of step 15 (complete: step 5, 10)", dir_.string()));
  EXPECT_EQ(CheckpointOfStep(ShardDir(dir_, 5), 5).status().code(), common::StatusCode::kInvalidArgument);
}

// A run that went back to step 5 (--ckpt-step) saves 6 and 7 beside the 10, 15 and 20 of the run before it:
// --keep-checkpoints 2 keeps its own two newest, and leaves the later ones (above latest) alone, uncounted.
TEST_F(ShardedCheckpointTest, PruningAfterGoingBackCountsThisRunsCheckpoints) {
  for (int64_t step : {5, 10, 15, 20, 6, 7}) WriteAll(step);
  auto deleted = PruneCheckpoints(dir_, 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(*deleted, std::vector<std::string>{ShardDir(dir_, 5).string()});
  for (int64_t step : {6, 7, 10, 15, 20}) EXPECT_TRUE(fs::exists(ShardDir(dir_, step) / "manifest.json")) << step;
}

TEST_F(ShardedCheckpointTest, PruningKeepsTheNewestCompleteCheckpoints) {
  for (int64_t step : {5, 10, 15, 20}) WriteAll(step);
  auto deleted = PruneCheckpoints(dir_, 2);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->size(), 2u);
  EXPECT_FALSE(fs::exists(ShardDir(dir_, 5)));
  EXPECT_FALSE(fs::exists(ShardDir(dir_, 10)));
  EXPECT_TRUE(fs::exists(ShardDir(dir_, 15)));
  EXPECT_TRUE(Load().ok());
  // The newest complete one stays even with --keep-checkpoints 1 and a newer incomplete directory.
  ASSERT_TRUE(WriteOne(25, 0, 0).ok());
  ASSERT_TRUE(PruneCheckpoints(dir_, 1).ok());
  EXPECT_TRUE(fs::exists(ShardDir(dir_, 20) / "manifest.json"));
  EXPECT_FALSE(fs::exists(ShardDir(dir_, 15)));
}

TEST(ScheduleTest, WarmupThenCosineToMinimum) {
  LrSchedule s{1.0f, 0.1f, 10, 110};
  EXPECT_FLOAT_EQ(s.At(0), 0.1f);
  EXPECT_FLOAT_EQ(s.At(9), 1.0f);
  EXPECT_FLOAT_EQ(s.At(10), 1.0f);
  EXPECT_NEAR(s.At(60), 0.55f, 1e-6);
  EXPECT_FLOAT_EQ(s.At(110), 0.1f);
  EXPECT_FLOAT_EQ(s.At(500), 0.1f);
}

TEST(ScheduleTest, LinearAndConstantStyles) {
  LrSchedule linear{1.0f, 0.1f, 10, 110, DecayStyle::kLinear};
  EXPECT_NEAR(linear.At(60), 0.55f, 1e-6);
  EXPECT_NEAR(linear.At(35), 0.775f, 1e-6);
  LrSchedule constant{1.0f, 0.1f, 10, 110, DecayStyle::kConstant};
  EXPECT_FLOAT_EQ(constant.At(60), 1.0f);
  EXPECT_FLOAT_EQ(constant.At(500), 1.0f);
  EXPECT_FALSE(ParseDecayStyle("exponential").ok());
}

// Megatron's WSD, worked by hand: the rate holds at 1 until the last 20 steps before step 110 (from step 90), then
// falls to 0.1 as the shape says; at half of those steps linear and cosine are half way (0.55), exponential at
// 2 x 0.5^0.5 - 1 of the way, and minus_sqrt is half way at a quarter of them.
TEST(ScheduleTest, WarmupStableDecay) {
  auto wsd = [](WsdDecay shape) { return LrSchedule{1.0f, 0.1f, 10, 110, DecayStyle::kWsd, 0, 20, shape}; };
  const LrSchedule linear = wsd(WsdDecay::kLinear);
  EXPECT_FLOAT_EQ(linear.At(4), 0.5f);  // the warmup
  for (int64_t step : {10, 50, 90}) EXPECT_FLOAT_EQ(linear.At(step), 1.0f) << step;
  EXPECT_NEAR(linear.At(100), 0.55f, 1e-6);
  EXPECT_NEAR(linear.At(91), 0.1 + 0.9 * 19 / 20, 1e-6);
  EXPECT_FLOAT_EQ(linear.At(110), 0.1f);
  EXPECT_FLOAT_EQ(linear.At(500), 0.1f);
  EXPECT_NEAR(wsd(WsdDecay::kCosine).At(100), 0.55f, 1e-6);
  EXPECT_NEAR(wsd(WsdDecay::kExponential).At(100), 0.1 + 0.9 * (2 * std::sqrt(0.5) - 1), 1e-6);
  EXPECT_NEAR(wsd(WsdDecay::kMinusSqrt).At(95), 0.55f, 1e-6);
  EXPECT_TRUE(ParseDecayStyle("WSD").ok());
  EXPECT_FALSE(ParseDecayStyle("wsd").ok());  // Megatron's name, as it spells it
  EXPECT_TRUE(ParseWsdDecay("minus_sqrt").ok());
  EXPECT_FALSE(ParseWsdDecay("1-sqrt").ok());
}

// Megatron's inverse-square-root: lr x sqrt(warmup / step) after the warmup of 16, not below min_lr, and min_lr
// once past the decay's 1000 steps.
TEST(ScheduleTest, InverseSquareRoot) {
  const LrSchedule s{1.0f, 0.1f, 16, 1000, DecayStyle::kInverseSquareRoot};
  EXPECT_FLOAT_EQ(s.At(7), 0.5f);  // the warmup
  EXPECT_FLOAT_EQ(s.At(16), 1.0f);
  EXPECT_FLOAT_EQ(s.At(64), 0.5f);
  EXPECT_FLOAT_EQ(s.At(400), 0.2f);
  EXPECT_NEAR(s.At(1000), std::sqrt(16.0 / 1000), 1e-7);  // Megatron's min_lr starts after the decay's last step
  EXPECT_FLOAT_EQ(s.At(1001), 0.1f);
  EXPECT_FLOAT_EQ((LrSchedule{1.0f, 0.3f, 16, 1000, DecayStyle::kInverseSquareRoot}.At(400)), 0.3f);
}

// Megatron's get_wd, worked by hand: from 0 to 0.1 over 10 steps, linearly or along the half cosine 0.5 x (cos(pi x
// (1 - ratio)) + 1), which at a fifth of the way is 0.5 x (1 - cos(pi / 5)) = 0.0954915 of it.
TEST(ScheduleTest, WeightDecayIncrements) {
  const WeightDecaySchedule linear{0.0f, 0.1f, 10, WeightDecayStyle::kLinear};
  EXPECT_FLOAT_EQ(linear.At(0), 0.0f);
  EXPECT_FLOAT_EQ(linear.At(5), 0.05f);
  EXPECT_FLOAT_EQ(linear.At(10), 0.1f);
  EXPECT_FLOAT_EQ(linear.At(11), 0.1f);
  const WeightDecaySchedule cosine{0.0f, 0.1f, 10, WeightDecayStyle::kCosine};
  EXPECT_NEAR(cosine.At(2), 0.1 * 0.5 * (1 - std::cos(M_PI / 5)), 1e-8);
  EXPECT_NEAR(cosine.At(5), 0.05f, 1e-8);
  EXPECT_FLOAT_EQ(cosine.At(10), 0.1f);
  EXPECT_FLOAT_EQ((WeightDecaySchedule{0.3f, 0.3f, 10, WeightDecayStyle::kConstant}.At(7)), 0.3f);
  EXPECT_FALSE(ParseWeightDecayStyle("exponential").ok());
}

// NeMo's CosineAnnealing with the 5B recipe's warmup_steps 115 and constant_steps 12500, here with max_steps
// 75000, as its _linear_warmup_with_cosine_annealing computes it, worked by hand: the decay lasts 75000 - 12500 -
// 115 = 62385 steps.
TEST(ScheduleTest, NemoCosineWithAConstantTail) {
  LrSchedule s{1.6e-4f, 1.6e-5f, 115, 75000, DecayStyle::kCosine, 12500};
  EXPECT_FLOAT_EQ(s.At(0), 0.0f);  // NeMo's warmup starts at 0
  EXPECT_FLOAT_EQ(s.At(23), 1.6e-4f * 23 / 115);
  // In doubles, as Python's: step 7's rate in floats is one ulp below (9.739129e-06).
  EXPECT_EQ(s.At(7), static_cast<float>(double{1.6e-4f} * 7 / 115));
  EXPECT_NE(s.At(7), 1.6e-4f * 7.0f / 115.0f);
  EXPECT_FLOAT_EQ(s.At(115), 1.6e-4f);
  // Half way through the decay: step 115 + 62385 / 2 = 31307.5; at 31307 the ratio is 31192 / 62385.
  const double ratio = 31192.0 / 62385.0;
  EXPECT_NEAR(s.At(31307), 1.6e-5 + 0.5 * (1 + std::cos(M_PI * ratio)) * (1.6e-4 - 1.6e-5), 1e-10);
  EXPECT_FLOAT_EQ(s.At(62500), 1.6e-5f);  // the end of the decay
  EXPECT_FLOAT_EQ(s.At(62501), 1.6e-5f);  // the constant tail
  EXPECT_FLOAT_EQ(s.At(74999), 1.6e-5f);
}

// Megatron's --lr-warmup-init: the warmup rises from it (in doubles, as Python's), for the decoupled rate too; past
// the warmup it changes nothing.
TEST(ScheduleTest, WarmupFromItsInitialRate) {
  LrSchedule s{1e-3f, 1e-4f, 4, 20};
  s.warmup_init = 2e-4f;
  s.decoupled_lr = 3e-3f;
  const double init = double{2e-4f};
  EXPECT_EQ(s.At(0), static_cast<float>(init + (double{1e-3f} - init) * 1 / 4));
  EXPECT_EQ(s.At(2), static_cast<float>(init + (double{1e-3f} - init) * 3 / 4));
  EXPECT_EQ(s.Decoupled().At(0), static_cast<float>(init + (double{3e-3f} - init) * 1 / 4));
  EXPECT_EQ(s.Decoupled().At(3), 3e-3f);
  LrSchedule from_zero = s;
  from_zero.warmup_init = 0;
  for (int64_t step : {4, 7, 19, 25}) EXPECT_EQ(s.At(step), from_zero.At(step)) << step;
  // Without it, llm.c's warmup in floats, bit for bit as before.
  EXPECT_EQ(from_zero.At(0), 1e-3f * 1.0f / 4.0f);
}

// Counted in samples (a batch ramp's): the warmup step reaches the rate of its end, the step across the warmup's
// end starts the decay at its top, later steps take the rate of their start, as Megatron's.
TEST(ScheduleTest, InSamplesOfStepsOfManySizes) {
  LrSchedule s{1.0f, 0.0f, 6, 40};
  EXPECT_FLOAT_EQ(s.At(0, 2), 2.0f / 6);
  EXPECT_FLOAT_EQ(s.At(2, 2), 4.0f / 6);
  EXPECT_FLOAT_EQ(s.At(4, 4), 1.0f);  // samples 4 to 8, across the warmup's end at 6
  EXPECT_NEAR(s.At(8, 6), 0.5 * (1 + std::cos(M_PI * 2 / 34)), 1e-7);
  EXPECT_FLOAT_EQ(s.At(40, 8), 0.0f);
  EXPECT_FLOAT_EQ((LrSchedule{1.0f, 0.0f, 6, 6}.At(4, 4)), 1.0f);  // across the end of both
  // In steps, At(step) is At(step, 1).
  LrSchedule steps{1.0f, 0.1f, 10, 110};
  for (int64_t step : {0, 5, 9, 10, 60, 109, 110, 200}) EXPECT_EQ(steps.At(step), steps.At(step, 1)) << step;
}

// Megatron's ramp worked by hand: --rampup-batch-size 2 2 12 to a global batch of 8 makes 3 increments of 2, one
// every 12 / 3 = 4 samples; the step after c samples takes 2 + 2 x int(c / 4), and 8 once c is past 12.
TEST(BatchRampTest, GrowsAsMegatronsCalculator) {
  auto ramp = BatchRamp::Make(2, 2, 12, 8, 2, 1);
  ASSERT_TRUE(ramp.ok()) << ramp.status().message();
  EXPECT_TRUE(ramp->ramps());
  std::vector<int64_t> batches;
  for (int64_t done = 0, step = 0; step < 7; ++step, done += batches.back()) batches.push_back(ramp->At(done));
  EXPECT_EQ(batches, (std::vector<int64_t>{2, 2, 4, 6, 8, 8, 8}));
  EXPECT_EQ(ramp->At(12), 8);  // 12 is not past the ramp: 2 + 2 x int(12 / 4)
  // Megatron's update_train_iters: the ramp's 4 steps take 14 samples, then (40 - 14) / 8 whole steps more.
  EXPECT_EQ(ramp->StepsIn(40), 7);
  EXPECT_EQ(ramp->SamplesOf(7), 38);
  EXPECT_EQ(ramp->StepsIn(13), 3);  // 2 + 2 + 4; the fourth step's 6 do not fit
  EXPECT_EQ(ramp->SamplesOf(3), 8);
  EXPECT_EQ(ramp->StepsIn(1), 0);
  const BatchRamp constant(8);
  EXPECT_FALSE(constant.ramps());
  EXPECT_EQ(constant.StepsIn(40), 5);
  EXPECT_EQ(constant.SamplesOf(5), 40);
  EXPECT_EQ(constant.At(123), 8);
}

// Megatron divides in doubles: 9 samples over 7 increments, and at 9 consumed 9 / (9 / 7.0) is 6.999..., so its
// batch is 1 + 6, where exact arithmetic would say 1 + 7. The increases fall where Megatron's do.
TEST(BatchRampTest, RoundsAsMegatronsDoubles) {
  auto ramp = BatchRamp::Make(1, 1, 9, 8, 1, 1);
  ASSERT_TRUE(ramp.ok());
  EXPECT_EQ(ramp->At(9), 7);
  EXPECT_EQ(ramp->At(10), 8);
}

TEST(BatchRampTest, RefusesWhatMegatronRefuses) {
  using ::testing::HasSubstr;
  auto message = [](int64_t start, int64_t increment, int64_t samples, int64_t global, int64_t micro, int64_t ranks) {
    return std::string(BatchRamp::Make(start, increment, samples, global, micro, ranks).status().message());
  };
  EXPECT_THAT(message(0, 2, 12, 8, 2, 1), HasSubstr("must each be at least 1"));
  EXPECT_THAT(message(10, 2, 12, 8, 2, 1), HasSubstr("--global-batch-size 8 is not the start batch plus a whole"));
  EXPECT_THAT(message(2, 4, 12, 8, 2, 1), HasSubstr("not the start batch plus a whole number of increments"));
  // Every batch of the ramp splits into the ranks' micro-batches: 2 ranks of 2 take 4, 8, 12, not 6.
  EXPECT_THAT(message(2, 2, 12, 8, 2, 2), HasSubstr("its batch of 2 is not a multiple of --micro-batch-size 2 x 2 data-parallel "
                                                         "ranks"));
  EXPECT_THAT(message(4, 2, 12, 8, 2, 2), HasSubstr("its batch of 6 is not a multiple"));
  EXPECT_TRUE(BatchRamp::Make(4, 4, 12, 12, 2, 2).ok());
  EXPECT_THAT(message(1, 1, 1'000'000'000, 8, 1, 1), HasSubstr("more than 100000000 steps"));
  // A start at the whole batch ramps nothing (Megatron divides by zero there).
  auto flat = BatchRamp::Make(8, 2, 12, 8, 2, 1);
  ASSERT_TRUE(flat.ok());
  EXPECT_FALSE(flat->ramps());
  EXPECT_EQ(flat->StepsIn(40), 5);
}

TEST(ClipTest, ScalesOnlyAboveTheLimit) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(GlobalNorm(g), 5.0);
  EXPECT_EQ(ClipByGlobalNorm(g, 5.0, 10.0), 1.0f);
  EXPECT_EQ(g[0], 3.0f);
  ClipByGlobalNorm(g, 5.0, 1.0);
  EXPECT_NEAR(GlobalNorm(g), 1.0, 1e-6);
}

TEST(PresetTest, KnownSizes) {
  // NeMo's GPT-3 5B: 24 x 4096, FFN 16384, 32 heads, seq 2048, vocab 50304, init std 0.01.
  ModelConfig c = *Preset("gpt3-5b");
  EXPECT_EQ(c.n_layer, 24);
  EXPECT_EQ(c.d_model, 4096);
  EXPECT_EQ(c.d_ff, 16384);
  EXPECT_EQ(c.n_head, 32);
  EXPECT_EQ(c.seq_len, 2048);
  EXPECT_EQ(c.vocab, 50304);
  EXPECT_FLOAT_EQ(c.init_std, 0.01f);
  EXPECT_NEAR(ParameterCount(c) / 1e9, 5.0, 0.25);
  EXPECT_NEAR(ParameterCount(*Preset("gpt2-124m")) / 1e6, 124.5, 1.0);  // with the 50304 padding
  EXPECT_NEAR(ParameterCount(*Preset("llama2-7b")) / 1e9, 6.74, 0.01);
  EXPECT_NEAR(ParameterCount(*Preset("llama3-8b")) / 1e9, 8.03, 0.01);
  EXPECT_FALSE(Preset("gpt5").ok());
  ModelConfig bad = c;
  bad.n_head = 7;
  EXPECT_NE(Validate(bad).message().find("not a multiple of n_head"), std::string::npos);
}

// `c`, which is `plain` with the setting `key` changed (a switch turned on, unless `difference` says otherwise), reads
// back from a checkpoint header as itself, a difference from `plain` names the key, and a header written before the
// key existed reads as `plain`.
void ExpectKeptInHeader(const ModelConfig& c, const ModelConfig& plain, const std::string& key,
                        const std::string& difference = "is true in the checkpoint and false here") {
  auto back = FromJson(ToJson(c), "header");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(DescribeDifference(c, plain), key + " " + difference);
  common::Json old = ToJson(plain);
  old.erase(key);
  back = FromJson(old, "header");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, plain);
}

// Megatron's --add-qkv-bias (Qwen2's attention): a Llama whose layers hold one more tensor, qkv's bias, and no other.
TEST(QkvBiasTest, OneBiasPerLayerKeptInTheCheckpointsConfig) {
  ModelConfig c = *Preset("llama-tiny");
  const int64_t without = ParamLayout(c).numel();
  c.qkv_bias = true;
  const ParamLayout layout(c);
  std::vector<std::string> biases;
  for (const TensorSpec& spec : layout.tensors()) {
    if (spec.name.ends_with(".bias")) biases.push_back(spec.name);
  }
  EXPECT_THAT(biases, ::testing::ElementsAre("layers.0.qkv.bias", "layers.1.qkv.bias"));
  const TensorSpec& bias = *layout.Find("layers.1.qkv.bias");
  EXPECT_EQ(bias.shape, std::vector<int64_t>{c.qkv_dim()});
  EXPECT_FALSE(bias.decay);
  EXPECT_EQ(layout.numel(), without + c.n_layer * c.qkv_dim());
  EXPECT_EQ(ParameterCount(c), layout.numel());
  // The layer's backward finishes its qkv tensors together.
  const ParamRange qkv = layout.LayerPart(1, "qkv.");
  EXPECT_EQ(qkv.offset + qkv.count, bias.offset + bias.numel);

  ExpectKeptInHeader(c, *Preset("llama-tiny"), "qkv_bias");

  ModelConfig gpt = *Preset("gpt-tiny");
  gpt.qkv_bias = true;
  EXPECT_THAT(Validate(gpt).message(), ::testing::HasSubstr("qkv_bias (--add-qkv-bias) is for a Llama model"));
}

// Megatron's add_bias_linear for a Llama (its flags without --disable-bias-linear): a bias on each linear layer,
// q, k and v's, the attention's output projection's, and the FFN's two (gate and up's in one), without weight decay.
TEST(LinearBiasTest, EveryLinearLayersBiasKeptInTheCheckpointsConfig) {
  const ModelConfig plain = *Preset("llama-tiny");
  ModelConfig c = plain;
  c.linear_bias = true;
  const ParamLayout layout(c);
  std::vector<std::string> biases;
  for (const TensorSpec& spec : layout.tensors()) {
    if (spec.name.starts_with("layers.1.") && spec.name.ends_with(".bias")) biases.push_back(spec.name);
    EXPECT_TRUE(!spec.name.ends_with(".bias") || !spec.decay) << spec.name;
  }
  EXPECT_THAT(biases, ::testing::ElementsAre("layers.1.qkv.bias", "layers.1.proj.bias", "layers.1.fc.bias",
                                             "layers.1.out.bias"));
  EXPECT_EQ(layout.Find("layers.1.fc.bias")->shape, std::vector<int64_t>{2 * c.d_ff});
  EXPECT_EQ(layout.numel(), ParamLayout(plain).numel() + c.n_layer * (c.qkv_dim() + 2 * c.d_model + 2 * c.d_ff));
  EXPECT_EQ(ParameterCount(c), layout.numel());
  EXPECT_EQ(ModelKind(c), "llama with biases");
  ExpectKeptInHeader(c, plain, "add_bias_linear");
  // A GPT has every bias unless no_linear_bias, which its header says (GptWithoutBiasesTest).
  const ModelConfig gpt = *Preset("gpt-tiny");
  EXPECT_EQ(ToJson(gpt)["add_bias_linear"], true);
  ModelConfig gpt_flag = gpt;
  gpt_flag.linear_bias = true;
  EXPECT_EQ(Validate(gpt_flag).message(), "add_bias_linear is for a Llama model: GPT's layers have every bias");
  ModelConfig both = c;
  both.qkv_bias = true;
  EXPECT_THAT(Validate(both).message(), ::testing::HasSubstr("qkv_bias (--add-qkv-bias) beside add_bias_linear"));
}

// Megatron's --squared-relu: a GPT's FFN activation, no parameter of its own, kept in the checkpoint's config.
TEST(SquaredReluTest, KeptInTheCheckpointsConfigForAGptOnly) {
  ModelConfig c = *Preset("gpt-tiny");
  c.squared_relu = true;
  EXPECT_FALSE(c.gelu());
  EXPECT_EQ(ParamLayout(c).numel(), ParamLayout(*Preset("gpt-tiny")).numel());
  ExpectKeptInHeader(c, *Preset("gpt-tiny"), "squared_relu");

  ModelConfig llama = *Preset("llama-tiny");
  llama.squared_relu = true;
  EXPECT_THAT(Validate(llama).message(), ::testing::HasSubstr("squared_relu (--squared-relu) is for a GPT model"));
}

// Megatron's --no-bias-gelu-fusion: a GPT's GELU exact (erf's), no parameter more, after the GEMM rather than in its
// epilogue (gelu() is the tanh form's); kept in the checkpoint's config; a Llama's and squared ReLU's refused.
TEST(ExactGeluTest, KeptInTheCheckpointsConfigForAGptWithGeluOnly) {
  const ModelConfig gpt = *Preset("gpt-tiny");
  ModelConfig c = gpt;
  c.exact_gelu = true;
  EXPECT_FALSE(c.gelu());
  EXPECT_EQ(ModelKind(c), "gpt with exact GELU");
  EXPECT_EQ(ParamLayout(c).numel(), ParamLayout(gpt).numel());
  ExpectKeptInHeader(c, gpt, "exact_gelu");
  c.squared_relu = true;
  EXPECT_EQ(Validate(c).message(), "exact_gelu (--no-bias-gelu-fusion) and squared_relu (--squared-relu) are two "
                                   "activations of a GPT's FFN: give one");
  ModelConfig llama = *Preset("llama-tiny");
  llama.exact_gelu = true;
  EXPECT_EQ(Validate(llama).message(),
            "exact_gelu (--no-bias-gelu-fusion) is for a GPT model: a Llama's FFN is gated");
}

// Megatron's flags apart from the architecture, as Nemotron's GPT has them: RoPE in place of the position table
// (other_positions; the RoPE settings then apply), no biases on the linear layers (no_linear_bias; LayerNorm's stay,
// and --add-qkv-bias puts q's, k's and v's back), grouped-query attention. Each is kept in the checkpoint's config,
// reads as a GPT's own from a header written before, and counts as the layout holds it.
TEST(GptWithoutBiasesTest, RopeNoBiasesAndGroupedQueryAttentionForAGpt) {
  const ModelConfig gpt = *Preset("gpt-tiny");
  ModelConfig rope = gpt;
  rope.other_positions = true;
  rope.rotary_percent = 0.5;
  EXPECT_TRUE(rope.rope_turns());
  EXPECT_FALSE(rope.learned_positions());
  EXPECT_EQ(ParamLayout(rope).Find("wpe"), nullptr);
  EXPECT_EQ(ParameterCount(rope), ParamLayout(rope).numel());
  EXPECT_EQ(ModelKind(rope), "gpt with RoPE");
  ModelConfig just_rope = gpt;
  just_rope.other_positions = true;
  ExpectKeptInHeader(just_rope, gpt, "position_embedding_type", "is \"rope\" in the checkpoint and "
                                                                 "\"learned_absolute\" here");
  auto back = FromJson(ToJson(rope), "header");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, rope);

  ModelConfig bare = gpt;
  bare.no_linear_bias = true;
  const ParamLayout layout(bare);
  for (const TensorSpec& spec : layout.tensors()) {
    const bool norm_bias = spec.name.find("norm") != std::string::npos;
    EXPECT_TRUE(!spec.name.ends_with(".bias") || norm_bias) << spec.name;
  }
  EXPECT_EQ(ParameterCount(bare), layout.numel());
  EXPECT_EQ(ModelKind(bare), "gpt without biases");
  ExpectKeptInHeader(bare, gpt, "add_bias_linear", "is false in the checkpoint and true here");
  ModelConfig qkv = bare;
  qkv.qkv_bias = true;
  EXPECT_NE(ParamLayout(qkv).Find("layers.0.qkv.bias"), nullptr);
  EXPECT_EQ(ParamLayout(qkv).Find("layers.0.proj.bias"), nullptr);
  EXPECT_EQ(ParameterCount(qkv), ParamLayout(qkv).numel());
  ModelConfig biased_qkv = gpt;
  biased_qkv.qkv_bias = true;
  EXPECT_EQ(Validate(biased_qkv).message(), "qkv_bias (--add-qkv-bias) is for a Llama model, or a GPT without biases "
                                            "(--disable-bias-linear): GPT's layers have every bias");

  ModelConfig gqa = gpt;
  gqa.n_kv_head = 2;
  EXPECT_TRUE(Validate(gqa).ok()) << Validate(gqa).message();
  EXPECT_EQ(ParameterCount(gqa), ParamLayout(gqa).numel());
  EXPECT_LT(ParamLayout(gqa).numel(), ParamLayout(gpt).numel());

  ModelConfig llama = *Preset("llama-tiny");
  llama.no_linear_bias = true;
  EXPECT_EQ(Validate(llama).message(), "no_linear_bias (--disable-bias-linear) is for a GPT model: a Llama's layers "
                                       "have no bias unless add_bias_linear");
}

// A Llama whose positions are a learned table (its gated FFN without --position-embedding-type rope, Megatron's
// default): the table in its layout, no RoPE, RoPE's settings refused naming the table; kept in the checkpoint's
// config; with no positions as well, refused.
TEST(LearnedPositionsTest, ALlamaWithALearnedTable) {
  const ModelConfig llama = *Preset("llama-tiny");
  ModelConfig learned = llama;
  learned.other_positions = true;
  EXPECT_TRUE(learned.learned_positions());
  EXPECT_FALSE(learned.rope_turns());
  const ParamLayout layout(learned);
  const TensorSpec* wpe = layout.Find("wpe");
  ASSERT_NE(wpe, nullptr);
  EXPECT_EQ(wpe->shape, (std::vector<int64_t>{llama.seq_len, llama.d_model}));
  EXPECT_EQ(ParameterCount(learned), layout.numel());
  EXPECT_EQ(ModelKind(learned), "llama with learned positions");
  ExpectKeptInHeader(learned, llama, "position_embedding_type", "is \"learned_absolute\" in the checkpoint and "
                                                                "\"rope\" here");
  ModelConfig partial = learned;
  partial.rotary_percent = 0.5;
  EXPECT_EQ(Validate(partial).message(), "RoPE over part of each head (--rotary-percent) needs RoPE, which a Llama's "
                                         "learned positions (--position-embedding-type learned_absolute) are not");
  ModelConfig none = learned;
  none.no_positions = true;
  EXPECT_EQ(Validate(none).message(), "other_positions (--position-embedding-type learned_absolute) and no positions "
                                      "(--position-embedding-type none): give one");
}

// Megatron's --qk-layernorm (Qwen3's q_norm and k_norm): two norms of head_dim values per layer (with biases for
// GPT's LayerNorm), between qkv and proj in the layout, which is the order the backward finishes them in, each part
// ending where the next begins; initialised as the other norms; kept in the checkpoint's config.
TEST(QkNormTest, TwoNormsPerLayerBetweenQkvAndProj) {
  for (const char* preset : {"llama-tiny", "gpt-tiny"}) {
    SCOPED_TRACE(preset);
    ModelConfig c = *Preset(preset);
    const int64_t without = ParamLayout(c).numel();
    c.qk_norm = true;
    const bool gpt = c.arch == Arch::kGpt;
    const ParamLayout layout(c);
    std::vector<std::string> layer;
    for (const TensorSpec& spec : layout.tensors()) {
      if (spec.name.starts_with("layers.1.")) layer.push_back(spec.name.substr(std::string_view("layers.1.").size()));
    }
    if (gpt) {
      EXPECT_THAT(layer, ::testing::ElementsAre("norm1.weight", "norm1.bias", "qkv.weight", "qkv.bias", "q_norm.weight",
                                                "q_norm.bias", "k_norm.weight", "k_norm.bias", "proj.weight",
                                                "proj.bias", "norm2.weight", "norm2.bias", "fc.weight", "fc.bias",
                                                "out.weight", "out.bias"));
    } else {
      EXPECT_THAT(layer, ::testing::ElementsAre("norm1.weight", "qkv.weight", "q_norm.weight", "k_norm.weight",
                                                "proj.weight", "norm2.weight", "fc.weight", "out.weight"));
    }
    const TensorSpec& weight = *layout.Find("layers.1.k_norm.weight");
    EXPECT_EQ(weight.shape, std::vector<int64_t>{c.head_dim()});
    EXPECT_FALSE(weight.decay);
    EXPECT_EQ(layout.numel(), without + c.n_layer * (gpt ? 4 : 2) * c.head_dim());
    EXPECT_EQ(ParameterCount(c), layout.numel());
    const ParamRange qkv = layout.LayerPart(1, "qkv."), q = layout.LayerPart(1, "q_norm.");
    const ParamRange k = layout.LayerPart(1, "k_norm."), proj = layout.LayerPart(1, "proj.");
    EXPECT_EQ(qkv.offset + qkv.count, q.offset);
    EXPECT_EQ(q.offset + q.count, k.offset);
    EXPECT_EQ(k.offset + k.count, proj.offset);
    std::vector<float> params(static_cast<size_t>(layout.numel()));
    Rng rng(1);
    InitParams(c, layout, rng, params);
    EXPECT_EQ(params[static_cast<size_t>(weight.offset)], 1.0f);
    if (gpt) {
      EXPECT_EQ(params[static_cast<size_t>(layout.Find("layers.1.q_norm.bias")->offset)], 0.0f);
    }

    ExpectKeptInHeader(c, *Preset(preset), "qk_layernorm");
  }
}

// The initial parameters as Megatron draws them: each weight matrix N(0, init_std), the layers' two output
// projections N(0, init_std / sqrt(2 layers)); with --init-method-xavier-uniform every matrix, embeddings and output
// projections too, U(-a, a) with a = sqrt(6 / (rows + columns)) of its whole [out, in] shape (the fused qkv and
// SwiGLU's fused gate and up); norms 1 and biases 0 either way. Each matrix's spread is checked against its own
// (thousands of draws: the sample variance within 6% of the law's, the bound reached within 5%).
TEST(InitTest, WeightMatricesAreDrawnAsMegatronDraws) {
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(preset);
    const ModelConfig c = *Preset(preset);
    const ParamLayout layout(c);
    std::vector<float> normal(static_cast<size_t>(layout.numel())), xavier(normal.size());
    Rng normal_rng(7), xavier_rng(7);
    InitParams(c, layout, normal_rng, normal);
    InitParams(c, layout, xavier_rng, xavier, InitMethod::kXavierUniform);
    int matrices = 0;
    for (const TensorSpec& spec : layout.tensors()) {
      SCOPED_TRACE(spec.name);
      const std::span<const float> n(normal.data() + spec.offset, static_cast<size_t>(spec.numel));
      const std::span<const float> x(xavier.data() + spec.offset, static_cast<size_t>(spec.numel));
      if (spec.shape.size() == 1) {  // norms' weights and biases: the same either way
        EXPECT_TRUE(std::equal(n.begin(), n.end(), x.begin()));
        EXPECT_EQ(n[0], IsNormWeight(spec.name) ? 1.0f : 0.0f);
        continue;
      }
      ++matrices;
      auto variance = [](std::span<const float> v) {
        double sum = 0;
        for (float value : v) sum += double{value} * value;
        return sum / static_cast<double>(v.size());
      };
      const bool output = spec.name.ends_with(".proj.weight") || spec.name.ends_with(".out.weight");
      const double sigma = c.init_std / (output ? std::sqrt(2.0 * c.n_layer) : 1.0);
      EXPECT_NEAR(variance(n) / (sigma * sigma), 1.0, 0.06);
      const double a = std::sqrt(6.0 / static_cast<double>(spec.shape[0] + spec.shape[1]));
      EXPECT_NEAR(variance(x) / (a * a / 3), 1.0, 0.06);
      const auto [low, high] = std::minmax_element(x.begin(), x.end());
      EXPECT_GE(*low, -a);
      EXPECT_LT(*high, a);
      EXPECT_LT(*low, -0.95 * a);
      EXPECT_GT(*high, 0.95 * a);
    }
    EXPECT_EQ(matrices, c.tied_embeddings() ? 1 + 1 + 4 * c.n_layer : 2 + 4 * c.n_layer);
  }
}

// --embedding-init-method-std: the embedding tables ~ N(0, std) with either method; with the normal method every
// other tensor is drawn as without it (the same draws in the same order).
TEST(InitTest, EmbeddingTablesTakeTheirOwnStd) {
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(preset);
    const ModelConfig c = *Preset(preset);
    const ParamLayout layout(c);
    for (const InitMethod method : {InitMethod::kNormal, InitMethod::kXavierUniform}) {
      std::vector<float> plain(static_cast<size_t>(layout.numel())), spiky(plain.size());
      Rng plain_rng(3), spiky_rng(3);
      InitParams(c, layout, plain_rng, plain, method);
      InitParams(c, layout, spiky_rng, spiky, method, 1.0);
      int tables = 0;
      for (const TensorSpec& spec : layout.tensors()) {
        SCOPED_TRACE(spec.name);
        const std::span<const float> p(plain.data() + spec.offset, static_cast<size_t>(spec.numel));
        const std::span<const float> s(spiky.data() + spec.offset, static_cast<size_t>(spec.numel));
        if (spec.name == "wte" || spec.name == "wpe") {
          ++tables;
          double sum = 0;
          for (float value : s) sum += double{value} * value;
          EXPECT_NEAR(sum / static_cast<double>(s.size()), 1.0, 0.06);
        } else if (method == InitMethod::kNormal) {
          EXPECT_TRUE(std::equal(p.begin(), p.end(), s.begin()));
        }
      }
      EXPECT_EQ(tables, c.arch == Arch::kGpt ? 2 : 1);
    }
  }
}

// Megatron's --kv-channels (Hugging Face's head_dim): heads of another width than d_model / n_head make q, k and v
// and the projection's input that many times the heads; told the derived width, the model is the plain one.
TEST(KvChannelsTest, HeadsOfAnotherWidthShapeTheAttention) {
  for (const char* preset : {"llama-tiny", "gpt-tiny"}) {
    SCOPED_TRACE(preset);
    const ModelConfig plain = *Preset(preset);
    ModelConfig same = plain;
    SetHeadDim(same, plain.d_model / plain.n_head);
    EXPECT_EQ(same, plain);
    ModelConfig c = plain;
    SetHeadDim(c, 32);
    ASSERT_TRUE(Validate(c).ok()) << Validate(c).message();
    EXPECT_EQ(c.head_dim(), 32);
    EXPECT_EQ(c.q_dim(), c.n_head * 32);
    const ParamLayout layout(c);
    EXPECT_EQ(layout.Find("layers.0.qkv.weight")->shape,
              (std::vector<int64_t>{(c.n_head + 2 * c.n_kv_head) * 32, c.d_model}));
    EXPECT_EQ(layout.Find("layers.0.proj.weight")->shape, (std::vector<int64_t>{c.d_model, c.n_head * 32}));
    EXPECT_EQ(ParameterCount(c), layout.numel());
    ExpectKeptInHeader(c, plain, "kv_channels", "is 32 in the checkpoint and 0 here");
  }
  ModelConfig negative = *Preset("llama-tiny");
  negative.kv_channels = -4;
  EXPECT_THAT(Validate(negative).message(), ::testing::HasSubstr("kv_channels (--kv-channels) must be positive"));
  ModelConfig wide = *Preset("llama-tiny");
  SetHeadDim(wide, 1 << 16);
  EXPECT_THAT(Validate(wide).message(), ::testing::HasSubstr("is larger than srunway supports"));
}

// Megatron's --normalization apart from the architecture: a Llama with LayerNorms has their biases (the two norms',
// the final norm's, q's and k's with --qk-layernorm) and still none of GPT's other biases; a GPT with RMSNorms has no
// norm biases and keeps its others. Told its own norms, a model is the plain one; the header keeps the norms, and
// one without them (written before 2026-12-06's change) reads as the architecture's own.
TEST(NormalizationTest, TheOtherArchitecturesNormsBringTheirBiasesOrDropThem) {
  auto biases = [](const ModelConfig& c) {
    std::vector<std::string> names;
    const ParamLayout layout(c);
    for (const TensorSpec& spec : layout.tensors()) {
      if (spec.name.ends_with(".bias") && !spec.name.starts_with("layers.1.")) names.push_back(spec.name);
    }
    return names;
  };
  ModelConfig llama = *Preset("llama-tiny");
  llama.qk_norm = true;
  ModelConfig same = llama;
  SetNorm(same, Norm::kRmsNorm);
  EXPECT_EQ(same, llama);
  ModelConfig c = llama;
  SetNorm(c, Norm::kLayerNorm);
  EXPECT_TRUE(c.layernorm());
  EXPECT_EQ(ModelKind(c), "llama with LayerNorm");
  EXPECT_THAT(biases(c), ::testing::ElementsAre("layers.0.norm1.bias", "layers.0.q_norm.bias", "layers.0.k_norm.bias",
                                                "layers.0.norm2.bias", "norm_f.bias"));
  EXPECT_EQ(ParameterCount(c), ParamLayout(c).numel());
  EXPECT_EQ(ParamLayout(c).numel(),
            ParamLayout(llama).numel() + c.n_layer * (2 * c.d_model + 2 * c.head_dim()) + c.d_model);
  ExpectKeptInHeader(c, llama, "normalization", "is \"LayerNorm\" in the checkpoint and \"RMSNorm\" here");

  const ModelConfig plain_gpt = *Preset("gpt-tiny");
  ModelConfig gpt = plain_gpt;
  SetNorm(gpt, Norm::kRmsNorm);
  EXPECT_EQ(ModelKind(gpt), "gpt with RMSNorm");
  EXPECT_THAT(biases(gpt), ::testing::ElementsAre("layers.0.qkv.bias", "layers.0.proj.bias", "layers.0.fc.bias",
                                                  "layers.0.out.bias"));
  EXPECT_EQ(ParameterCount(gpt), ParamLayout(gpt).numel());
  ExpectKeptInHeader(gpt, plain_gpt, "normalization", "is \"RMSNorm\" in the checkpoint and \"LayerNorm\" here");

  common::Json unknown = ToJson(gpt);
  unknown["normalization"] = "ScaleNorm";
  EXPECT_THAT(FromJson(unknown, "header").status().message(),
              ::testing::HasSubstr("header: unknown normalization 'ScaleNorm' (LayerNorm or RMSNorm)"));
}

// Megatron's --position-embedding-type none (NoPE): a GPT without its position table (and its FLOPs unchanged, the
// table only looked up), a Llama without RoPE (the same tensors); kept in the checkpoint's config; RoPE's settings
// and a header naming the other architecture's positions refused.
TEST(NoPositionsTest, NeitherTheTableNorRopeKeptInTheCheckpointsConfig) {
  const ModelConfig plain_gpt = *Preset("gpt-tiny");
  ModelConfig gpt = plain_gpt;
  gpt.no_positions = true;
  const ParamLayout layout(gpt);
  EXPECT_EQ(layout.Find("wpe"), nullptr);
  EXPECT_EQ(layout.numel(), ParamLayout(plain_gpt).numel() - int64_t{gpt.seq_len} * gpt.d_model);
  EXPECT_EQ(ParameterCount(gpt), layout.numel());
  EXPECT_EQ(layout.Embeddings().count, layout.Find("wte")->numel);
  EXPECT_EQ(TrainingFlopsPerToken(gpt, 128), TrainingFlopsPerToken(plain_gpt, 128));
  EXPECT_EQ(ModelKind(gpt), "gpt without positions");
  ExpectKeptInHeader(gpt, plain_gpt, "position_embedding_type",
                     "is \"none\" in the checkpoint and \"learned_absolute\" here");

  const ModelConfig plain_llama = *Preset("llama-tiny");
  ModelConfig llama = plain_llama;
  llama.no_positions = true;
  EXPECT_EQ(ParamLayout(llama).numel(), ParamLayout(plain_llama).numel());
  EXPECT_EQ(ParameterCount(llama), ParamLayout(llama).numel());
  EXPECT_EQ(TrainingFlopsPerToken(llama, 128), TrainingFlopsPerToken(plain_llama, 128));
  ExpectKeptInHeader(llama, plain_llama, "position_embedding_type", "is \"none\" in the checkpoint and \"rope\" here");
  ModelConfig layernorm = llama;
  SetNorm(layernorm, Norm::kLayerNorm);
  EXPECT_EQ(ModelKind(layernorm), "llama with LayerNorm, without positions");

  // RoPE turns pairs; without it a head may be of any width.
  ModelConfig odd = llama;
  SetHeadDim(odd, 15);
  EXPECT_TRUE(Validate(odd).ok()) << Validate(odd).message();
  odd.no_positions = false;
  EXPECT_THAT(Validate(odd).message(), ::testing::HasSubstr("RoPE needs an even head dimension, got 15"));
  auto refused = [&](auto set, const std::string& what) {
    ModelConfig c = llama;
    set(c);
    EXPECT_EQ(Validate(c).message(), what + " needs RoPE, which a model without positions "
                                           "(--position-embedding-type none) has not");
  };
  refused([](ModelConfig& c) { c.rotary_interleaved = true; }, "interleaved RoPE (--rotary-interleaved)");
  refused([](ModelConfig& c) { c.rotary_percent = 0.5; }, "RoPE over part of each head (--rotary-percent)");
  refused([](ModelConfig& c) { c.rope_linear_factor = 2; },
          "linear RoPE scaling (--rotary-seq-len-interpolation-factor)");
  refused([](ModelConfig& c) { c.rope_scaling_factor = 8; }, "RoPE scaling (--use-rope-scaling)");

  common::Json other = ToJson(plain_llama);
  other["position_embedding_type"] = "alibi";
  EXPECT_EQ(FromJson(other, "header").status().message(),
            "header: position_embedding_type 'alibi' for a llama model ('learned_absolute', 'rope', or 'none')");
}

// Megatron's --no-rope-freq: an integer N skips RoPE in the last of every N layers (0 in none), a list expression of
// Megatron's form names each layer; kept in the checkpoint's config, a Llama's with RoPE only, each error naming the
// flag and what is wrong.
TEST(NoRopeFreqTest, LayersFromAnIntegerOrAListExpressionKeptInTheCheckpointsConfig) {
  auto layers = [](std::string_view text, int n_layer) {
    auto got = NoRopeLayers(text, n_layer);
    EXPECT_TRUE(got.ok()) << got.status().message();
    return got.ok() ? std::vector<int>(got->begin(), got->end()) : std::vector<int>{-1};
  };
  EXPECT_EQ(layers("4", 8), (std::vector<int>{0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(layers("1", 2), (std::vector<int>{1, 1}));
  EXPECT_EQ(layers("0", 8), std::vector<int>{});
  EXPECT_EQ(layers("([0]*3+[1])*2", 8), layers("4", 8));
  EXPECT_EQ(layers("[1]+[0]*2*3+[1]", 8), (std::vector<int>{1, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(layers("[0,1]*(1+1)*2", 8), (std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(layers("2*[1,0]", 4), (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(layers("[0]*8", 8), std::vector<int>{});  // none skipped reads as no list
  // An empty list, repeated, is empty.
  EXPECT_EQ(layers("[]*1073741824*1073741824+[0,1]", 2), (std::vector<int>{0, 1}));
  auto refused = [](std::string_view text, int n_layer) {
    auto got = NoRopeLayers(text, n_layer);
    EXPECT_FALSE(got.ok()) << text;
    return std::string(got.status().message());
  };
  EXPECT_EQ(refused("3", 8), "--no-rope-freq 3: the model's 8 layers are not a multiple of 3 (RoPE is skipped in the "
                             "last layer of every 3)");
  EXPECT_EQ(refused("([0]*3+[1])*3", 8), "--no-rope-freq ([0]*3+[1])*3: a list longer than 8 at character 12");
  EXPECT_EQ(refused("[0,1]*3", 8), "--no-rope-freq [0,1]*3: names 6 layers, and the model has 8");
  EXPECT_EQ(refused("[0,2]", 2), "--no-rope-freq [0,2]: layer 1's entry is 2: 1 skips RoPE in a layer, 0 keeps it");
  EXPECT_EQ(refused("[0]*2+1", 2), "--no-rope-freq [0]*2+1: a number and a list added at character 6");
  EXPECT_EQ(refused("[0]*[1]", 2), "--no-rope-freq [0]*[1]: two lists multiplied at character 4");
  EXPECT_EQ(refused("[[1],[0]]", 2), "--no-rope-freq [[1],[0]]: a list inside a list at character 2");
  EXPECT_EQ(refused("([0,1]", 2), "--no-rope-freq ([0,1]: no ')' at character 7");
  EXPECT_EQ(refused("[0,1", 2), "--no-rope-freq [0,1: no ']' at character 5");
  EXPECT_EQ(refused("[0,1])", 2), "--no-rope-freq [0,1]): ')' where the expression should end at character 6");
  EXPECT_EQ(refused("[0,]", 2), "--no-rope-freq [0,]: no number, list or '(' at character 4");
  EXPECT_EQ(refused("(2)", 2), "--no-rope-freq (2): a number in parentheses, not a list (give the number alone)");
  EXPECT_EQ(refused("4294967296", 2), "--no-rope-freq 4294967296: a number above 1073741824 at character 1");
  EXPECT_EQ(refused("[1]*99999*99999", 2), "--no-rope-freq [1]*99999*99999: a list longer than 2 at character 4");
  // Nesting is bounded: an error, not a deep recursion.
  EXPECT_THAT(refused(std::string(100, '(') + "[1]" + std::string(100, ')'), 1),
              ::testing::HasSubstr(": nesting deeper than 64 at character 66"));
  EXPECT_THAT(refused("[0, 1]", 2), ::testing::StartsWith("--no-rope-freq [0, 1]: give an integer N"));
  EXPECT_THAT(refused("-4", 8), ::testing::StartsWith("--no-rope-freq -4: give an integer N"));

  const ModelConfig plain = *Preset("llama-tiny");
  ModelConfig c = plain;
  c.no_rope = {0, 1};
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).message();
  EXPECT_TRUE(c.rope_turns(0));
  EXPECT_FALSE(c.rope_turns(1));
  EXPECT_EQ(ParamLayout(c).numel(), ParamLayout(plain).numel());
  EXPECT_EQ(ModelKind(c), "llama without RoPE in 1 of 2 layers");
  ExpectKeptInHeader(c, plain, "no_rope_freq", "is [0,1] in the checkpoint and [] here");
  ModelConfig short_list = c;
  short_list.no_rope = {1};
  EXPECT_EQ(Validate(short_list).message(), "no_rope_freq (--no-rope-freq) names 1 layers, and the model has 2");
  ModelConfig gpt = *Preset("gpt-tiny");
  gpt.no_rope = {0, 1};
  EXPECT_EQ(Validate(gpt).message(), "RoPE skipped in some layers (--no-rope-freq) needs RoPE, which GPT's learned "
                                     "positions are not: a Llama model, or a GPT with --position-embedding-type rope");
  common::Json bad = ToJson(c);
  bad["no_rope_freq"] = {0, 2};
  EXPECT_EQ(FromJson(bad, "header").status().message(), "header: no_rope_freq holds 2, not 0 or 1");
  bad["no_rope_freq"] = "4";
  EXPECT_EQ(FromJson(bad, "header").status().message(), "header: no_rope_freq is not a list");
}

// Megatron's --window-size L,0 and --window-attn-skip-freq: the window's left side (-1, none), and the layers that
// attend through it (an integer N: all but every Nth; a list expression: 1 where one does); kept in the checkpoint's
// config; the attention FLOPs count the keys each query sees.
TEST(WindowTest, SizeAndLayersKeptInTheCheckpointsConfig) {
  EXPECT_EQ(*WindowSize("4096,0"), 4096);
  EXPECT_EQ(*WindowSize("(128,0)"), 128);
  EXPECT_EQ(*WindowSize(" 0 , 0 "), 0);
  EXPECT_EQ(*WindowSize("-1,0"), -1);
  EXPECT_EQ(*WindowSize("-1,-1"), -1);
  EXPECT_EQ(WindowSize("4,1").status().message(), "--window-size 4,1: srunway-train's attention is causal, so a window "
                                                  "reaches no key after its query: give L,0");
  for (const char* bad : {"4", "4,", ",0", "a,0", "4,0,0", "4.5,0", ""}) {
    EXPECT_THAT(WindowSize(bad).status().message(), ::testing::EndsWith(": give L,0: each query attends to itself "
                                                                        "and the L keys before it (-1,0: to every "
                                                                        "key before)")) << bad;
  }
  EXPECT_EQ(WindowSize("-2,0").status().message(), "--window-size -2,0: the window's left side must be -1 (no window) "
                                                   "to 16777216");

  auto layers = [](std::string_view text, int n_layer) {
    auto got = WindowLayers(text, n_layer);
    EXPECT_TRUE(got.ok()) << got.status().message();
    return got.ok() ? std::vector<int>(got->begin(), got->end()) : std::vector<int>{-1};
  };
  EXPECT_EQ(layers("4", 8), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(layers("3", 4), (std::vector<int>{1, 1, 0, 1}));  // as Megatron's: N need not divide the layers
  EXPECT_EQ(layers("[1,1,1,0]*2", 8), layers("4", 8));
  EXPECT_EQ(layers("[1]*4", 4), std::vector<int>{});  // every layer through the window reads as no list
  EXPECT_EQ(layers("9", 4), std::vector<int>{});
  EXPECT_EQ(WindowLayers("0", 4).status().message(), "--window-attn-skip-freq 0: give N of 1 or more (every Nth "
                                                      "layer attends to every key before, the others through the "
                                                      "window)");
  EXPECT_EQ(WindowLayers("[1,2]", 2).status().message(),
            "--window-attn-skip-freq [1,2]: layer 1's entry is 2: 1 attends through the window (--window-size), 0 to "
            "every key before");
  EXPECT_EQ(WindowLayers("[1]*3", 2).status().message(),
            "--window-attn-skip-freq [1]*3: a list longer than 2 at character 4");

  const ModelConfig plain = *Preset("gpt-tiny");
  ModelConfig c = plain;
  c.window = 5;
  EXPECT_TRUE(c.windowed(0) && c.windowed(1));
  EXPECT_EQ(ModelKind(c), "gpt with a window of 5 keys back");
  ExpectKeptInHeader(c, plain, "window_size", "is [5,0] in the checkpoint and null here");
  c.window_layers = {1, 0};
  EXPECT_TRUE(c.windowed(0));
  EXPECT_FALSE(c.windowed(1));
  EXPECT_EQ(ModelKind(c), "gpt with a window of 5 keys back in 1 of 2 layers");
  ModelConfig windowed = plain;
  windowed.window = 5;
  ExpectKeptInHeader(c, windowed, "window_attn_skip_freq", "is [1,0] in the checkpoint and [] here");
  // A query of the windowed layer sees 6 keys of 128, of the other all 128.
  const double attention = 12.0 * c.q_dim();
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(plain, 128) - TrainingFlopsPerToken(c, 128), attention * (128 - 6));
  EXPECT_DOUBLE_EQ(TrainingFlopsPerToken(c, 4), TrainingFlopsPerToken(plain, 4));

  ModelConfig orphan = plain;
  orphan.window_layers = {1, 0};
  EXPECT_EQ(Validate(orphan).message(), "window_attn_skip_freq (--window-attn-skip-freq) chooses the layers that "
                                        "attend through the window, and there is none (--window-size)");
  ModelConfig short_list = c;
  short_list.window_layers = {1};
  EXPECT_EQ(Validate(short_list).message(),
            "window_attn_skip_freq (--window-attn-skip-freq) names 1 layers, and the model has 2");
  common::Json bad = ToJson(c);
  bad["window_size"] = {5, 1};
  EXPECT_EQ(FromJson(bad, "header").status().message(),
            "header: window_size is [5,1], not [L, 0] with L from 0 to 16777216");
}

// Megatron's --softmax-type: off-by-one adds no parameter; learnable one per head in each layer, "softmax_offset",
// between the attention's input tensors and its projection (the backward finishes it after proj), without weight
// decay and drawn N(0, init_std); both kept in the checkpoint's config, which older checkpoints lack (vanilla).
TEST(SoftmaxTest, SinksKeptInTheCheckpointsConfigAndLearnedOnesInTheLayout) {
  const ModelConfig plain = *Preset("llama-tiny");
  ModelConfig off_by_one = plain;
  off_by_one.softmax = Softmax::kOffByOne;
  EXPECT_EQ(ParamLayout(off_by_one).numel(), ParamLayout(plain).numel());
  EXPECT_EQ(ModelKind(off_by_one), "llama with an off-by-one softmax");
  ExpectKeptInHeader(off_by_one, plain, "softmax_type", "is \"off-by-one\" in the checkpoint and \"vanilla\" here");

  ModelConfig learned = plain;
  learned.softmax = Softmax::kLearnable;
  learned.qk_norm = true;
  const ParamLayout layout(learned);
  std::vector<std::string> names;
  for (const TensorSpec& spec : layout.tensors()) {
    if (spec.name.starts_with("layers.1.")) names.push_back(spec.name.substr(9));
  }
  EXPECT_THAT(names, ::testing::ElementsAre("norm1.weight", "qkv.weight", "q_norm.weight", "k_norm.weight",
                                            "softmax_offset", "proj.weight", "norm2.weight", "fc.weight",
                                            "out.weight"));
  const TensorSpec& sinks = *layout.Find("layers.1.softmax_offset");
  EXPECT_EQ(sinks.shape, std::vector<int64_t>{learned.n_head});
  EXPECT_FALSE(sinks.decay);
  const ParamRange part = layout.LayerPart(1, "softmax_offset");
  EXPECT_EQ(part.offset, sinks.offset);
  EXPECT_EQ(part.count, learned.n_head);
  EXPECT_EQ(ParameterCount(learned), layout.numel());
  ModelConfig qk_norm = plain;
  qk_norm.qk_norm = true;
  EXPECT_EQ(layout.numel(), ParamLayout(qk_norm).numel() + int64_t{learned.n_head} * learned.n_layer);
  // The sinks are in no matrix product.
  EXPECT_EQ(TrainingFlopsPerToken(learned, 128), TrainingFlopsPerToken(qk_norm, 128));
  EXPECT_EQ(ModelKind(learned), "llama with learned attention sinks");

  std::vector<float> params(static_cast<size_t>(layout.numel()));
  Rng rng(7);
  InitParams(learned, layout, rng, params);
  double square_sum = 0;
  int zeros = 0;
  for (int l = 0; l < learned.n_layer; ++l) {
    const TensorSpec& spec = *layout.Find(fmt::format("layers.{}.softmax_offset", l));
    for (int64_t i = 0; i < spec.numel; ++i) {
      const float x = params[static_cast<size_t>(spec.offset + i)];
      square_sum += double{x} * x;
      zeros += x == 0.0f;
      EXPECT_LT(std::fabs(x), 6 * learned.init_std);
    }
  }
  EXPECT_EQ(zeros, 0);
  EXPECT_GT(square_sum, 0);

  ModelConfig learned_plain = plain;
  learned_plain.softmax = Softmax::kLearnable;
  ExpectKeptInHeader(learned_plain, plain, "softmax_type", "is \"learnable\" in the checkpoint and \"vanilla\" here");
  common::Json bad = ToJson(plain);
  bad["softmax_type"] = "off_by_one";
  EXPECT_EQ(FromJson(bad, "header").status().message(),
            "header: unknown softmax_type 'off_by_one' (vanilla, off-by-one or learnable)");
}

// Megatron's --quick-geglu, --glu-linear-offset and --activation-func-clamp-value: a Llama's gated FFN, no parameter
// more, kept in the checkpoint's config (older checkpoints lack them: SwiGLU); a GPT, a clamp that is not positive and
// an offset that is not finite are refused.
TEST(GluTest, QuickGegluOffsetAndClampKeptInTheCheckpointsConfig) {
  const ModelConfig plain = *Preset("llama-tiny");
  ModelConfig quick = plain;
  quick.quick_geglu = true;
  EXPECT_EQ(ParamLayout(quick).numel(), ParamLayout(plain).numel());
  EXPECT_EQ(ModelKind(quick), "llama with quick GEGLU");
  EXPECT_EQ(quick.glu().alpha, kQuickGeluAlpha);
  EXPECT_EQ(plain.glu().alpha, 1.0f);
  ExpectKeptInHeader(quick, plain, "quick_geglu");
  ModelConfig offset = plain;
  offset.glu_linear_offset = 1.0f;
  ExpectKeptInHeader(offset, plain, "glu_linear_offset", "is 1.0 in the checkpoint and 0.0 here");
  ModelConfig clamp = plain;
  clamp.glu_clamp = 7.0f;
  ExpectKeptInHeader(clamp, plain, "activation_func_clamp_value", "is 7.0 in the checkpoint and null here");

  ModelConfig gpt = *Preset("gpt-tiny");
  gpt.glu_clamp = 7.0f;
  EXPECT_EQ(Validate(gpt).message(), "activation_func_clamp_value (--activation-func-clamp-value) is for a Llama "
                                     "model, whose FFN is gated: a GPT's is GELU or squared ReLU");
  ModelConfig negative = plain;
  negative.glu_clamp = -1.0f;
  EXPECT_EQ(Validate(negative).message(), "activation_func_clamp_value (--activation-func-clamp-value) must be "
                                          "positive and finite, got -1");
  ModelConfig infinite = plain;
  infinite.glu_linear_offset = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Validate(infinite).message(), "glu_linear_offset (--glu-linear-offset) must be finite, got inf");
  common::Json bad = ToJson(plain);
  bad["activation_func_clamp_value"] = 0.0;
  EXPECT_EQ(FromJson(bad, "header").status().message(),
            "header: activation_func_clamp_value is 0, not positive (null: none)");
}

// --geglu and --embedding-multiplier (Gemma's): no parameter more, kept in the checkpoint's config (older checkpoints
// lack them: SwiGLU, 1); --geglu beside --quick-geglu or for a GPT, and a multiplier not positive and finite, are
// refused.
TEST(GluTest, GegluAndEmbeddingMultiplierKeptInTheCheckpointsConfig) {
  const ModelConfig plain = *Preset("llama-tiny");
  ModelConfig gemma = plain;
  gemma.geglu = true;
  gemma.embedding_multiplier = 8.0f;
  EXPECT_EQ(ParamLayout(gemma).numel(), ParamLayout(plain).numel());
  EXPECT_EQ(ModelKind(gemma), "llama with GeGLU, with its embedding times 8");
  EXPECT_TRUE(gemma.glu().gelu);
  EXPECT_FALSE(plain.glu().gelu);
  ModelConfig geglu = plain;
  geglu.geglu = true;
  ExpectKeptInHeader(geglu, plain, "geglu");
  ModelConfig scaled = plain;
  scaled.embedding_multiplier = 45.25f;
  ExpectKeptInHeader(scaled, plain, "embedding_multiplier", "is 45.25 in the checkpoint and 1.0 here");

  ModelConfig both = gemma;
  both.quick_geglu = true;
  EXPECT_EQ(Validate(both).message(), "quick_geglu (--quick-geglu) and geglu (--geglu) are two activations of a gated "
                                      "FFN (quick GELU and GELU's tanh approximation): give one");
  ModelConfig gpt = *Preset("gpt-tiny");
  gpt.geglu = true;
  EXPECT_EQ(Validate(gpt).message(), "geglu (--geglu) is for a Llama model, whose FFN is gated: a GPT's is GELU or "
                                     "squared ReLU");
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity()}) {
    ModelConfig multiplier = plain;
    multiplier.embedding_multiplier = bad;
    EXPECT_EQ(Validate(multiplier).message(),
              fmt::format("embedding_multiplier (--embedding-multiplier) must be positive and finite, got {}", bad));
  }
}

// The output layer tied to the token embedding or its own, apart from the architecture (Megatron ties it unless
// --untie-embeddings-and-output-weights): a tied Llama has no lm_head and counts the embedding once, an untied GPT has
// one that decays and takes --decoupled-lr's rate as the embedding does; a matrix product either way, so the FLOPs
// per token stay; kept in the checkpoint's config, read as the architecture's own from a header written before.
TEST(TiedEmbeddingsTest, TheHeadTiedOrItsOwnForEitherArchitectureKeptInTheCheckpointsConfig) {
  const ModelConfig llama = *Preset("llama-tiny");
  ModelConfig tied = llama;
  SetTiedEmbeddings(tied, true);
  EXPECT_TRUE(tied.tied_embeddings());
  EXPECT_EQ(ModelKind(tied), "llama with its output layer tied");
  const ParamLayout tied_layout(tied);
  EXPECT_EQ(tied_layout.Find("lm_head.weight"), nullptr);
  EXPECT_EQ(tied_layout.Head().count, 0);
  EXPECT_EQ(tied_layout.numel(), ParamLayout(llama).numel() - int64_t{llama.vocab} * llama.d_model);
  EXPECT_EQ(ParameterCount(tied), tied_layout.numel());
  EXPECT_EQ(TrainingFlopsPerToken(tied, 128), TrainingFlopsPerToken(llama, 128));
  ExpectKeptInHeader(tied, llama, "untie_embeddings_and_output_weights", "is false in the checkpoint and true here");
  ModelConfig again = tied;
  SetTiedEmbeddings(again, false);
  EXPECT_EQ(again, llama);  // the architecture's own, stored as every entry point stores it

  const ModelConfig gpt = *Preset("gpt-tiny");
  ModelConfig untied = gpt;
  SetTiedEmbeddings(untied, false);
  EXPECT_EQ(ModelKind(untied), "gpt with its own output layer");
  const ParamLayout untied_layout(untied);
  const TensorSpec* head = untied_layout.Find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->shape, (std::vector<int64_t>{gpt.vocab, gpt.d_model}));
  EXPECT_TRUE(head->decay);
  EXPECT_TRUE(head->embedding_or_output);
  EXPECT_EQ(untied_layout.Head().count, head->numel);
  EXPECT_EQ(ParameterCount(untied), untied_layout.numel());
  EXPECT_EQ(untied_layout.numel(), ParamLayout(gpt).numel() + head->numel);
  EXPECT_EQ(TrainingFlopsPerToken(untied, 128), TrainingFlopsPerToken(gpt, 128));
  ExpectKeptInHeader(untied, gpt, "untie_embeddings_and_output_weights");
}

// --finetune into a longer context: the settings of the positions' reach come from the checkpoint's model, and
// nothing else does; a learned position table's length is its parameters' shape, so a GPT's seq_len stays.
TEST(WithPositionsOfTest, TakesTheReachOfThePositionsAndNothingElse) {
  const ModelConfig short_llama = *Preset("llama-tiny");
  ModelConfig long_llama = short_llama;
  long_llama.seq_len = 4 * short_llama.seq_len;
  long_llama.rope_theta = 500000.0f;
  long_llama.yarn = YarnScaling{.factor = 4.0f, .original_positions = short_llama.seq_len};
  EXPECT_EQ(WithPositionsOf(long_llama, short_llama), short_llama);
  EXPECT_EQ(WithPositionsOf(short_llama, long_llama), long_llama);
  ModelConfig deeper = long_llama;
  deeper.n_layer = 3;
  EXPECT_NE(WithPositionsOf(deeper, short_llama), short_llama);
  const ModelConfig short_gpt = *Preset("gpt-tiny");
  ModelConfig long_gpt = short_gpt;
  long_gpt.seq_len = 2 * short_gpt.seq_len;
  EXPECT_NE(WithPositionsOf(long_gpt, short_gpt), short_gpt);  // its table has seq_len rows
  long_gpt.no_positions = true;
  ModelConfig short_nope = short_gpt;
  short_nope.no_positions = true;
  EXPECT_EQ(WithPositionsOf(long_gpt, short_nope), short_nope);
}

// Megatron's --position-embedding-type yarn: RoPE's frequencies blended over YaRN's range of pairs, q and k scaled,
// no parameter more; its numbers kept in the checkpoint's config.
// A header of `plain` written before `key` was (without it) reads back as `plain`.
void ExpectOlderHeaderReads(const ModelConfig& plain, const char* key) {
  common::Json old = ToJson(plain);
  old.erase(key);
  auto back = FromJson(old, "header");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, plain);
}

// `base` changed by `set` is refused by Validate, saying `what`.
void ExpectRefused(const ModelConfig& base, const std::function<void(ModelConfig&)>& set, const std::string& what) {
  ModelConfig bad = base;
  set(bad);
  EXPECT_EQ(Validate(bad).message(), what);
}

TEST(YarnTest, FrequenciesAttentionFactorAndTheCheckpointsConfig) {
  const ModelConfig plain = *Preset("llama-tiny");  // heads of 16: 8 pairs
  ModelConfig c = plain;
  c.yarn = YarnScaling{.factor = 4.0f, .original_positions = 64};
  EXPECT_EQ(ParamLayout(c).numel(), ParamLayout(plain).numel());
  EXPECT_EQ(TrainingFlopsPerToken(c, 128), TrainingFlopsPerToken(plain, 128));
  EXPECT_EQ(ModelKind(c), "llama with YaRN (4x)");
  // The pairs turning 32 times over 64 positions and once: 16 ln(64 / (2 pi r)) / (2 ln 10000), -0.99 and 2.02,
  // rounded outwards to pairs 0 and 3 (and the first to no less than 0).
  const RopeFrequencies rope = c.rope(c.seq_len);
  EXPECT_EQ(rope.yarn_low, 0.0f);
  EXPECT_EQ(rope.yarn_high, 3.0f);
  EXPECT_FLOAT_EQ(rope.attention_factor, 1.0f + 0.1f * std::log(4.0f));
  auto theta_power = [](int i) { return std::pow(10000.0f, -2.0f * i / 16); };
  EXPECT_FLOAT_EQ(RopeInverseFrequency(rope, 0, 16), 1.0f);  // kept
  EXPECT_FLOAT_EQ(RopeInverseFrequency(rope, 1, 16), theta_power(1) * (2.0f / 3 + 1.0f / 3 / 4));
  EXPECT_FLOAT_EQ(RopeInverseFrequency(rope, 3, 16), theta_power(3) / 4);  // interpolated
  EXPECT_FLOAT_EQ(RopeInverseFrequency(rope, 7, 16), theta_power(7) / 4);
  ModelConfig unrounded = c;  // gpt-oss's: the bounds as they fall
  unrounded.yarn->round_to_int = false;
  EXPECT_NEAR(unrounded.rope(unrounded.seq_len).yarn_high, 2.016, 1e-3);
  unrounded.yarn->mscale_all_dim = 1.0f;  // m(1) / m(1): q and k as they are
  EXPECT_EQ(unrounded.rope(unrounded.seq_len).attention_factor, 1.0f);
  EXPECT_EQ(plain.rope(plain.seq_len).yarn_factor, 0.0f);
  EXPECT_EQ(plain.rope(plain.seq_len).attention_factor, 1.0f);

  auto back = FromJson(ToJson(unrounded), "header");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, unrounded);
  EXPECT_EQ(DescribeDifference(c, plain),
            "position_embedding_type is \"yarn\" in the checkpoint and \"rope\" here; yarn is "
            "{\"rotary_scaling_factor\":4.0,\"original_max_position_embeddings\":64,\"beta_fast\":32.0,"
            "\"beta_slow\":1.0,\"mscale\":1.0,\"mscale_all_dim\":0.0,\"correction_range_round_to_int\":true} in the "
            "checkpoint and null here");
  EXPECT_THAT(DescribeDifference(c, unrounded),
              ::testing::EndsWith("in the checkpoint and {\"rotary_scaling_factor\":4.0,"
                                  "\"original_max_position_embeddings\":64,\"beta_fast\":32.0,\"beta_slow\":1.0,"
                                  "\"mscale\":1.0,\"mscale_all_dim\":1.0,\"correction_range_round_to_int\":false} here"));
  ExpectOlderHeaderReads(plain, "yarn");
  common::Json lost = ToJson(c);
  lost["yarn"] = nullptr;
  EXPECT_EQ(FromJson(lost, "header").status().message(),
            "header: position_embedding_type 'yarn' for a llama model ('learned_absolute', 'rope', or 'none')");
  lost = ToJson(c);
  lost["position_embedding_type"] = "rope";
  EXPECT_EQ(FromJson(lost, "header").status().message(),
            "header: position_embedding_type 'rope' for a llama model with yarn (its own 'yarn', or 'none')");
  lost = ToJson(c);
  lost["yarn"].erase("beta_slow");
  EXPECT_THAT(FromJson(lost, "header").status().message(), ::testing::HasSubstr("header: yarn: missing key 'beta_slow'"));

  auto refused = [&](auto set, const std::string& what) { ExpectRefused(c, set, what); };
  refused([](ModelConfig& m) {
            m.arch = Arch::kGpt;
            m.n_kv_head = m.n_head;
          },
          "YaRN (--position-embedding-type yarn) needs RoPE, which GPT's learned positions are not: a Llama model, or "
          "a GPT with --position-embedding-type rope");
  refused([](ModelConfig& m) { m.no_positions = true; },
          "YaRN (--position-embedding-type yarn) needs RoPE, which a model without positions "
          "(--position-embedding-type none) has not");
  refused([](ModelConfig& m) { m.rotary_interleaved = true; },
          "YaRN (--position-embedding-type yarn) is not taken with interleaved RoPE (--rotary-interleaved): "
          "Megatron's YaRN scales RoPE its own way and turns each whole head in two halves");
  refused([](ModelConfig& m) { m.rope_scaling_factor = 8; },
          "YaRN (--position-embedding-type yarn) is not taken with Llama 3.1's RoPE scaling (--use-rope-scaling): "
          "Megatron's YaRN scales RoPE its own way and turns each whole head in two halves");
  refused([](ModelConfig& m) { m.yarn->factor = 0; },
          "YaRN's rotary_scaling_factor (--yarn-rotary-scaling-factor) must be positive and finite, got 0");
  refused([](ModelConfig& m) { m.yarn->beta_fast = 1; },
          "YaRN's beta_fast (--yarn-beta-fast) 1 must be larger than its beta_slow (--yarn-beta-slow) 1");
  refused([](ModelConfig& m) { m.yarn->original_positions = 0; },
          "YaRN's original_max_position_embeddings (--yarn-original-max-position-embeddings) must be positive, got 0");
  refused([](ModelConfig& m) { m.yarn->mscale = -1; },
          "YaRN's mscale (--yarn-mscale) must be 0 or more and finite, got -1");
  refused([](ModelConfig& m) { m.rope_theta = 1; },
          "YaRN (--position-embedding-type yarn) needs a RoPE base (--rotary-base) above 1, each pair turning slower "
          "than the one before, got 1");
}

TEST(LongRopeTest, FactorsByLengthAttentionFactorAndTheCheckpointsConfig) {
  const ModelConfig plain = *Preset("llama-tiny");  // heads of 16
  ModelConfig c = plain;
  c.rotary_percent = 0.5;  // 8 dimensions turned: 4 pairs
  c.longrope = LongRope{.short_factor = {1, 2, 4, 8}, .long_factor = {1, 3, 9, 27}, .original_positions = 64,
                        .attention_factor = 1.25f};
  ASSERT_TRUE(Validate(c).ok()) << Validate(c).message();
  EXPECT_EQ(ParamLayout(c).numel(), ParamLayout(plain).numel());
  EXPECT_EQ(ModelKind(c), "llama with LongRoPE");
  // Up to the original positions the short factors, past them the long ones (transformers' switch on the length).
  auto theta_power = [](int i) { return std::pow(10000.0f, -2.0f * i / 8); };
  const RopeFrequencies short_rope = c.rope(64), long_rope = c.rope(65);
  EXPECT_EQ(short_rope.pair_factors, 4);
  EXPECT_FLOAT_EQ(RopeInverseFrequency(short_rope, 0, 8), 1.0f);
  EXPECT_FLOAT_EQ(RopeInverseFrequency(short_rope, 3, 8), theta_power(3) / 8);
  EXPECT_FLOAT_EQ(RopeInverseFrequency(long_rope, 2, 8), theta_power(2) / 9);
  EXPECT_FLOAT_EQ(RopeInverseFrequency(long_rope, 3, 8), theta_power(3) / 27);
  EXPECT_EQ(long_rope.attention_factor, 1.25f);
  EXPECT_EQ(plain.rope(65).pair_factors, 0);
  EXPECT_EQ(plain.rope(65).attention_factor, 1.0f);

  auto back = FromJson(ToJson(c), "header");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, c);
  EXPECT_EQ(DescribeDifference(c, WithPositionsOf(plain, c)), "rotary_percent is 0.5 in the checkpoint and 1.0 here");
  ExpectOlderHeaderReads(plain, "longrope");
  common::Json lost = ToJson(c);
  lost["longrope"].erase("long_factor");
  EXPECT_THAT(FromJson(lost, "header").status().message(),
              ::testing::HasSubstr("header: longrope: missing key 'long_factor'"));

  auto refused = [&](auto set, const std::string& what) { ExpectRefused(c, set, what); };
  refused(
      [](ModelConfig& m) {
        m.no_positions = true;
        m.rotary_percent = 1;  // whole heads' 8 pairs, lest --rotary-percent be named first
        m.longrope->short_factor.resize(8, 1.0f);
        m.longrope->long_factor.resize(8, 1.0f);
      },
      "LongRoPE (a Hugging Face config's rope_scaling of type longrope) needs RoPE, which a model without "
          "positions (--position-embedding-type none) has not");
  refused([](ModelConfig& m) { m.rope_linear_factor = 2; },
          "LongRoPE (a Hugging Face config's rope_scaling of type longrope) is not taken with linear RoPE scaling "
          "(--rotary-seq-len-interpolation-factor): each scales RoPE its own way");
  refused([](ModelConfig& m) { m.rotary_percent = 1; },
          "LongRoPE's short_factor holds 4 factors, and RoPE turns 8 pairs of each head (at most 128)");
  refused([](ModelConfig& m) { m.longrope->long_factor[1] = 0; },
          "LongRoPE's long_factor must be positive and finite, and holds 0");
  refused([](ModelConfig& m) { m.longrope->original_positions = 0; },
          "LongRoPE's original_max_position_embeddings must be positive, got 0");
  refused([](ModelConfig& m) { m.longrope->attention_factor = INFINITY; },
          "LongRoPE's attention_factor must be positive and finite, got inf");
}

}  // namespace
}  // namespace srunway::trainer
