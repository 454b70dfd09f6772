// The training loop of srunway-train: data, model, optimizer, schedule, logging, evaluation, checkpoints, samples.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/model/config.h"
#include "trainer/model/params.h"
#include "trainer/ops/ops.h"

namespace srunway::trainer {

class Tokenizer;

struct TrainOptions {
  ModelConfig model;
  int micro_batch_size = 4;
  int global_batch_size = 0;  // 0: micro_batch_size (no accumulation)
  int seq_length = 0;         // 0: the model's seq_len
  float lr = 3e-4f;
  float min_lr = 0.0f;
  // Megatron's --decoupled-lr and --decoupled-min-lr: the word embeddings' and the untied output layer's own peak
  // and final rates along the same schedule (negative: not given; the second then --min-lr).
  float decoupled_lr = -1, decoupled_min_lr = -1;
  float lr_warmup_init = 0;  // Megatron's --lr-warmup-init: the rate the warmup rises from
  int64_t warmup_steps = 0;
  int64_t train_steps = 100;
  int64_t lr_decay_steps = 0;  // 0: train_steps
  // Megatron's counts in samples, made steps of the global batch once it is known (0: not given): --train-samples
  // (rounded down, as Megatron does), --lr-decay-samples and --lr-warmup-samples (rounded).
  int64_t train_samples = 0, lr_decay_samples = 0, lr_warmup_samples = 0;
  // Megatron's --rampup-batch-size START INCREMENT SAMPLES (empty: none). With --train-samples the steps and the
  // learning-rate schedule count samples, as Megatron's; with --train-steps (NeMo's way) they count steps.
  std::vector<int64_t> rampup_batch_size;
  double warmup_fraction = -1;  // Megatron's --lr-warmup-fraction of the decay's steps, rounded (< 0: not given)
  std::string lr_decay_style = "cosine";  // cosine, linear, constant, inverse-square-root or WSD
  // WSD's final decay (Megatron's --lr-wsd-decay-iters or -samples) and its shape (--lr-wsd-decay-style).
  int64_t lr_wsd_decay_steps = 0, lr_wsd_decay_samples = 0;
  std::string lr_wsd_decay_style = "exponential";
  int64_t constant_steps = 0;  // NeMo's constant tail at min_lr (its warmup and decay then follow NeMo's)
  float weight_decay = 0.01f;
  // Megatron's --weight-decay-incr-style (constant: --weight-decay throughout) from --start-weight-decay to
  // --end-weight-decay over the run (negative: not given).
  std::string weight_decay_incr_style = "constant";
  float start_weight_decay = -1, end_weight_decay = -1;
  float adam_beta1 = 0.9f;
  float adam_beta2 = 0.999f;
  float adam_eps = 1e-8f;
  float clip_grad = 1.0f;
  float hidden_dropout = 0.0f;     // Megatron's --hidden-dropout (NeMo's 5B: 0.1)
  float attention_dropout = 0.0f;  // Megatron's --attention-dropout
  uint64_t seed = 1234;
  InitMethod init_method = InitMethod::kNormal;  // how the weight matrices are drawn where nothing is loaded
  // Megatron's --embedding-init-method-std: the embedding tables drawn ~ N(0, this) and trained without weight
  // decay; -1: drawn as the other matrices, and decayed.
  float embedding_init_std = -1;
  std::vector<std::string> data_path;
  // Megatron's --train-data-path and --valid-data-path, in place of --data-path and --split: each split's datasets
  // (a prefix or a blend), whole. No validation runs without the second.
  std::vector<std::string> train_data_path, valid_data_path;
  bool mock_data = false;
  std::string split = "969,30,1";
  // Megatron's --data-cache-path: the sample index kept there as a file each node's ranks map (see CachedSamples).
  std::string data_cache_path;
  std::string save;
  std::string load;
  // Megatron's --finetune: only the parameters come from --load; step, data position, optimizer state and random
  // state start afresh. Where --save holds a checkpoint already (a requeued job), that one resumes in full.
  bool finetune = false;
  // Megatron's --pretrained-checkpoint: where --load holds no checkpoint (or is not given), fine-tune from this
  // one instead, as --finetune --load would (a job's first run; its requeues resume --load's own).
  std::string pretrained_checkpoint;
  // Megatron's --ckpt-step: load this step's checkpoint of --load's directory instead of the newest (with
  // --pretrained-checkpoint, of that one's: the run's own checkpoints in --load resume from their newest), unless
  // the newest is of a run that went back to this step already (a requeued job); -1: the newest.
  int64_t ckpt_step = -1;
  // Megatron's --no-load-optim without --finetune: resume the step, data position and schedule, with AdamW's moments
  // at zero and its bias correction counting from its first step again; --no-load-rng: not the random state.
  // Where --save holds a checkpoint already (a requeued job), that one resumes in full, as with --finetune.
  bool no_load_optim = false;
  bool no_load_rng = false;
  // Megatron's --use-checkpoint-opt_param-scheduler: a resume takes the learning-rate and weight-decay schedule
  // that its checkpoint was trained with (rates, warmup, decay and their styles), not the flags'.
  bool use_checkpoint_schedule = false;
  // Megatron's --no-save-optim: checkpoints hold the parameters without AdamW's moments (a third of the bytes),
  // and so resume only with --no-load-optim or --finetune; --no-save-rng: without the random state.
  bool no_save_optim = false;
  bool no_save_rng = false;
  // Megatron's --exit-on-missing-checkpoint: a --load that holds no checkpoint ends the run (a mistyped path)
  // instead of training from scratch.
  bool exit_on_missing_checkpoint = false;
  // Megatron's --exit-interval: stop (saving, with --save) after every step that is a multiple of this, before the
  // last; 0: never.
  int64_t exit_interval = 0;
  // Megatron's --decrease-batch-size-if-needed: a global batch that is not a multiple of micro-batch x ranks (a job
  // requeued on fewer nodes) becomes the largest multiple below it, said in a warning, instead of an error.
  bool decrease_batch_size = false;
  // Megatron's --iterations-to-skip: where the steps trained so far are one of these, the next step's samples are
  // passed over untrained (no forward, backward or update); the schedule does not count it.
  std::vector<int64_t> iterations_to_skip;
  // Megatron's --skip-train: no step; the validation loss of the parameters (--load's, or the initialisation's),
  // then --export and --sample. Nothing is saved.
  bool skip_train = false;
  int64_t save_interval = 0;   // 0: only at the end
  // Megatron's non-persistent checkpoints (--non-persistent-ckpt-type global): every non_persistent_save_interval
  // steps that is no other save, a checkpoint in non_persistent_dir (--non-persistent-global-ckpt-dir, else
  // --save/non_persistent), which keeps only the newest; a resume takes it where it is as new as --load's newest
  // or newer (in --non-persistent-global-ckpt-dir, else --load/non_persistent). Empty: none.
  int64_t non_persistent_save_interval = 0;
  std::string non_persistent_dir;       // where they are saved
  std::string non_persistent_load_dir;  // where a resume looks for them
  int keep_checkpoints = 0;    // keep this many complete checkpoints, deleting older ones (0: all)
  int64_t save_retain_interval = 0;  // Megatron's: keep those at multiples of this and the newest (0: all)
  int64_t log_interval = 1;
  int64_t eval_interval = 0;   // 0: no evaluation
  int64_t eval_iters = 10;
  std::string metrics_file;
  // Megatron's --tensorboard-dir: its scalars under its tag names, every tensorboard_log_interval steps (rank 0).
  std::string tensorboard_dir;
  int64_t tensorboard_log_interval = 1;
  bool log_timers_to_tensorboard = false;  // iteration-time, and with log_throughput the TFLOP/s per GPU
  // Megatron's --timing-log-level: 0 none; 1 forward-backward, all-grads-sync and optimizer; 2 also
  // batch-generator, forward-compute, backward-compute, optimizer-clip-main-grad and optimizer-inner-step. Each is
  // printed at the log steps as (min, max) over the ranks of its mean ms per step since the last, the device
  // drained at its end (as Megatron's timers drain it), and written to TensorBoard (NAME-time, the max, in s) with
  // log_timers_to_tensorboard.
  int timing_log_level = 0;
  std::string timing_log_option = "minmax";  // Megatron's --timing-log-option: max, minmax, or all (every rank's)
  bool log_throughput = false;
  // Megatron's --log-progress: rank 0 appends "Starting job" and, after each checkpoint, the job's and the
  // cumulative throughput to --save's progress.txt (progress_log.h).
  bool log_progress = false;
  bool log_validation_ppl_to_tensorboard = false;
  bool log_world_size_to_tensorboard = false;
  bool log_learning_rate_to_tensorboard = true;  // Megatron's --no-log-learning-rate-to-tensorboard turns it off
  bool log_memory_to_tensorboard = false;  // the device's bytes allocated, now and at most, and the allocations
  bool log_params_norm = false;  // Megatron's: the parameters' L2 norm on the log lines and in TensorBoard
  bool log_num_zeros_in_grad = false;  // Megatron's: how many of the step's reduced gradients are zero, likewise
  std::string export_safetensors;
  std::string export_hf;       // a directory: model.safetensors and config.json in Hugging Face's form
  StoredDtype export_dtype = StoredDtype::kF32;  // of both exports' weights
  double export_hf_max_shard_gb = 5;  // --export-hf's largest file (10^9 bytes), as save_pretrained's default
  int sample_tokens = 0;
  int sample_top_k = 1;        // 1: greedy
  std::string sample_prompt;
  std::string vocab_file, merge_file;
  std::string tokenizer_model;  // a Hugging Face tokenizer.json or SentencePiece model, or its directory, read as
  std::string tokenizer_type;   // ...Tokenizer::LoadModel reads it (Megatron's --tokenizer-type); or:
  // Megatron's --tokenizer-type NullTokenizer with --vocab-size N: the data are token ids below N, N is the end of
  // document, and there is no text (0: the tokenizer is vocab_file's, or the one beside the data).
  int null_tokenizer_vocab = 0;
  // The data's tokenizer where srunway-train's flags loaded it already (for the vocabulary it pads); else the
  // trainer loads it once, the first time a flag needs it (a Hugging Face tokenizer.json can be 11 MB to parse).
  std::shared_ptr<const Tokenizer> tokenizer;
  double peak_tflops = 0;      // 0: the GPU's dense bf16 peak where known, or this CPU's measured sgemm rate
  std::string device = "auto";  // auto (the rank's GPU where there is one, else the CPU), cpu or cuda
  int threads = 0;  // 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else this task's CPUs; kMaxThreads at most
  bool overfit_batch = false;  // every step trains on the first batch again (a debugging aid, as in llm.c)
  // Megatron's --eod-mask-loss: positions whose input token is the tokenizer's end of document have no loss (in
  // training and validation); each micro-batch's loss is the mean over the others.
  bool eod_mask_loss = false;
  // Megatron's --calculate-per-token-loss: the step's loss is the mean over all its positions on all ranks, rather
  // than the mean of each micro-batch's mean (the same where every micro-batch scores as many positions).
  bool per_token_loss = false;
  // Megatron's --reset-position-ids and --reset-attention-mask: a sample holds several documents, each ending
  // with the tokenizer's end of document; each starts again at position 0, and attends to its own tokens only.
  bool reset_position_ids = false;
  bool reset_attention_mask = false;
  // Data parallelism: every rank of the step (srun, torchrun or srunway-launch) is one replica.
  double bucket_size_mb = 25;       // gradient all-reduce buckets (PyTorch DDP's default)
  bool overlap_grad_reduce = true;  // start each bucket's all-reduce while the backward goes on
  bool grad_reduce_bf16 = false;    // the data-parallel reduction in bf16 (--grad-reduce-in-bf16)
  bool distributed_optimizer = false;  // ZeRO-1: optimizer state sharded over the data-parallel ranks
  bool recompute_activations = false;  // Megatron's full recomputation: each layer's forward again in the backward
  bool bf16 = false;  // Megatron's --bf16: what a GPU run does; on CPUs a line says they compute in fp32
  // Megatron's --disable-bf16-reduced-precision-matmul: on GPUs the GEMMs that write bf16 add split-K partial sums
  // in fp32 only (Ops::KeepSplitKSumsFp32); on CPUs, which compute in fp32, a line says it changes nothing.
  bool fp32_split_k_sums = false;
  // Megatron's --deterministic-mode: the same bits on every run. The CPU path gives them anyway; the GPU path,
  // whose backward adds with atomics in an order that changes from run to run, refuses it.
  bool deterministic_mode = false;
  double distributed_timeout_min = 10;  // start-up and each collective; then the step ends with an error
  // Stopping early: after this many minutes of training every rank saves and stops (0: no limit)...
  double exit_duration_min = 0;
  // ...and on a signal, the save is skipped when the last save took longer than what is left of this budget,
  // counted from when the signal was seen (a Spot VM has 30 s; Slurm's KillWait is 30 s).
  double exit_save_budget_s = 25;
  double straggler_threshold = 1.2;  // a rank whose compute time is this many times the median...
  int straggler_window = 5;          // ...for this many steps in a row is named
  bool watch_stragglers = true;      // false: no straggler lines (Megatron's --disable-straggler-on-startup)
  // Megatron's --straggler-minmax-count: after each log line, the N slowest and N fastest ranks by the step's
  // compute time (0: no such line).
  int straggler_minmax_count = 0;
  // Megatron's --check-weight-hash-across-dp-replicas-interval: every this many steps the ranks compare a hash of
  // the weights the ops read, which data parallelism keeps the same bit for bit on every rank; ranks that differ
  // (a memory, GPU or network fault) end the run unsaved (TrainResult::Ending::kReplicasDiffer). 0: never.
  int64_t check_weight_hash_interval = 0;
  // The steps inside the CUDA profiler's capture range: profile_step to profile_last_step (0: profile_step alone),
  // on the ranks of profile_ranks (empty: every rank). --profile-step N is N alone on every rank; Megatron's
  // --profile --profile-step-start S --profile-step-end E --profile-ranks R... is S + 1 to E on R.
  int64_t profile_step = 0;  // 0: none
  int64_t profile_last_step = 0;
  std::vector<int> profile_ranks;
};

// Megatron's --pretrained-checkpoint: whether the run starts from it, --load (and its non-persistent checkpoints)
// holding nothing to resume.
bool StartsFromPretrained(const TrainOptions& o);

// How a training run ended (errors are returned as a Status instead).
struct TrainResult {
  enum class Ending { kFinished, kSignalled, kTimeLimit, kExitInterval, kDiverged, kReplicasDiffer };
  Ending ending = Ending::kFinished;
  int64_t step = 0;  // steps done when it ended
  int signal = 0;    // kSignalled: the signal any rank received
  double loss = 0, grad_norm = 0;  // kDiverged: the values that were not finite
  std::string replicas;  // kReplicasDiffer: which ranks hold which weights (WeightHashes)
  bool saved = false;  // a checkpoint of this step was written
  std::string not_saved;  // kSignalled without a save: why (the save would not fit --exit-save-budget)
  int rank = 0;        // every rank ends the same way; rank 0 is the one to say so
};

// What Train() tells the program about an error: the rank, and whether every rank hit the same error (a bad
// flag, a disagreement found at start-up): then rank 0 alone says it.
struct TrainError {
  common::Status status;
  int rank = 0;
  bool every_rank = false;
};

// The most CPU threads a rank takes (OpenMP crashed starting 100,000).
inline constexpr int kMaxThreads = 4096;

// Exit codes of srunway-train (documented in the README).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;       // bad input, unreadable data, a failed write
inline constexpr int kExitUsage = 2;       // bad command line or config file
inline constexpr int kExitDiverged = 3;    // the loss or the gradient norm became NaN or infinite, or the ranks'
                                           // weights differ (--check-weight-hash-across-dp-replicas-interval)
inline constexpr int kExitSignalled = 4;   // SIGTERM/SIGINT/SIGUSR1, --exit-duration-in-mins or --exit-interval: stopped early

// Runs the whole training on every rank of the step. `stop_signal` (set by the program's signal handler, 0 when
// none) is read once per step; ranks agree on it, so they all stop after the same step, save and return
// kSignalled.
// `gpu_ops` makes the ops for a GPU (cuda::NewCudaOps where the program carries the CUDA kernels); without it
// only the host trains.
using GpuOpsFactory = std::function<common::StatusOr<std::unique_ptr<Ops>>(Device& device)>;
std::variant<TrainResult, TrainError> Train(const TrainOptions& options, const volatile std::sig_atomic_t* stop_signal,
                                            const GpuOpsFactory& gpu_ops = nullptr);

}  // namespace srunway::trainer
