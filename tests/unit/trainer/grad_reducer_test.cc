// The backward's "gradients are final" ranges and the bucketed reducer that overlaps with it.
#include "trainer/train/grad_reducer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/half.h"
#include "launcher/self_comm.h"
#include "trainer/model/model.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

class ReducerTest : public ::testing::TestWithParam<const char*> {
 protected:
  ReducerTest() : config_(*Preset(GetParam())), model_(config_, 2) {
    Rng rng(7);
    InitParams(config_, model_.layout(), rng, model_.params());
    tokens_.resize(2 * 16);
    for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] = static_cast<int32_t>((i * 37) % config_.vocab);
  }
  std::vector<Bucket> Buckets() const { return MakeBuckets(model_.layout().numel(), 4096, 1); }
  void Step(const Model::GradsReady& ready) {
    model_.ZeroGrad();
    model_.Forward(tokens_.data(), tokens_.data(), 2, 16);
    model_.Backward(1.0f, ready);
  }

  ModelConfig config_;
  Model model_;
  std::vector<int32_t> tokens_;
  std::unique_ptr<launcher::Comm> comm_ = launcher::CreateSelfComm();
};

TEST_P(ReducerTest, TheBackwardReportsEveryRangeOnceFromTheEndDown) {
  std::vector<ParamRange> ranges;
  Step([&](ParamRange r) { ranges.push_back(r); });
  int64_t expected_end = model_.layout().numel();
  for (const ParamRange& r : ranges) {
    EXPECT_EQ(r.offset + r.count, expected_end);
    expected_end = r.offset;
  }
  EXPECT_EQ(expected_end, 0);
  // Head (Llama only), final norm, six parts of each layer, embeddings.
  EXPECT_EQ(ranges.size(), static_cast<size_t>(6 * config_.n_layer + 2 + (config_.tied_embeddings() ? 0 : 1)));
}

TEST_P(ReducerTest, BucketsStartDuringTheBackwardOfTheLastMicroBatchOnly) {
  GradReducer reducer(*comm_, model_.device(), model_.grads(), Buckets(), GradReducer::Mode::kAllReduce, true);
  EXPECT_EQ(reducer.bucket_count(), static_cast<size_t>((model_.layout().numel() + 1023) / 1024));
  Model::GradsReady ready = [&](ParamRange r) { reducer.Ready(r); };
  Step(ready);  // not armed: an accumulation micro-batch
  EXPECT_EQ(reducer.started_early(), 0);
  reducer.Arm();
  Step(ready);
  EXPECT_EQ(reducer.started_early(), static_cast<int>(reducer.bucket_count()));
  EXPECT_TRUE(reducer.Finish().ok());
}

TEST_P(ReducerTest, WithoutOverlapNothingStartsBeforeFinish) {
  GradReducer reducer(*comm_, model_.device(), model_.grads(), Buckets(), GradReducer::Mode::kAllReduce, false);
  reducer.Arm();
  Step([&](ParamRange r) { reducer.Ready(r); });
  EXPECT_EQ(reducer.started_early(), 0);
  EXPECT_TRUE(reducer.Finish().ok());
}

TEST_P(ReducerTest, ARangeOutOfOrderIsAnError) {
  GradReducer reducer(*comm_, model_.device(), model_.grads(), Buckets(), GradReducer::Mode::kAllReduce, true);
  reducer.Arm();
  reducer.Ready({0, 10});  // the embeddings before anything else
  const common::Status status = reducer.Finish();
  EXPECT_EQ(status.code(), common::StatusCode::kInternal);
  EXPECT_NE(status.message().find("out of order"), std::string::npos) << status.message();
}

// ZeRO-1 reduces and gathers buckets of whole slices in place: no copy of the gradients or the parameters (they
// cost 8 bytes per parameter, about what the sharded moments save).
TEST_P(ReducerTest, ReduceScatterOfWholeSlicesTakesNoMemory) {
  const size_t before = model_.device().peak_allocated();
  GradReducer reducer(*comm_, model_.device(), model_.grads(), Buckets(), GradReducer::Mode::kReduceScatter, true);
  EXPECT_EQ(model_.device().peak_allocated(), before);
}

