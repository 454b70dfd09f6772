// Model::ZeroGrad and the first backward after it: ZeroGrad zeroes all but the Linear layers' weight matrices,
// whose gradients that backward writes rather than adds, so a step's gradients are the same whatever the buffer
// held before it. Positions without loss (--eod-mask-loss), and several documents in a sequence
// (--reset-position-ids, --reset-attention-mask). A model without positions (NoPE), or without RoPE in some layers;
// sliding-window attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/model/model.h"
#include "trainer/model/rng.h"
#include "trainer/ops/cpu/ops.h"

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

// Megatron's get_ltor_masks_and_position_ids: a document ends after each end-of-document token, which stays in the
// document it ends; two in a row make a document of one token.
TEST(DocumentStartsTest, ADocumentEndsAfterEachEndOfDocument) {
  constexpr int32_t E = 7;
  const std::vector<int32_t> tokens = {1, E, 2, 3, E, E, 4, /* sequence 2 */ E, 5, 6, 1, 2, 3, 4};
  std::vector<int32_t> starts(tokens.size());
  DocumentStarts(tokens.data(), 2, 7, E, starts.data());
  EXPECT_EQ(starts, (std::vector<int32_t>{0, 0, 2, 2, 2, 5, 6, /* sequence 2 */ 0, 1, 1, 1, 1, 1, 1}));
}

// --reset-position-ids with --reset-attention-mask: each document of a sequence is trained as if it were alone,
// at positions from 0 on, so the sequence's loss (the mean over its positions) and gradients are the documents'
// own, weighted by their lengths. Without the flags the documents see each other and it differs.
class DocumentsTest : public ::testing::TestWithParam<const char*> {
 protected:
  static constexpr int32_t kEod = 0;
  static constexpr int kFirst = 6, kT = 16;  // the first document's length, with its end; then the second's

  DocumentsTest() : config_(*Preset(GetParam())), model_(config_, 1) {
    Rng rng(5);
    InitParams(config_, model_.layout(), rng, model_.params());
    for (int t = 0; t < kT; ++t) {
      tokens_.push_back(t == kFirst - 1 ? kEod : 1 + (t * 29 + 3) % (config_.vocab - 1));
      targets_.push_back((t * 13 + 1) % config_.vocab);
    }
  }
  // The mean loss and gradients of `count` tokens from `first` on, as one sequence.
  std::pair<double, std::vector<float>> Step(int first, int count) {
    model_.ZeroGrad();
    const double loss = model_.Forward(tokens_.data() + first, targets_.data() + first, 1, count);
    model_.Backward(1.0f);
    return {loss, {model_.grads().begin(), model_.grads().end()}};
  }

  ModelConfig config_;
  Model model_;
  std::vector<int32_t> tokens_, targets_;
};

TEST_P(DocumentsTest, EachDocumentTrainsAsIfItWereAlone) {
  model_.set_documents(kEod, true, true);
  const auto [first_loss, first_grads] = Step(0, kFirst);
  const auto [second_loss, second_grads] = Step(kFirst, kT - kFirst);
  const auto [both_loss, both_grads] = Step(0, kT);
  const double want = (first_loss * kFirst + second_loss * (kT - kFirst)) / kT;
  EXPECT_NEAR(both_loss, want, 1e-6 * want);
  float largest = 0;
  for (float g : both_grads) largest = std::max(largest, std::fabs(g));
  ASSERT_GT(largest, 0.0f);
  for (size_t i = 0; i < both_grads.size(); ++i) {
    const float from_each = (first_grads[i] * kFirst + second_grads[i] * (kT - kFirst)) / kT;
    ASSERT_NEAR(both_grads[i], from_each, 1e-5f * largest) << "gradient " << i;
  }

  model_.set_documents(kEod, false, false);
  EXPECT_GT(std::fabs(Step(0, kT).first - want), 1e-4 * want) << "one document in all should train otherwise";
}

INSTANTIATE_TEST_SUITE_P(Models, DocumentsTest, ::testing::Values("gpt-tiny", "llama-tiny"));

