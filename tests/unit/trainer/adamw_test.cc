// AdamW's bookkeeping: one update per run of tensors that share weight decay and rate, whole or in ZeRO-1's
// slices, with the results of an update per tensor (ops/cpu's AdamWUpdate, tensor by tensor, is the reference).
#include "trainer/optim/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string_view>
#include <vector>

#include "trainer/model/config.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

constexpr AdamWConfig kConfig{0.9f, 0.95f, 1e-8f, 0.1f};
constexpr float kLr = 6e-4f, kGradScale = 0.5f;

// Within each range, the runs of the tensors it touches, in layout order, that start where the decay or the rate
// (the word embeddings' and the output layer's, --decoupled-lr) changes.
size_t DecayRuns(const ParamLayout& layout, const std::vector<ParamRange>& ranges) {
  size_t runs = 0;
  for (const ParamRange& range : ranges) {
    const TensorSpec* previous = nullptr;
    for (const TensorSpec& spec : layout.tensors()) {
      if (spec.offset + spec.numel <= range.offset || spec.offset >= range.offset + range.count) continue;
      if (previous == nullptr || spec.decay != previous->decay ||
          spec.embedding_or_output != previous->embedding_or_output) {
        ++runs;
      }
      previous = &spec;
    }
  }
  return runs;
}

std::vector<float> Random(size_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> out(n);
  for (float& x : out) x = scale * static_cast<float>(rng.Normal());
  return out;
}

// Two steps of the optimizer over `owned` against AdamWUpdate called tensor by tensor on the same elements, the
// word embeddings and the output layer at `embedding_lr` (by default kLr); the elements not owned stay as they were.
void ExpectPerTensorResults(const ParamLayout& layout, const std::vector<ParamRange>& owned,
                            float embedding_lr = kLr) {
  const size_t n = static_cast<size_t>(layout.numel());
  std::vector<float> params = Random(n, 1, 0.02f), expected = params;
  std::vector<float> m(n), v(n);
  AdamW adamw(layout, kConfig, owned);
  for (int64_t step = 1; step <= 2; ++step) {
    const std::vector<float> grads = Random(n, 10 + static_cast<uint64_t>(step), 0.01f);
    adamw.Step(params, grads, {kLr, embedding_lr}, step, kGradScale);
    cpu::AdamWArgs args;
    args.beta1 = kConfig.beta1;
    args.beta2 = kConfig.beta2;
    args.eps = kConfig.eps;
    args.bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double{kConfig.beta2}, double(step))));
    args.grad_scale = kGradScale;
    for (const ParamRange& range : owned) {
      for (const TensorSpec& spec : layout.tensors()) {
        const int64_t begin = std::max(range.offset, spec.offset);
        const int64_t end = std::min(range.offset + range.count, spec.offset + spec.numel);
        if (begin >= end) continue;
        const float lr = spec.embedding_or_output ? embedding_lr : kLr;
        args.step_size = static_cast<float>(lr / (1.0 - std::pow(double{kConfig.beta1}, double(step))));
        args.decay = spec.decay ? 1.0f - lr * kConfig.weight_decay : 1.0f;
        cpu::AdamWUpdate(expected.data() + begin, grads.data() + begin, m.data() + begin, v.data() + begin, end - begin,
                         args);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(params[i], expected[i]) << "element " << i;
}

TEST(AdamW, OneUpdatePerRunOfTensorsThatShareDecay) {
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    const ParamLayout layout(*Preset(preset));
    const AdamW adamw(layout, kConfig);
    EXPECT_EQ(adamw.updates_per_step(), DecayRuns(layout, {{0, layout.numel()}})) << preset;
    EXPECT_LT(adamw.updates_per_step(), layout.tensors().size()) << preset;
    ExpectPerTensorResults(layout, {{0, layout.numel()}});
  }
}

TEST(AdamW, SlicesKeepTheirOwnRuns) {
  // ZeRO-1's slices: two ranges that cut through tensors and leave a gap. A run never spans the gap (its moments
  // are adjacent, its parameters are not), and the elements outside the slices are untouched.
  const ParamLayout layout(*Preset("gpt-tiny"));
  const int64_t n = layout.numel();
  const std::vector<ParamRange> owned = {{n / 7, n / 3}, {n / 2 + 5, n / 4}};
  const AdamW adamw(layout, kConfig, owned);
  EXPECT_EQ(adamw.updates_per_step(), DecayRuns(layout, owned));
  ExpectPerTensorResults(layout, owned);
}

TEST(AdamW, EmbeddingsAndOutputLayerTakeTheirOwnRate) {
  // --decoupled-lr: the word embeddings (GPT's, which are also its output layer) and Llama's untied output layer
  // update at the second rate, whole and in slices that cut through them; the position embeddings do not.
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    const ParamLayout layout(*Preset(preset));
    const int64_t n = layout.numel();
    const TensorSpec* wte = layout.Find("wte");
    ASSERT_TRUE(wte != nullptr && wte->embedding_or_output) << preset;
    const TensorSpec* wpe = layout.Find("wpe");
    EXPECT_TRUE(wpe == nullptr || !wpe->embedding_or_output) << preset;
    const TensorSpec* head = layout.Find("lm_head.weight");
    EXPECT_EQ(head != nullptr, std::string_view(preset) == "llama-tiny");
    EXPECT_TRUE(head == nullptr || head->embedding_or_output) << preset;
    ExpectPerTensorResults(layout, {{0, n}}, 5 * kLr);
    const std::vector<ParamRange> owned = {{wte->numel / 2, n / 3}, {n - n / 5, n / 5}};
    EXPECT_EQ(AdamW(layout, kConfig, owned).updates_per_step(), DecayRuns(layout, owned)) << preset;
    ExpectPerTensorResults(layout, owned, 0.0f);
  }
}

TEST(AdamW, EmbeddingTablesWithoutDecayWhereAsked) {
  // --embedding-init-method-std: the embedding tables (GPT's word and position embeddings, Llama's word
  // embeddings) take no weight decay; every other matrix does, Llama's untied output layer included. With zero
  // gradients the moments stay zero, so a step is the decay alone.
  for (const char* preset : {"gpt-tiny", "llama-tiny"}) {
    SCOPED_TRACE(preset);
    const ParamLayout layout(*Preset(preset));
    const size_t n = static_cast<size_t>(layout.numel());
    for (const bool decay_embeddings : {true, false}) {
      SCOPED_TRACE(decay_embeddings);
      AdamWConfig config = kConfig;
      config.decay_embeddings = decay_embeddings;
      AdamW adamw(layout, config);
      std::vector<float> params(n, 1.0f);
      const std::vector<float> grads(n, 0.0f);
      adamw.Step(params, grads, kLr, 1);
      const float decayed = 1.0f - kLr * kConfig.weight_decay;
      int tables = 0;
      for (const TensorSpec& spec : layout.tensors()) {
        SCOPED_TRACE(spec.name);
        const bool table = spec.name == "wte" || spec.name == "wpe";
        tables += table ? 1 : 0;
        const float want = spec.decay && (decay_embeddings || !table) ? decayed : 1.0f;
        EXPECT_EQ(params[static_cast<size_t>(spec.offset)], want);
        EXPECT_EQ(params[static_cast<size_t>(spec.offset + spec.numel - 1)], want);
      }
      EXPECT_EQ(tables, std::string_view(preset) == "gpt-tiny" ? 2 : 1);
    }
  }
}

}  // namespace
}  // namespace srunway::trainer
