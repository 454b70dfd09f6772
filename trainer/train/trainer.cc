// The training loop.
#include "trainer/train/trainer.h"

#include <cblas.h>
#include <fmt/format.h>
#include <sched.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common/env.h"
#include "common/heartbeat.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/ckpt/checkpoint.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/data/samples.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/model.h"
#include "trainer/model/rng.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/schedule.h"

namespace srunway::trainer {
namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int signal) { g_stop_signal = signal; }

int ThreadCount(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0') {
    auto parsed = common::ParseInt(env, "OMP_NUM_THREADS", 1, 4096);
    if (parsed.ok()) return static_cast<int>(*parsed);
    common::LogWarn("{}; using the CPU count", parsed.status().message());
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// fp32 sgemm FLOP/s of this process with its threads: the ceiling MFU is measured against on a CPU.
double MeasureSgemmFlops() {
  const int n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                n);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / seconds);
  }
  return best;
}

class MetricsFile {
 public:
  common::Status Open(const std::string& path) {
    if (path.empty()) return common::Status::Ok();
    path_ = path;
    file_ = std::fopen(path.c_str(), "ae");
    if (file_ == nullptr) return common::ErrnoStatus(errno, "open metrics file " + path);
    return common::Status::Ok();
  }
  ~MetricsFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  common::Status Write(const common::Json& line) {
    if (file_ == nullptr) return common::Status::Ok();
    const std::string text = line.dump() + "\n";
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0) {
      return common::ErrnoStatus(errno, "write metrics file " + path_);
    }
    return common::Status::Ok();
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

struct Batch {
  std::vector<int32_t> tokens, targets;
};

common::Status FillBatch(SampleSource& source, int64_t first_sample, int B, int T, Batch& batch) {
  batch.tokens.resize(static_cast<size_t>(B) * T);
  batch.targets.resize(static_cast<size_t>(B) * T);
  std::vector<int32_t> sample;
  for (int b = 0; b < B; ++b) {
    SRUNWAY_RETURN_IF_ERROR(source.Sample(first_sample + b, sample));
    std::copy(sample.begin(), sample.begin() + T, batch.tokens.begin() + static_cast<int64_t>(b) * T);
    std::copy(sample.begin() + 1, sample.begin() + T + 1, batch.targets.begin() + static_cast<int64_t>(b) * T);
  }
  return common::Status::Ok();
}

// The tokenizer for --sample: the flags, else the files srunway-prep wrote beside the (first) dataset.
common::StatusOr<Tokenizer> FindTokenizer(const TrainOptions& o) {
  if (!o.vocab_file.empty() || !o.merge_file.empty()) return Tokenizer::Load(o.vocab_file, o.merge_file);
  auto paths = ParseDataPath(o.data_path);
  if (!paths.ok()) return paths.status();
  const std::string& prefix = paths->front().prefix;
  return Tokenizer::Load(prefix + ".vocab.json", prefix + ".merges.txt");
}

std::vector<int32_t> Generate(Model& model, std::vector<int32_t> context, int count, int top_k, Rng& rng) {
  const int T = model.config().seq_len;
  for (int i = 0; i < count; ++i) {
    const int n = std::min<int>(static_cast<int>(context.size()), T);
    model.Forward(context.data() + context.size() - n, nullptr, 1, n);
    std::span<const float> logits = model.Logits(0, n - 1);
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    const int k = std::clamp(top_k, 1, static_cast<int>(logits.size()));
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    int32_t next = order[0];
    if (k > 1) {
      std::vector<double> weights(k);
      double total = 0;
      for (int j = 0; j < k; ++j) total += weights[j] = std::exp(double{logits[order[j]]} - logits[order[0]]);
      double pick = rng.Uniform() * total;
      for (int j = 0; j < k; ++j) {
        if ((pick -= weights[j]) <= 0) {
          next = order[j];
          break;
        }
      }
    }
    context.push_back(next);
  }
  return context;
}

class Trainer {
 public:
  explicit Trainer(const TrainOptions& options) : o_(options) {}
  int Run();

