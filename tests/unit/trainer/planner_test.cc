// The --dry-run planner against arithmetic done by hand for NeMo's 5B GPT on 8 nodes x 8 H100s.
#include "trainer/train/planner.h"

#include <gtest/gtest.h>

#include "common/parse.h"

namespace srunway::trainer {
namespace {

PlanInput FiveB() {
  PlanInput in;
  in.model = *Preset("gpt3-5b");
  in.nodes = 8;
  in.gpus_per_node = 8;
  in.micro_batch_size = 4;
  in.global_batch_size = 2048;
  return in;
}

// Megatron's count worked by hand at 32 tokens a sequence (d 64, 2 layers, vocabulary 512). gpt-tiny (4 heads, FFN
// 256, GELU): a layer has 64 x 256 x 2 + 64 x 192 + 64 x 64 + 64 x 32 = 51,200, the output layer 64 x 512 = 32,768:
// 6 x (2 x 51,200 + 32,768). llama-tiny (2 of 4 heads for keys and values, so kv 32; SwiGLU of 176): 64 x 176 x 3
// + 64 x 128 + 4,096 + 2,048 = 48,128 a layer: 6 x (2 x 48,128 + 32,768). The PaLM formula counts the scores
// twice as much (12 L T d against Megatron's 6 L T d) and the parameters of the norms and biases too.
TEST(Planner, MegatronsFlopsByHand) {
  EXPECT_DOUBLE_EQ(MegatronFlopsPerToken(*Preset("gpt-tiny"), 32), 6.0 * (2 * 51'200 + 32'768));
  EXPECT_DOUBLE_EQ(MegatronFlopsPerToken(*Preset("llama-tiny"), 32), 6.0 * (2 * 48'128 + 32'768));
  // The 5B: per layer 2 x 4096 x 16384 + 4096 x 12288 + 4096^2 + 4096 x 2048 = 12 h^2 + h T = 209,715,200, 24 of
  // them, and 4096 x 50304.
  EXPECT_DOUBLE_EQ(MegatronFlopsPerToken(*Preset("gpt3-5b"), 2048), 6.0 * (24.0 * 209'715'200 + 4096.0 * 50'304));
}

TEST(Planner, FiveBillionByHand) {
  auto plan = MakePlan(FiveB());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // Per layer (h = 4096, FFN 4h): qkv 3h^2 + 3h, proj h^2 + h, fc 4h^2 + 4h, out 4h^2 + h, two LayerNorms 4h:
  // 12 h^2 + 13 h = 201,379,840; x 24 = 4,833,116,160; + wte 50304 h = 206,045,184; + wpe 2048 h = 8,388,608;
  // + final LayerNorm 2h = 8,192.
  EXPECT_EQ(plan->parameters, 5'047'558'144);
  // 6 (N - wpe) + 12 L T h = 6 x 5,039,169,536 + 12 x 24 x 2048 x 4096.
  EXPECT_DOUBLE_EQ(plan->flops_per_token, 6.0 * 5'039'169'536 + 12.0 * 24 * 2048 * 4096);
  EXPECT_EQ(plan->gpus, 64);
  EXPECT_EQ(plan->accumulation, 8);  // 2048 / (4 x 64)
  EXPECT_DOUBLE_EQ(plan->weights_bytes, 2.0 * 5'047'558'144);
  EXPECT_DOUBLE_EQ(plan->grads_bytes, 4.0 * 5'047'558'144);
  EXPECT_DOUBLE_EQ(plan->master_bytes, 4.0 * 5'047'558'144);
  EXPECT_DOUBLE_EQ(plan->optimizer_bytes, 8.0 * 5'047'558'144);
  // 34 s b h L = 34 x 2048 x 4 x 4096 x 24 = 27,380,416,512; logits 4 s b V = 4 x 2048 x 4 x 50304.
  EXPECT_DOUBLE_EQ(plan->activations_bytes, 27'380'416'512.0);
  EXPECT_DOUBLE_EQ(plan->logits_bytes, 1'648'361'472.0);
  EXPECT_DOUBLE_EQ(plan->total_bytes, 18.0 * 5'047'558'144 + 27'380'416'512.0 + 1'648'361'472.0);
  EXPECT_FALSE(plan->fits);  // 119.9 GB
  // 2048 x 2048 tokens x FLOPs per token / (64 x 989e12 x 0.5).
  EXPECT_NEAR(plan->step_seconds, 2048.0 * 2048 * plan->flops_per_token / (64 * 989e12 * 0.5), 1e-9);
}

TEST(Planner, TheDistributedOptimizerAndRecomputationMakeItFit) {
  PlanInput in = FiveB();
  in.distributed_optimizer = true;
  in.recompute_activations = true;
  auto plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  // srunway-train's ZeRO-1 shards the fp32 parameters and the moments, as Megatron's.
  EXPECT_DOUBLE_EQ(plan->master_bytes, 4.0 * 5'047'558'144 / 64);
  EXPECT_DOUBLE_EQ(plan->optimizer_bytes, 8.0 * 5'047'558'144 / 64);
  EXPECT_DOUBLE_EQ(plan->activations_bytes, 2.0 * 2048 * 4 * 4096 * 24);
  EXPECT_TRUE(plan->fits);  // 34.5 GB
  const std::string text = FormatPlan(in, *plan);
  EXPECT_NE(text.find("5047558144 parameters"), std::string::npos) << text;
  EXPECT_NE(text.find(" 0.32 GB  (1/64 on each GPU)"), std::string::npos) << text;
  EXPECT_NE(text.find("fits in 80 GB"), std::string::npos) << text;
}

// NeMo's recipe (ZeRO-1, no recomputation, micro-batches of 4) needs 60.3 GB here; without the distributed
// optimizer, 80.8 GB before a single activation.
TEST(Planner, TheRecipeFitsWithNeMosMicroBatchesOfFour) {
  PlanInput in = FiveB();
  in.distributed_optimizer = true;
  auto four = MakePlan(in);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->accumulation, 8);
  EXPECT_DOUBLE_EQ(four->total_bytes, 6.0 * 5'047'558'144 + 12.0 * 5'047'558'144 / 64 + 27'380'416'512.0 +
                                          1'648'361'472.0);
  EXPECT_TRUE(four->fits);
  in.distributed_optimizer = false;
  auto replicated = MakePlan(in);
  ASSERT_TRUE(replicated.ok());
  EXPECT_FALSE(replicated->fits);
  EXPECT_NE(FormatPlan(in, *replicated).find("(whole on every GPU)"), std::string::npos);
}

TEST(Planner, NumbersNoMachineHasAreRefused) {
  for (auto edit : {+[](PlanInput& in) { in.gpu_memory_gb = 0; }, +[](PlanInput& in) { in.assume_mfu = 1.5; },
                    +[](PlanInput& in) { in.peak_tflops = -1; }, +[](PlanInput& in) { in.nodes = 0; }}) {
    PlanInput in = FiveB();
    edit(in);
    EXPECT_EQ(MakePlan(in).status().code(), common::StatusCode::kInvalidArgument);
  }
}

// The numbers given are printed as given, and those derived from extreme ones stay short.
TEST(Planner, ItsLinesSayTheNumbersGivenAndStayShort) {
  PlanInput in = FiveB();
  in.gpu_memory_gb = 80.5;
  in.assume_mfu = 0.555;
  in.peak_tflops = 989.4;
  auto plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  std::string text = FormatPlan(in, *plan);
  EXPECT_NE(text.find("in 80.5 GB"), std::string::npos) << text;
  EXPECT_NE(text.find("at 55.5% MFU of 989.4 TFLOP/s per GPU"), std::string::npos) << text;
  in.assume_mfu = 1e-300;
  in.gpu_memory_gb = 1e300;
  plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  text = FormatPlan(in, *plan);
  for (std::string_view line : common::Split(text, '\n')) EXPECT_LT(line.size(), 160u) << line;
  EXPECT_NE(text.find("in 1e+300 GB"), std::string::npos) << text;
}

TEST(Planner, AnIndivisibleBatchIsRefused) {
  PlanInput in = FiveB();
  in.global_batch_size = 2000;
  EXPECT_EQ(MakePlan(in).status().code(), common::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace srunway::trainer
