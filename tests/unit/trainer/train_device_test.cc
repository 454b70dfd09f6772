// The trainer's GPU path (--device cuda) whole, on a machine without a GPU: the stand-in driver and NCCL of the
// launcher's tests (host memory behind device pointers, one-rank collectives that copy; SRUNWAY_CUDA_DRIVER and
// SRUNWAY_NCCL_LIBRARY name them) under the host's ops. All that is not a kernel -- buffers on the device,
// initialisation, checkpoints and the export staged through the host, gradients and the per-step host numbers over
// an NCCL communicator on device memory, ZeRO-1's staging on the device, recomputation -- must give the CPU path's
// results bit for bit, and a checkpoint written on one must resume on the other.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/json.h"
#include "trainer/train/trainer.h"

namespace srunway::trainer {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  std::vector<std::pair<double, double>> steps;  // loss, gradient norm
  std::string log;                               // what Train wrote to stderr
};

class TrainDevice : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::getenv("SRUNWAY_CUDA_DRIVER") == nullptr) GTEST_SKIP() << "no stand-in CUDA driver in this build";
    setenv("FAKE_GPU_OPS_FINISH", "1", 1);
    dir_ = fs::temp_directory_path() / ("srunway-train-device-" + std::to_string(::getpid()) + "-" + GetParam());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainOptions Options(const std::string& device, const std::string& name) const {
    TrainOptions o;
    o.model = *Preset("gpt-tiny");
    o.seq_length = 32;
    o.micro_batch_size = 2;
    o.global_batch_size = 4;  // two micro-batches: accumulation
    o.train_steps = 6;
    o.mock_data = true;
    o.lr = 3e-3f;
    o.hidden_dropout = 0.1f;
    o.attention_dropout = 0.1f;
    o.peak_tflops = 1;
    o.bucket_size_mb = 0.05;  // several buckets
    o.device = device;
    o.metrics_file = (dir_ / (name + ".jsonl")).string();
    o.save = (dir_ / (name + ".ckpt")).string();
    o.save_interval = 3;
    o.export_safetensors = (dir_ / (name + ".safetensors")).string();
    const std::string mode = GetParam();
    o.distributed_optimizer = mode == "zero1";
    o.recompute_activations = mode == "recompute";
    return o;
  }

  static Outcome Train(const TrainOptions& o) {
    testing::internal::CaptureStderr();
    auto outcome = trainer::Train(o, nullptr, [](Device&) { return common::StatusOr<std::unique_ptr<Ops>>(NewCpuOps()); });
    Outcome run;
    run.log = testing::internal::GetCapturedStderr();
    if (auto* error = std::get_if<TrainError>(&outcome)) {
      ADD_FAILURE() << error->status.message() << "\n" << run.log;
      return run;
    }
    std::ifstream metrics(o.metrics_file);
    for (std::string line; std::getline(metrics, line);) {
      const auto json = common::Json::parse(line);
      if (json.contains("loss")) run.steps.emplace_back(json["loss"].get<double>(), json["grad_norm"].get<double>());
    }
    return run;
  }

  static std::string Bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
};

TEST_P(TrainDevice, GpuPathGivesTheCpuPathsResults) {
  const TrainOptions cpu = Options("cpu", "cpu"), gpu = Options("cuda", "gpu");
  const Outcome on_cpu = Train(cpu), on_gpu = Train(gpu);
  ASSERT_EQ(on_cpu.steps.size(), 6u);
  EXPECT_EQ(on_gpu.steps, on_cpu.steps);
  EXPECT_NE(on_gpu.log.find("training on Fake GPU (0000:1b:00.0)"), std::string::npos) << on_gpu.log;
  EXPECT_EQ(on_cpu.log.find("Fake GPU"), std::string::npos) << on_cpu.log;
  // What was written from device buffers through the host is what the CPU wrote.
  const std::string exported = Bytes(cpu.export_safetensors);
  ASSERT_FALSE(exported.empty());
  EXPECT_TRUE(exported == Bytes(gpu.export_safetensors)) << "the exports differ";
  for (const char* shard : {"iter_0000003/shard_00000_of_00001.ckpt", "iter_0000006/shard_00000_of_00001.ckpt"}) {
    EXPECT_TRUE(Bytes(fs::path(cpu.save) / shard) == Bytes(fs::path(gpu.save) / shard)) << shard << " differs";
  }
}

TEST_P(TrainDevice, CheckpointsMoveBetweenDevices) {
  // Six steps on one device, saving at step 3; steps 4-6 again on the other from that checkpoint (its parameters
  // and moments uploaded to the GPU, or read back from it), with the same results.
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"cpu", "cuda"}, {"cuda", "cpu"}}) {
    const TrainOptions whole = Options(from, from + "-whole");
    const Outcome straight = Train(whole);
    ASSERT_EQ(straight.steps.size(), 6u);
    TrainOptions second = Options(to, to + "-resumed-from-" + from);
    second.load = (fs::path(whole.save) / "iter_0000003").string();
    const Outcome resumed = Train(second);
    ASSERT_EQ(resumed.steps.size(), 3u) << resumed.log;
    const std::vector<std::pair<double, double>> last_three(straight.steps.begin() + 3, straight.steps.end());
    EXPECT_EQ(resumed.steps, last_three) << from << " -> " << to;
  }
}