// RoPE and the learned position embeddings at a document's positions: row t of a sequence whose document starts
// at 3 turns (or is embedded) as row t - 3 of the plain sequence does.
TEST(DocumentPositionsTest, StartAgainInEachDocument) {
  constexpr int T = 9, H = 2, KV = 1, hd = 8, C = 4, kStart = 3;
  constexpr int row = (H + 2 * KV) * hd;
  std::vector<int32_t> positions(T);
  for (int t = 0; t < T; ++t) positions[t] = t < kStart ? t : t - kStart;
  const cpu::Documents docs{positions.data(), nullptr};
  std::vector<float> qkv(T * row);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> plain = qkv, turned = qkv;
  cpu::RopeForward(plain.data(), 1, T, H, KV, hd, RopeFrequencies{});
  cpu::RopeForward(turned.data(), 1, T, H, KV, hd, RopeFrequencies{}, docs);
  // The same input rows from kStart on, at positions from 0: the plain sequence's first rows of that input.
  std::vector<float> shifted(qkv.begin() + kStart * row, qkv.end());
  cpu::RopeForward(shifted.data(), 1, T - kStart, H, KV, hd, RopeFrequencies{});
  for (int t = 0; t < T; ++t) {
    for (int i = 0; i < row; ++i) {
      const float want = t < kStart ? plain[t * row + i] : shifted[(t - kStart) * row + i];
      ASSERT_NEAR(turned[t * row + i], want, 1e-6f) << "row " << t << ", element " << i;
    }
  }
  // Embeddings: token t's row of wte plus wpe's row at its position; the backward adds there.
  std::vector<int32_t> tokens(T, 1);
  std::vector<float> wte(2 * C, 0.0f), wpe(T * C), out(T * C), dwte(2 * C, 0.0f), dwpe(T * C, 0.0f), dout(T * C, 1.0f);
  for (size_t i = 0; i < wpe.size(); ++i) wpe[i] = static_cast<float>(i);
  cpu::EmbeddingForward(out.data(), tokens.data(), wte.data(), wpe.data(), 1, T, C, 1.0f, docs);
  cpu::EmbeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), 1, T, C, 1.0f, docs);
  for (int t = 0; t < T; ++t) EXPECT_EQ(out[t * C], static_cast<float>(positions[t] * C)) << "row " << t;
  for (int p = 0; p < T; ++p) {
    const int uses = (p < kStart ? 1 : 0) + (p < T - kStart ? 1 : 0);
    EXPECT_EQ(dwpe[p * C], static_cast<float>(uses)) << "position " << p;
  }
}

// The logits at the last of `tokens`, one sequence, from a model of `config` drawn from seed 5; documents ending
// after each `eod` token bound the attention where `eod` is not negative (--reset-attention-mask).
std::vector<float> LastLogits(const ModelConfig& config, const std::vector<int32_t>& tokens, int32_t eod = -1) {
  const int T = static_cast<int>(tokens.size());
  Model model(config, 1);
  Rng rng(5);
  InitParams(config, model.layout(), rng, model.params());
  if (eod >= 0) model.set_documents(eod, false, true);
  model.Forward(tokens.data(), nullptr, 1, T);
  return *model.Logits(0, T - 1);
}

// T tokens of the vocabulary, none of them 0.
std::vector<int32_t> SomeTokens(int T, int vocab) {
  std::vector<int32_t> tokens;
  for (int t = 0; t < T; ++t) tokens.push_back(1 + (t * 37 + 11) % (vocab - 1));
  return tokens;
}

// A model without positions (--position-embedding-type none, NoPE) of one layer tells the tokens before the last apart
// by nothing but what they are: its logits at the last position are the same whatever their order, where a GPT's
// learned positions and a Llama's RoPE make them differ. (With more layers the causal mask itself orders them: each
// earlier position's output depends on the tokens before it, which is how NoPE models learn positions.)
class NoPositionsTest : public ::testing::TestWithParam<const char*> {
 protected:
  // The logits at the last of 12 tokens, and at the last of the same tokens with the first 11 reversed.
  static std::pair<std::vector<float>, std::vector<float>> InOrderAndReversed(const ModelConfig& config) {
    const std::vector<int32_t> tokens = SomeTokens(12, config.vocab);
    std::vector<int32_t> reversed = tokens;
    std::reverse(reversed.begin(), reversed.end() - 1);
    return {LastLogits(config, tokens), LastLogits(config, reversed)};
  }
  static float LargestDifference(const std::vector<float>& a, const std::vector<float>& b) {
    float largest = 0;
    for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i] - b[i]));
    return largest;
  }
};

