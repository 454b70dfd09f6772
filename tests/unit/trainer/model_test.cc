// Model::ZeroGrad and the first backward after it: ZeroGrad zeroes all but the Linear layers' weight matrices,
// whose gradients that backward writes rather than adds, so a step's gradients are the same whatever the buffer
// held before it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/model/model.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

constexpr float kStale = 12345.0f;  // what the gradients held from before

class ZeroGradTest : public ::testing::TestWithParam<const char*> {
 protected:
  ZeroGradTest() : config_(*Preset(GetParam())), model_(config_, 2) {
    Rng rng(11);
    InitParams(config_, model_.layout(), rng, model_.params());
    tokens_.resize(2 * 16);
    for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] = static_cast<int32_t>((i * 29 + 3) % config_.vocab);
  }
  // `micro` forwards and backwards of the same batch, each with loss scale 1 / micro.
  std::vector<float> Backwards(int micro) {
    for (int m = 0; m < micro; ++m) {
      model_.Forward(tokens_.data(), tokens_.data() + 1, 2, 15);
      model_.Backward(1.0f / static_cast<float>(micro));
    }
    return {model_.grads().begin(), model_.grads().end()};
  }
  // Whether the gradient at `i` belongs to a weight matrix a Linear layer's backward writes.
  bool Written(int64_t i) const {
    for (const TensorSpec& spec : model_.layout().tensors()) {
      if (i < spec.offset || i >= spec.offset + spec.numel) continue;
      const std::string& name = spec.name;
      return name == (config_.tied_embeddings() ? "wte" : "lm_head.weight") || name.ends_with(".qkv.weight") ||
             name.ends_with(".proj.weight") || name.ends_with(".fc.weight") || name.ends_with(".out.weight");
    }
    return false;
  }

  ModelConfig config_;
  Model model_;
  std::vector<int32_t> tokens_;
};

TEST_P(ZeroGradTest, LeavesTheWeightMatricesToTheBackwardAndZeroesTheRest) {
  std::fill(model_.grads().begin(), model_.grads().end(), kStale);
  model_.ZeroGrad();
  int64_t written = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(model_.grads().size()); ++i) {
    const float g = model_.grads()[static_cast<size_t>(i)];
    if (Written(i)) {
      ++written;
      ASSERT_EQ(g, kStale) << "gradient " << i << " of a weight matrix was zeroed";
    } else {
      ASSERT_EQ(g, 0.0f) << "gradient " << i << " was not zeroed";
    }
  }
  // Most of the parameters: what ZeroGrad no longer passes over.
  EXPECT_GT(written, static_cast<int64_t>(model_.grads().size()) / 2);
}

TEST_P(ZeroGradTest, AStepOverStaleGradientsMatchesOneOverZeros) {
  for (int micro : {1, 2}) {
    // Over zeros: a fresh model's gradients, added into by every backward.
    std::fill(model_.grads().begin(), model_.grads().end(), 0.0f);
    const std::vector<float> want = Backwards(micro);
    std::fill(model_.grads().begin(), model_.grads().end(), kStale);
    model_.ZeroGrad();
    const std::vector<float> got = Backwards(micro);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << micro << " micro-batch(es): gradient " << i;
    }
  }
}

TEST_P(ZeroGradTest, OnlyTheFirstBackwardAfterZeroGradWrites) {
  model_.ZeroGrad();
  const std::vector<float> once = Backwards(1);
  // A second backward with no ZeroGrad between adds: twice the first's gradients (to rounding where a gradient
  // gathers several terms, as the tied embedding's does).
  model_.Forward(tokens_.data(), tokens_.data() + 1, 2, 15);
  model_.Backward(1.0f);
  for (size_t i = 0; i < once.size(); ++i) {
    ASSERT_NEAR(model_.grads()[i], 2 * once[i], 1e-5 * std::fabs(once[i]) + 1e-12) << "gradient " << i;
  }
}

// --eod-mask-loss's negative targets: attention is causal, so a batch whose last position has no loss trains as the
// same batch one position shorter: the same loss (the mean over the positions that have one) and the same
// gradients. A batch with no loss anywhere has no gradient.
TEST_P(ZeroGradTest, APositionWithoutLossIsAsIfItWereNotThere) {
  constexpr int B = 2, T = 8;
  std::vector<int32_t> targets(B * T), short_tokens, short_targets;
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>((i * 17 + 5) % config_.vocab);
  for (int b = 0; b < B; ++b) {
    targets[b * T + T - 1] = -1;
    short_tokens.insert(short_tokens.end(), tokens_.begin() + b * T, tokens_.begin() + b * T + T - 1);
    short_targets.insert(short_targets.end(), targets.begin() + b * T, targets.begin() + b * T + T - 1);
  }
  model_.ZeroGrad();
  const double masked = model_.Forward(tokens_.data(), targets.data(), B, T);
  model_.Backward(1.0f);
  const std::vector<float> masked_grads(model_.grads().begin(), model_.grads().end());
  model_.ZeroGrad();
  const double shorter = model_.Forward(short_tokens.data(), short_targets.data(), B, T - 1);
  model_.Backward(1.0f);
  EXPECT_NEAR(masked, shorter, 1e-6 * shorter);
  float largest = 0;
  for (float g : masked_grads) largest = std::max(largest, std::fabs(g));
  ASSERT_GT(largest, 0.0f);
  for (size_t i = 0; i < masked_grads.size(); ++i) {
    ASSERT_NEAR(masked_grads[i], model_.grads()[i], 1e-5 * largest) << "gradient " << i;
  }

  std::fill(targets.begin(), targets.end(), -1);
  model_.ZeroGrad();
  EXPECT_EQ(model_.Forward(tokens_.data(), targets.data(), B, T), 0.0);
  model_.Backward(1.0f);
  EXPECT_TRUE(std::all_of(model_.grads().begin(), model_.grads().end(), [](float g) { return g == 0.0f; }));
}

INSTANTIATE_TEST_SUITE_P(Models, ZeroGradTest, ::testing::Values("gpt-tiny", "llama-tiny"));

}  // namespace
}  // namespace srunway::trainer