TEST_P(TrainDevice, FineTuningAndTheHuggingFaceExportGiveTheCpuPathsResults) {
  // --finetune from a checkpoint's parameters and from an exported safetensors file (the weights uploaded to the
  // GPU, its moments the zeros they start as); --export-hf staged back through the host.
  const TrainOptions base = Options("cpu", "base");
  ASSERT_EQ(Train(base).steps.size(), 6u);
  for (const std::string& load : {base.save, base.export_safetensors}) {
    std::vector<Outcome> runs;
    std::vector<std::string> exports;
    for (const std::string device : {"cpu", "cuda"}) {
      const std::string name = device + (load == base.save ? "-from-checkpoint" : "-from-weights");
      TrainOptions o = Options(device, name);
      o.load = load;
      o.finetune = true;
      o.train_steps = 3;
      o.export_hf = (dir_ / (name + "-hf")).string();
      runs.push_back(Train(o));
      ASSERT_EQ(runs.back().steps.size(), 3u) << runs.back().log;
      exports.push_back(Bytes(fs::path(o.export_hf) / "model.safetensors"));
      ASSERT_FALSE(exports.back().empty()) << runs.back().log;
    }
    EXPECT_EQ(runs[1].steps, runs[0].steps) << load;
    EXPECT_TRUE(exports[1] == exports[0]) << "the Hugging Face exports differ (--load " << load << ")";
  }
}

TEST_P(TrainDevice, ProfilerCapturesTheStepAsked) {
  // --profile-step 3: the stand-in driver says on stdout where cuProfilerStart and cuProfilerStop fall among the
  // step lines: after step 2's line, around step 3 alone.
  TrainOptions o = Options("cuda", "profiled");
  o.profile_step = 3;
  testing::internal::CaptureStdout();
  const Outcome run = Train(o);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_EQ(run.steps.size(), 6u) << run.log;
  const size_t step2 = out.find("step      2/6"), start = out.find("fake CUDA profiler: start"),
               stop = out.find("fake CUDA profiler: stop"), step3 = out.find("step      3/6");
  ASSERT_NE(step2, std::string::npos) << out;
  ASSERT_NE(step3, std::string::npos) << out;
  EXPECT_TRUE(step2 < start && start < stop && stop < step3) << out;
  EXPECT_EQ(out.find("fake CUDA profiler", stop + 1), std::string::npos) << "captured more than once:\n" << out;
  EXPECT_NE(run.log.find("--profile-step 3: the CUDA profiler's capture range holds that step"), std::string::npos)
      << run.log;
}

TEST_P(TrainDevice, ProfilerCapturesMegatronsRange) {
  if (std::string_view(GetParam()) != "plain") GTEST_SKIP() << "the capture does not depend on the mode";
  // Megatron's --profile --profile-step-start 1 --profile-step-end 4 --profile-ranks 0: steps 2 to 4, the
  // capture starting after step 1's line and stopping after step 4's work, once; --profile-ranks without this
  // rank: no capture.
  for (const int rank : {0, 1}) {
    TrainOptions o = Options("cuda", "profiled-range-" + std::to_string(rank));
    o.profile_step = 2;
    o.profile_last_step = 4;
    o.profile_ranks = {rank};
    testing::internal::CaptureStdout();
    const Outcome run = Train(o);
    const std::string out = testing::internal::GetCapturedStdout();
    ASSERT_EQ(run.steps.size(), 6u) << run.log;
    const size_t start = out.find("fake CUDA profiler: start"), stop = out.find("fake CUDA profiler: stop");
    if (rank == 1) {
      EXPECT_EQ(out.find("fake CUDA profiler"), std::string::npos) << "rank 0 captured:\n" << out;
      continue;
    }
    const size_t step1 = out.find("step      1/6"), step3 = out.find("step      3/6"), step4 = out.find("step      4/6");
    ASSERT_NE(step1, std::string::npos) << out;
    ASSERT_NE(step4, std::string::npos) << out;
    EXPECT_TRUE(step1 < start && start < step3 && step3 < stop && stop < step4) << out;
    EXPECT_EQ(out.find("fake CUDA profiler", stop + 1), std::string::npos) << "captured more than once:\n" << out;
    EXPECT_NE(run.log.find("--profile (steps 2 to 4 on rank 0): the CUDA profiler's capture range holds those steps"),
              std::string::npos)
        << run.log;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TrainDevice, ::testing::Values("plain", "zero1", "recompute"));

}  // namespace
}  // namespace srunway::trainer