TEST_P(NoPositionsTest, TheLastLogitsDoNotDependOnTheOrderOfTheTokensBefore) {
  ModelConfig config = *Preset(GetParam());
  config.n_layer = 1;
  const auto [with_positions, reordered] = InOrderAndReversed(config);
  EXPECT_GT(LargestDifference(with_positions, reordered), 1e-3f) << "the positions changed nothing";
  config.no_positions = true;
  const auto [without, reordered_without] = InOrderAndReversed(config);
  EXPECT_LT(LargestDifference(without, reordered_without), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Models, NoPositionsTest, ::testing::Values("gpt-tiny", "llama-tiny"));

// Megatron's --window-size W,0 in a model of one layer: the logits at the last of T positions do not change with the
// tokens more than W before it, which they do without the window; with documents (--reset-attention-mask) the later
// of the window's first key and the document's start bounds the keys.
class WindowTest : public ::testing::TestWithParam<const char*> {
 protected:
  static constexpr int kT = 16, kWindow = 5;  // the last query sees keys 10 to 15
  static constexpr int32_t kEod = 0;

  // The logits at the last position of `tokens` in a model of one layer with `window`, documents ending after each
  // kEod where `documents`.
  std::vector<float> Last(const std::vector<int32_t>& tokens, int window, bool documents) const {
    ModelConfig config = *Preset(GetParam());
    config.n_layer = 1;
    config.window = window;
    return LastLogits(config, tokens, documents ? kEod : -1);
  }
  // `tokens` with those at [first, end) replaced by others (never kEod).
  static std::vector<int32_t> Changed(std::vector<int32_t> tokens, int first, int end) {
    for (int t = first; t < end; ++t) tokens[t] = 1 + (tokens[t] + 100) % 500;
    return tokens;
  }
  static std::vector<int32_t> Tokens(int eod_at) {
    std::vector<int32_t> tokens;
    for (int t = 0; t < kT; ++t) tokens.push_back(t == eod_at ? kEod : 1 + (t * 29 + 3) % 500);
    return tokens;
  }
};

TEST_P(WindowTest, TheLastLogitsSeeTheWindowAndTheDocument) {
  const std::vector<int32_t> plain = Tokens(-1), early = Tokens(3), late = Tokens(12);
  const int first = kT - 1 - kWindow;
  EXPECT_EQ(Last(Changed(plain, 0, first), kWindow, false), Last(plain, kWindow, false));
  EXPECT_NE(Last(Changed(plain, 0, first), -1, false), Last(plain, -1, false));
  // A document that starts before the window (after 3): the window bounds the keys.
  EXPECT_EQ(Last(Changed(early, 4, first), kWindow, true), Last(early, kWindow, true));
  EXPECT_NE(Last(Changed(early, 4, first), -1, true), Last(early, -1, true));
  // One that starts inside it (after 12): the document does.
  EXPECT_EQ(Last(Changed(late, first, 12), kWindow, true), Last(late, kWindow, true));
  EXPECT_NE(Last(Changed(late, first, 12), kWindow, false), Last(late, kWindow, false));
}

INSTANTIATE_TEST_SUITE_P(Models, WindowTest, ::testing::Values("gpt-tiny", "llama-tiny"));

// LongRoPE's factors are chosen by the largest position + 1, as transformers chooses them by its position_ids: with
// --reset-position-ids, a sequence longer than the original positions whose documents are all shorter turns by the
// short factors (the loss of a model whose long factors are its short ones), and without it by the long ones.
TEST(LongRopeTest, FactorsAreChosenByTheLargestPosition) {
  ModelConfig config = *Preset("llama-tiny");  // heads 16 wide: 8 pairs
  config.longrope = LongRope{.short_factor = std::vector<float>(8, 1.0f),
                             .long_factor = {1.0f, 1.5f, 2.0f, 3.0f, 5.0f, 8.0f, 13.0f, 21.0f},
                             .original_positions = 8};
  ASSERT_TRUE(Validate(config).ok()) << Validate(config).message();
  ModelConfig short_only = config;
  short_only.longrope->long_factor = short_only.longrope->short_factor;
  constexpr int32_t kEod = 0;
  constexpr int T = 16;  // past the 8 original positions; documents of 6, the longest 5 past its start
  std::vector<int32_t> tokens, targets;
  for (int t = 0; t < T; ++t) {
    tokens.push_back(t % 6 == 5 ? kEod : 1 + (t * 29 + 3) % (config.vocab - 1));
    targets.push_back((t * 13 + 1) % config.vocab);
  }
  auto loss = [&](const ModelConfig& c, bool reset_positions) {
    Model model(c, 1);
    Rng rng(5);
    InitParams(c, model.layout(), rng, model.params());
    model.set_documents(kEod, reset_positions, false);
    return model.Forward(tokens.data(), targets.data(), 1, T);
  };
  EXPECT_EQ(loss(config, true), loss(short_only, true));
  EXPECT_NE(loss(config, false), loss(short_only, false));
}

// Megatron's --no-rope-freq: a Llama whose every layer skips RoPE is the Llama without positions, and one whose
// second layer alone skips it is neither that nor the Llama whose layers all turn it.
TEST(NoRopeFreqTest, ALayerWithoutRopeIsALayerWithoutPositions) {
  auto logits = [](const ModelConfig& config) { return LastLogits(config, SomeTokens(12, config.vocab)); };
  const ModelConfig plain = *Preset("llama-tiny");
  ModelConfig none = plain, all = plain, second = plain;
  none.no_positions = true;
  all.no_rope = {1, 1};
  second.no_rope = {0, 1};
  EXPECT_EQ(logits(all), logits(none));
  const std::vector<float> mixed = logits(second);
  EXPECT_NE(mixed, logits(none));
  EXPECT_NE(mixed, logits(plain));
}

// Megatron's --softmax-type: with the same weights, learned sinks of score 0 are off-by-one's, sinks far below every
// score (whose exp is 0 in fp32) are none, and off-by-one's sink changes the logits.
TEST(SoftmaxTest, LearnedSinksOfZeroAreOffByOneAndOfMinusInfinityNone) {
  const ModelConfig plain = *Preset("gpt-tiny");
  const std::vector<int32_t> tokens = SomeTokens(12, plain.vocab);
  const int T = static_cast<int>(tokens.size());
  Model drawn(plain, 1);
  Rng rng(5);
  InitParams(plain, drawn.layout(), rng, drawn.params());
  // The last logits of a model of `softmax` with the weights drawn above, and its learned sinks (if any) at `sinks`.
  auto logits = [&](Softmax softmax, float sinks = 0) {
    ModelConfig config = plain;
    config.softmax = softmax;
    Model model(config, 1);
    for (const TensorSpec& spec : model.layout().tensors()) {
      auto to = model.params().begin() + spec.offset;
      const TensorSpec* from = drawn.layout().Find(spec.name);
      if (from == nullptr) {
        std::fill_n(to, spec.numel, sinks);
      } else {
        std::copy_n(drawn.params().begin() + from->offset, spec.numel, to);
      }
    }
    model.Forward(tokens.data(), nullptr, 1, T);
    return *model.Logits(0, T - 1);
  };
  const std::vector<float> vanilla = logits(Softmax::kVanilla), sunk = logits(Softmax::kOffByOne);
  EXPECT_NE(sunk, vanilla);
  EXPECT_EQ(logits(Softmax::kLearnable, 0.0f), sunk);
  EXPECT_EQ(logits(Softmax::kLearnable, -200.0f), vanilla);
  EXPECT_NE(logits(Softmax::kLearnable, 0.5f), sunk);
}

}  // namespace
}  // namespace srunway::trainer
