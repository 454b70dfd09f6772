// The training loop of srunway-train: data, model, optimizer, schedule, logging, evaluation, checkpoints, samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/model/config.h"

namespace srunway::trainer {

struct TrainOptions {
  ModelConfig model;
  int micro_batch_size = 4;
  int global_batch_size = 0;  // 0: micro_batch_size (no accumulation)
  int seq_length = 0;         // 0: the model's seq_len
  float lr = 3e-4f;
  float min_lr = 0.0f;
  int64_t warmup_steps = 0;
  int64_t train_steps = 100;
  int64_t lr_decay_steps = 0;  // 0: train_steps
  float weight_decay = 0.01f;
  float adam_beta1 = 0.9f;
  float adam_beta2 = 0.999f;
  float adam_eps = 1e-8f;
  float clip_grad = 1.0f;
  uint64_t seed = 1234;
  std::vector<std::string> data_path;
  bool mock_data = false;
  std::string split = "969,30,1";
  std::string save;
  std::string load;
  int64_t save_interval = 0;   // 0: only at the end
  int64_t log_interval = 1;
  int64_t eval_interval = 0;   // 0: no evaluation
  int64_t eval_iters = 10;
  std::string metrics_file;
  std::string export_safetensors;
  int sample_tokens = 0;
  int sample_top_k = 1;        // 1: greedy
  std::string sample_prompt;
  std::string vocab_file, merge_file;
  double peak_tflops = 0;      // 0: measure this machine's sgemm rate
  int threads = 0;             // 0: OMP_NUM_THREADS, else the CPUs of this task's affinity mask
  bool overfit_batch = false;  // every step trains on the first batch again (a debugging aid, as in llm.c)
};

// Exit codes of srunway-train (documented in the README).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;       // bad input, unreadable data, a failed write
inline constexpr int kExitUsage = 2;       // bad command line or config file
inline constexpr int kExitDiverged = 3;    // the loss or the gradient norm became NaN or infinite
inline constexpr int kExitSignalled = 4;   // SIGTERM/SIGINT/SIGUSR1: stopped after saving a checkpoint

// Runs the whole training; returns the exit code after printing any error as one line.
int Train(const TrainOptions& options);

}  // namespace srunway::trainer