 private:
  common::Status Setup();
  common::Status Save(const char* why);
  common::StatusOr<double> Evaluate();
  common::StatusOr<int> Loop();
  int Sample();

  TrainOptions o_;
  int B_ = 0, T_ = 0, accum_ = 1;
  std::unique_ptr<Model> model_;
  std::unique_ptr<AdamW> adam_;
  std::unique_ptr<SampleSource> train_, valid_;
  LrSchedule schedule_;
  Rng rng_;
  int64_t step_ = 0, consumed_ = 0;
  double peak_flops_ = 0;
  MetricsFile metrics_;
  std::optional<common::Heartbeat> heartbeat_ = common::Heartbeat::FromEnvironment();
};

common::Status Trainer::Setup() {
  ModelConfig& m = o_.model;
  SRUNWAY_RETURN_IF_ERROR(Validate(m));
  T_ = o_.seq_length > 0 ? o_.seq_length : m.seq_len;
  if (T_ > m.seq_len) {
    return common::InvalidArgument("--seq-length {} is longer than the model's {} positions", T_, m.seq_len);
  }
  B_ = o_.micro_batch_size;
  const int gbs = o_.global_batch_size > 0 ? o_.global_batch_size : B_;
  if (B_ < 1 || gbs % B_ != 0) {
    return common::InvalidArgument("--global-batch-size {} is not a multiple of --micro-batch-size {}", gbs, B_);
  }
  accum_ = gbs / B_;
  if (o_.train_steps < 1) return common::InvalidArgument("--train-steps must be at least 1");
  if (o_.warmup_steps < 0 || o_.log_interval < 1 || o_.eval_iters < 0 || o_.save_interval < 0) {
    return common::InvalidArgument("--warmup-steps, --log-interval, --eval-iters and --save-interval must not be negative (log interval at least 1)");
  }
  if (!o_.mock_data && o_.data_path.empty()) return common::InvalidArgument("give --data-path or --mock-data");

  const int threads = ThreadCount(o_.threads);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  openblas_set_num_threads(threads);

  DataConfig data;
  data.data_path = o_.data_path;
  data.mock = o_.mock_data;
  data.split = o_.split;
  data.seq_len = T_;
  data.vocab = m.vocab;
  data.seed = o_.seed;
  SRUNWAY_ASSIGN_OR_RETURN(train_, BuildSamples(data, Split::kTrain, o_.train_steps * gbs));
  if (o_.eval_interval > 0 && o_.eval_iters > 0) {
    const int64_t wanted = o_.eval_iters * B_;
    SRUNWAY_ASSIGN_OR_RETURN(valid_, BuildSamples(data, Split::kValid, wanted));
  }

  model_ = std::make_unique<Model>(m, B_);
  AdamWConfig adam;
  adam.beta1 = o_.adam_beta1;
  adam.beta2 = o_.adam_beta2;
  adam.eps = o_.adam_eps;
  adam.weight_decay = o_.weight_decay;
  adam_ = std::make_unique<AdamW>(model_->layout(), adam);
  schedule_ = {o_.lr, o_.min_lr, o_.warmup_steps, o_.lr_decay_steps > 0 ? o_.lr_decay_steps : o_.train_steps};
  rng_.Seed(o_.seed);
  InitParams(m, model_->layout(), rng_, model_->params());

  if (!o_.load.empty()) {
    CheckpointBuffers buffers{model_->params(), adam_->m(), adam_->v()};
    auto state = LoadCheckpoint(o_.load, m, buffers);
    if (state.ok()) {
      step_ = state->step;
      consumed_ = state->consumed_samples;
      rng_.set_state(state->rng);
      common::LogInfo("resumed from {} at step {} ({} samples consumed)", o_.load, step_, consumed_);
    } else if (state.status().code() == common::StatusCode::kNotFound &&
               (std::filesystem::is_directory(o_.load) || o_.load == o_.save)) {
      // --load DIR --save DIR is how a job that may be requeued is written: the first run finds nothing there.
      common::LogInfo("no checkpoint in {} yet; starting from scratch", o_.load);
    } else {
      return state.status();
    }
  }
  SRUNWAY_RETURN_IF_ERROR(metrics_.Open(o_.metrics_file));

  peak_flops_ = o_.peak_tflops > 0 ? o_.peak_tflops * 1e12 : MeasureSgemmFlops();
  common::LogInfo("model {} ({} layers, hidden {}, heads {}/{}, vocab {}): {:.2f} M parameters; batch {} x {} "
                  "tokens, {} micro-batches per step, {} threads; MFU against {} {:.1f} GFLOP/s",
                  ArchName(m.arch), m.n_layer, m.d_model, m.n_head, m.n_kv_head, m.vocab,
                  ParameterCount(m) / 1e6, gbs, T_, accum_, threads,
                  o_.peak_tflops > 0 ? "--peak-tflops" : "this machine's measured fp32 sgemm rate",
                  peak_flops_ / 1e9);
  return common::Status::Ok();
}

common::Status Trainer::Save(const char* why) {
  if (o_.save.empty()) return common::Status::Ok();
  TrainingState state;
  state.model = o_.model;
  state.step = step_;
  state.consumed_samples = consumed_;
  state.rng = rng_.state();
  state.extra = {{"seq_length", T_}, {"global_batch_size", B_ * accum_}, {"seed", o_.seed},
                 {"data_path", o_.data_path}, {"mock_data", o_.mock_data}, {"split", o_.split}};
  CheckpointBuffers buffers{model_->params(), adam_->m(), adam_->v()};
  SRUNWAY_ASSIGN_OR_RETURN(auto path, SaveCheckpoint(o_.save, state, buffers));
  common::LogInfo("saved checkpoint {} ({})", path.string(), why);
  return common::Status::Ok();
}

common::StatusOr<double> Trainer::Evaluate() {
  Batch batch;
  double total = 0;
  for (int64_t i = 0; i < o_.eval_iters; ++i) {
    SRUNWAY_RETURN_IF_ERROR(FillBatch(*valid_, i * B_, B_, T_, batch));
    total += model_->Forward(batch.tokens.data(), batch.targets.data(), B_, T_);
  }
  return total / static_cast<double>(o_.eval_iters);
}

int Trainer::Sample() {
  auto tokenizer = FindTokenizer(o_);
  if (!tokenizer.ok()) {
    common::LogError("--sample needs the dataset's tokenizer: {}", tokenizer.status().message());
    return kExitError;
  }
  std::vector<int32_t> context = tokenizer->Encode(o_.sample_prompt);
  if (context.empty()) context.push_back(tokenizer->eod() >= 0 ? tokenizer->eod() : 0);
  for (int32_t token : context) {
    if (token >= o_.model.vocab) {
      common::LogError("--sample: the tokenizer's token {} is outside the model's vocabulary {}", token, o_.model.vocab);
      return kExitError;
    }
  }
  const size_t prompt = context.size();
  Rng rng(o_.seed + 17);
  std::vector<int32_t> out = Generate(*model_, context, o_.sample_tokens, o_.sample_top_k, rng);
  std::vector<int32_t> generated(out.begin() + static_cast<int64_t>(prompt), out.end());
  fmt::print("sample ({} tokens, {}):\n{}{}\n", o_.sample_tokens, o_.sample_top_k > 1 ? fmt::format("top-{}", o_.sample_top_k) : "greedy",
             o_.sample_prompt, tokenizer->Decode(generated));
  return kExitOk;
}

// Trains to --train-steps and exports; an error is returned, every other ending is an exit code.
common::StatusOr<int> Trainer::Loop() {
  const double flops_per_token = TrainingFlopsPerToken(o_.model, T_);
  const int64_t tokens_per_step = static_cast<int64_t>(B_) * accum_ * T_;
  Batch batch;
  double window_ms = 0;
  int64_t window_steps = 0;
  while (step_ < o_.train_steps) {
    const auto start = Clock::now();
    const float lr = schedule_.At(step_);
    model_->ZeroGrad();
    double loss = 0;
    for (int micro = 0; micro < accum_; ++micro) {
      const int64_t first = (o_.overfit_batch ? 0 : consumed_) + static_cast<int64_t>(micro) * B_;
      SRUNWAY_RETURN_IF_ERROR(FillBatch(*train_, first, B_, T_, batch));
      loss += model_->Forward(batch.tokens.data(), batch.targets.data(), B_, T_) / accum_;
      model_->Backward(1.0f / static_cast<float>(accum_));
    }
    const double norm = GlobalNorm(model_->grads());
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      common::LogError("step {}: loss {} and gradient norm {}: training diverged; stopping without saving (the last "
                       "good checkpoint{} is kept)", step_ + 1, loss, norm, o_.save.empty() ? ", if any," : " in " + o_.save);
      return kExitDiverged;
    }
    ClipByGlobalNorm(model_->grads(), norm, o_.clip_grad);
    adam_->Step(model_->params(), model_->grads(), lr, step_ + 1);
    ++step_;
    consumed_ += static_cast<int64_t>(B_) * accum_;
    window_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    ++window_steps;

    if (step_ % o_.log_interval == 0 || step_ == o_.train_steps) {
      const double ms = window_ms / static_cast<double>(window_steps);
      const double tokens_per_s = static_cast<double>(tokens_per_step) / (ms / 1e3);
      const double mfu = tokens_per_s * flops_per_token / peak_flops_;
      fmt::print("step {:>6}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.1f} ms | {:.0f} tok/s | MFU {:.1f}%\n",
                 step_, o_.train_steps, loss, lr, norm, ms, tokens_per_s, 100 * mfu);
      std::fflush(stdout);
      common::Json line = {{"step", step_}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm},
                           {"ms", ms}, {"tokens_per_s", tokens_per_s}, {"mfu", mfu}};
      SRUNWAY_RETURN_IF_ERROR(metrics_.Write(line));
      window_ms = 0;
      window_steps = 0;
    }
    if (valid_ && step_ % o_.eval_interval == 0) {
      SRUNWAY_ASSIGN_OR_RETURN(double valid_loss, Evaluate());
      fmt::print("validation at step {} | loss {:.4f}\n", step_, valid_loss);
      SRUNWAY_RETURN_IF_ERROR(metrics_.Write({{"step", step_}, {"valid_loss", valid_loss}}));
    }
    if (heartbeat_) heartbeat_->Beat(std::to_string(step_));  // for srunway-launch's hang detection
    const bool interval_save = o_.save_interval > 0 && step_ % o_.save_interval == 0;
    if (g_stop_signal != 0 || interval_save || step_ == o_.train_steps) {
      const int signal = g_stop_signal;
      SRUNWAY_RETURN_IF_ERROR(Save(signal != 0                  ? "stopping on a signal"
                                   : step_ == o_.train_steps ? "final"
                                                             : "interval"));
      if (signal != 0) {
        common::LogError("stopped by signal {} after step {}{}", signal, step_,
                         o_.save.empty() ? " (no --save: nothing kept)" : "; resume with --load " + o_.save);
        return kExitSignalled;
      }
    }
  }
  if (!o_.export_safetensors.empty()) {
    std::vector<NamedTensor> tensors;
    for (const TensorSpec& spec : model_->layout().tensors()) {
      tensors.push_back({spec.name, spec.shape, model_->params().data() + spec.offset});
    }
    common::Json config = ToJson(o_.model);
    SRUNWAY_RETURN_IF_ERROR(
        WriteSafetensors(o_.export_safetensors, tensors, {{"srunway_model", config.dump()}, {"format", "pt"}}));
    common::LogInfo("exported weights to {}", o_.export_safetensors);
  }
  return kExitOk;
}

int Trainer::Run() {
  if (common::Status status = Setup(); !status.ok()) {
    common::LogError("{}", status.message());
    return status.code() == common::StatusCode::kInvalidArgument ? kExitUsage : kExitError;
  }
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGUSR1, OnStopSignal);
  auto code = Loop();
  if (!code.ok()) {
    common::LogError("{}", code.status().message());
    return kExitError;
  }
  if (*code != kExitOk) return *code;
  if (o_.sample_tokens > 0) return Sample();
  return kExitOk;
}

}  // namespace

int Train(const TrainOptions& options) { return Trainer(options).Run(); }

}  // namespace srunway::trainer