TEST_P(ReducerTest, ReduceScatterOnOneRankLeavesTheGradients) {
  GradReducer reducer(*comm_, model_.device(), model_.grads(), Buckets(), GradReducer::Mode::kReduceScatter, true);
  reducer.Arm();
  Step([&](ParamRange r) { reducer.Ready(r); });
  const std::vector<float> before(model_.grads().begin(), model_.grads().end());
  ASSERT_TRUE(reducer.Finish().ok());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), model_.grads().begin()));
  std::vector<float> params(model_.params().begin(), model_.params().end());
  ASSERT_TRUE(reducer.StartGather(model_.weights()).ok());
  ASSERT_TRUE(reducer.Need(model_.layout().Embeddings()).ok());
  ASSERT_TRUE(reducer.FinishGather().ok());
  EXPECT_TRUE(std::equal(params.begin(), params.end(), model_.params().begin()));
}

// --grad-reduce-in-bf16: the buckets travel in bf16, so that on one rank (whose sum is its own gradients) every
// gradient comes back rounded to bf16 (to nearest even), in either mode; most of a step's gradients are not bf16
// values to begin with. The hundred-odd buckets of 1024 take turns in 4 slots of bf16 (and, for ZeRO-1, of their
// slices): 8 or 16 KiB whatever the model.
TEST_P(ReducerTest, InBf16TheGradientsComeBackRoundedToBf16) {
  Step({});  // the step's gradients unreduced (the CPU's backward gives the same bits every time)
  std::vector<float> rounded(model_.grads().begin(), model_.grads().end());
  size_t changed = 0;
  for (float& g : rounded) {
    const float r = common::BFloat16ToFloat(common::FloatToBFloat16(g));
    changed += r != g;
    g = r;
  }
  EXPECT_GT(changed, rounded.size() / 2);
  for (GradReducer::Mode mode : {GradReducer::Mode::kAllReduce, GradReducer::Mode::kReduceScatter}) {
    SCOPED_TRACE(mode == GradReducer::Mode::kAllReduce ? "all-reduce" : "reduce-scatter");
    const size_t before = model_.device().allocations().bytes;
    GradReducer reducer(*comm_, model_.device(), model_.grads(), Buckets(), mode, true, DType::kFloat32,
                        &model_.ops());
    ASSERT_GT(reducer.bucket_count(), 2 * GradReducer::kBf16Slots);
    EXPECT_EQ(model_.device().allocations().bytes - before,
              GradReducer::kBf16Slots * 1024 * 2 * (mode == GradReducer::Mode::kAllReduce ? 1 : 2));
    reducer.Arm();
    Step([&](ParamRange r) { reducer.Ready(r); });
    ASSERT_TRUE(reducer.Finish().ok());
    EXPECT_TRUE(std::equal(rounded.begin(), rounded.end(), model_.grads().begin()));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReducerTest, ::testing::Values("gpt-tiny", "llama-tiny"));

// ZeRO-1's ownership: every element of every bucket belongs to exactly one rank, in rank order.
TEST(Buckets, SlicesTileEachBucketOverTheRanks) {
  for (int ranks : {1, 2, 3, 4, 7}) {
    const std::vector<Bucket> buckets = MakeBuckets(1001, 64 * sizeof(float), ranks);
    std::vector<int> owner(1001, -1);
    for (int r = 0; r < ranks; ++r) {
      for (const ParamRange& slice : OwnedRanges(buckets, r)) {
        for (int64_t i = slice.offset; i < slice.offset + slice.count; ++i) {
          EXPECT_EQ(owner[static_cast<size_t>(i)], -1) << "element " << i << " owned twice";
          owner[static_cast<size_t>(i)] = r;
        }
      }
    }
    EXPECT_EQ(std::count(owner.begin(), owner.end(), -1), 0) << ranks << " ranks";
    EXPECT_EQ(buckets.front().offset + buckets.front().count, 1001);
    EXPECT_EQ(buckets.back().offset, 0);
    // Whole slices (in place under ZeRO-1) in every bucket but the one at the start of the buffer.
    for (size_t b = 0; b + 1 < buckets.size(); ++b) {
      EXPECT_EQ(buckets[b].count, buckets[b].shard * ranks) << ranks << " ranks, bucket " << b;
    }
  }
}

}  // namespace
}  // namespace srunway::trainer
