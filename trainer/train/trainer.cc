// The training loop.
#include "trainer/train/trainer.h"

#include <cblas.h>
#include <fmt/format.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <array>
#include <cassert>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <optional>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <variant>

#define XXH_INLINE_ALL  // xxHash's header alone (see trainer/meson.build)
#include <xxhash.h>

#include "common/env.h"
#include "common/fs.h"
#include "common/heartbeat.h"
#include "common/log.h"
#include "common/parse.h"
#include "launcher/bootstrap.h"
#include "launcher/comm_factory.h"
#include "launcher/cpu_share.h"
#include "trainer/ckpt/checkpoint.h"
#include "trainer/ckpt/safetensors.h"
#include "trainer/ckpt/save_lease.h"
#include "trainer/ckpt/weights.h"
#include "trainer/data/samples.h"
#include "trainer/data/tokenizer.h"
#include "trainer/model/model.h"
#include "trainer/device/device.h"
#include "trainer/device/host_memory.h"
#include "trainer/model/rng.h"
#include "trainer/optim/adamw.h"
#include "trainer/ops/cpu/ops.h"
#include "trainer/optim/schedule.h"
#include "trainer/train/grad_reducer.h"
#include "trainer/train/progress_log.h"
#include "trainer/train/replicas.h"
#include "trainer/train/tensorboard.h"

namespace srunway::trainer {
namespace {

// A test hook's RANK:VALUE in `variable`: a rank below `ranks` and a value from `low` to `high`; nullopt where the
// variable is unset or says anything else.
std::optional<std::pair<int, int64_t>> RankHook(const char* variable, int ranks, int64_t low, int64_t high) {
  const auto text = common::GetEnv(variable);
  if (!text) return std::nullopt;
  const auto parts = common::Split(*text, ':');
  if (parts.size() != 2) return std::nullopt;
  const auto rank = common::ParseInt(parts[0], fmt::format("{} rank", variable), 0, ranks - 1);
  const auto value = common::ParseInt(parts[1], fmt::format("{} value", variable), low, high);
  if (!rank.ok() || !value.ok()) return std::nullopt;
  return std::pair{static_cast<int>(*rank), *value};
}

using Clock = std::chrono::steady_clock;

// `path` made absolute and lexically normal, without a trailing separator ("./ckpt/" -> "/home/me/ckpt").
std::filesystem::path NormalPath(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path normal = std::filesystem::absolute(path, ec).lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

// Whether two flags name one directory: "ckpt", "ckpt/" and "./ckpt" do, and so does a link to it.
bool SamePath(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) || NormalPath(a) == NormalPath(b);
}

// Whether `path` is `dir` or one of its entries ("ckpt/iter_0000010" of "ckpt"): what the checkpoint pointer in
// `dir` may name.
bool SameOrEntryOf(const std::filesystem::path& path, const std::filesystem::path& dir) {
  return !path.empty() && (SamePath(path, dir) || SamePath(NormalPath(path).parent_path(), dir));
}

// The threads a rank asked for (--threads, OMP_NUM_THREADS, Slurm's --cpus-per-task), or 0 where it asked for
// none and takes its share of the CPUs it may run on (Trainer::CpuShare).
int ThreadCount(int requested) {
  if (requested > 0) return std::min(requested, kMaxThreads);
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0') {
    auto parsed = common::ParseInt(env, "OMP_NUM_THREADS", 1, kMaxThreads);
    if (parsed.ok()) return static_cast<int>(*parsed);
    common::LogWarn("{}; using the CPU count", parsed.status().message());
  }
  // Slurm's --cpus-per-task: ranks that share a node without pinning (task/none) would otherwise each take
  // every CPU and oversubscribe it.
  if (auto per_task = common::GetEnv("SLURM_CPUS_PER_TASK")) {
    auto parsed = common::ParseInt(*per_task, "SLURM_CPUS_PER_TASK", 1, kMaxThreads);
    if (parsed.ok()) return static_cast<int>(*parsed);
  }
  return 0;
}

// fp32 matmul FLOP/s of this process with its threads, through the trainer's own matmul, over three products
// after a first: what one rank can do while the others do the same (Trainer::MeasureCpuPeak).
double MeasureSgemmFlops() {
  const int n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  cpu::MatmulForward(c.data(), a.data(), b.data(), nullptr, n, n, n);
  constexpr int kProducts = 3;
  const auto start = Clock::now();
  for (int i = 0; i < kProducts; ++i) cpu::MatmulForward(c.data(), a.data(), b.data(), nullptr, n, n, n);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return kProducts * 2.0 * n * n * n / seconds;
}

// A GPU's dense bf16 peak in FLOP/s (the vendor's data sheet, without sparsity), or 0 for one not listed.
double GpuPeakFlops(const std::string& name) {
  struct Known {
    const char* part;
    double tflops;
  };
  // The first match wins: the PCIe and NVL parts before the SXM ones they share a name with.
  static constexpr Known kKnown[] = {{"H100 PCIe", 756}, {"H100 NVL", 835}, {"H100", 989.4}, {"H200", 989.4},
                                     {"H800", 989.4},     {"GH200", 989.4},  {"A100", 312},   {"A800", 312},
                                     {"L40S", 362},       {"L4", 121},       {"A10", 125}};
  for (const Known& known : kKnown) {
    if (name.find(known.part) != std::string::npos) return known.tflops * 1e12;
  }
  return 0;
}

// --metrics-file: one JSON object per line, appended (a resumed run carries on the same file). A line that cannot
// be written whole (a full disk) is taken back out, so that the file stays whole lines: its first part stayed, and
// the resumed run's first line was appended to it, one corrupt line in the middle of the file.
class MetricsFile {
 public:
  // `resumed_at`: the run goes on from this step of an earlier run's checkpoint (--load), whose lines for later
  // steps (written after that checkpoint, before it was preempted or crashed) are dropped, as TensorBoard's
  // purge_step does: they were kept, and every such step was in the file twice, with two losses.
  common::Status Open(const std::string& path, std::optional<int64_t> resumed_at) {
    if (path.empty()) return common::Status::Ok();
    path_ = path;
    if (resumed_at) SRUNWAY_RETURN_IF_ERROR(DropAfter(*resumed_at));
    SRUNWAY_ASSIGN_OR_RETURN(fd_, common::OpenToWrite(path, O_CREAT | O_APPEND));
    return common::Status::Ok();
  }
  common::Status DropAfter(int64_t step) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path_, ec)) return common::Status::Ok();
    SRUNWAY_ASSIGN_OR_RETURN(std::string text, common::ReadFile(path_));
    std::string kept;
    int64_t dropped = 0;
    for (std::string_view line : common::Split(text, '\n')) {
      if (line.empty()) continue;
      // Lines that are not ours (no step) stay as they are.
      auto json = common::ParseJson(line, path_);
      const bool later = json.ok() && json->is_object() && json->contains("step") && (*json)["step"].is_number() &&
                         (*json)["step"].get<double>() > static_cast<double>(step);
      if (later) {
        ++dropped;
        continue;
      }
      kept.append(line);
      kept.push_back('\n');
    }
    if (dropped == 0) return common::Status::Ok();
    SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(path_, kept));
    common::LogInfo("--metrics-file {}: dropped {} line{} of steps after {}, where this run resumes", path_, dropped,
                    dropped == 1 ? "" : "s", step);
    return common::Status::Ok();
  }

  common::Status Write(const common::Json& line) {
    if (fd_.get() < 0) return common::Status::Ok();
    return common::AppendWhole(fd_.get(), line.dump() + "\n", "metrics file " + path_);
  }

 private:
  std::string path_;
  common::Fd fd_;
};

struct Batch {
  std::vector<int32_t> tokens, targets;
  int64_t scored = 0;  // the positions with a loss (a target)
};

// `unscored` (not negative: --eod-mask-loss's end-of-document token): positions whose input token it is get the
// target -1, no loss.
common::Status FillBatch(SampleSource& source, int64_t first_sample, int B, int T, Batch& batch, int32_t unscored) {
  batch.tokens.resize(static_cast<size_t>(B) * T);
  batch.targets.resize(static_cast<size_t>(B) * T);
  std::vector<int32_t> sample;
  for (int b = 0; b < B; ++b) {
    SRUNWAY_RETURN_IF_ERROR(source.Sample(first_sample + b, sample));
    std::copy(sample.begin(), sample.begin() + T, batch.tokens.begin() + static_cast<int64_t>(b) * T);
    std::copy(sample.begin() + 1, sample.begin() + T + 1, batch.targets.begin() + static_cast<int64_t>(b) * T);
  }
  if (unscored >= 0) {
    for (size_t i = 0; i < batch.tokens.size(); ++i) {
      if (batch.tokens[i] == unscored) batch.targets[i] = -1;
    }
  }
  batch.scored = std::count_if(batch.targets.begin(), batch.targets.end(), [](int32_t t) { return t >= 0; });
  return common::Status::Ok();
}

// What a checkpoint's run kept of its settings beside its state (TrainingState::extra), each value checked: the
// header is JSON that anyone may have edited, and a value of another type threw out of nlohmann's value(), which
// ended srunway-train with an abort instead of a line.
struct SavedSettings {
  int64_t global_batch = 0, seq_length = 0;  // 0: not kept
  std::optional<int64_t> train_samples;
  int64_t adam_steps = 0;
  int64_t skipped_steps = 0, skipped_samples = 0;  // --iterations-to-skip's so far
  std::string next_sample;  // empty: not kept
  std::optional<double> flops;  // the floating-point operations done, by Megatron's count (--log-progress)
};

common::StatusOr<SavedSettings> ReadSavedSettings(const common::Json& extra, int64_t step, const std::string& from) {
  const std::string where = from + ": the run's settings";
  auto read = [&]() -> common::StatusOr<SavedSettings> {
    SavedSettings saved;
    SRUNWAY_ASSIGN_OR_RETURN(saved.global_batch, common::JsonFieldOr<int64_t>(extra, "global_batch_size", 0, where));
    SRUNWAY_ASSIGN_OR_RETURN(saved.seq_length, common::JsonFieldOr<int64_t>(extra, "seq_length", 0, where));
    if (extra.contains("train_samples")) {
      SRUNWAY_ASSIGN_OR_RETURN(saved.train_samples, common::JsonField<int64_t>(extra, "train_samples", where));
    }
    // Written before AdamW's own count was kept: its moments were as old as the run.
    SRUNWAY_ASSIGN_OR_RETURN(saved.adam_steps, common::JsonFieldOr<int64_t>(extra, "adam_steps", step, where));
    if (saved.adam_steps < 0 || saved.adam_steps > step) {
      return common::InvalidArgument("{}: adam_steps {} is not in [0, the step {}]", where, saved.adam_steps, step);
    }
    SRUNWAY_ASSIGN_OR_RETURN(saved.skipped_steps, common::JsonFieldOr<int64_t>(extra, "skipped_steps", 0, where));
    SRUNWAY_ASSIGN_OR_RETURN(saved.skipped_samples,
                             common::JsonFieldOr<int64_t>(extra, "skipped_train_samples", 0, where));
    if (saved.skipped_steps < 0 || saved.skipped_steps > step || saved.skipped_samples < 0) {
      return common::InvalidArgument("{}: skipped_steps {} is not in [0, the step {}], or skipped_train_samples {} "
                                     "is negative", where, saved.skipped_steps, step, saved.skipped_samples);
    }
    if (extra.contains("next_sample")) {
      SRUNWAY_ASSIGN_OR_RETURN(saved.next_sample, common::JsonField<std::string>(extra, "next_sample", where));
    }
    if (extra.contains("floating_point_operations")) {
      SRUNWAY_ASSIGN_OR_RETURN(saved.flops, common::JsonField<double>(extra, "floating_point_operations", where));
    }
    return saved;
  };
  auto saved = read();
  if (!saved.ok()) return common::DataLoss("{}", saved.status().message());  // a damaged file, not a usage error
  return saved;
}

// The tokenizer's files: --tokenizer-model's, or --vocab-file and --merge-file; else those srunway-prep wrote
// beside the (first) dataset.
common::StatusOr<TokenizerSource> TokenizerPaths(const TrainOptions& o) {
  if (auto given = TokenizerSource::Given(o.tokenizer_model, o.tokenizer_type, o.vocab_file, o.merge_file)) {
    return *given;
  }
  auto paths = ParseDataPath(o.train_data_path.empty() ? o.data_path : o.train_data_path);
  if (!paths.ok()) return paths.status();
  return TokenizerBeside(paths->front().prefix);
}

using TokenizerRef = std::shared_ptr<const Tokenizer>;

// The tokenizer for --sample, the end of document, the model's vocabulary and --export-hf: the one srunway-train's
// flags loaded, else TokenizerPaths' files.
common::StatusOr<TokenizerRef> FindTokenizer(const TrainOptions& o) {
  if (o.tokenizer) return o.tokenizer;
  SRUNWAY_ASSIGN_OR_RETURN(TokenizerSource source, TokenizerPaths(o));
  auto loaded = source.Load();
  if (!loaded.ok()) return loaded.status();
  return std::make_shared<const Tokenizer>(std::move(*loaded));
}

// `parts` of a buffer on a GPU, brought to the host one after another.
common::StatusOr<std::vector<float>> DownloadRanges(Device& device, std::span<const float> buffer,
                                                    const std::vector<ParamRange>& parts) {
  size_t total = 0;
  for (const ParamRange& part : parts) total += static_cast<size_t>(part.count);
  std::vector<float> host(total);
  size_t at = 0;
  for (const ParamRange& part : parts) {
    SRUNWAY_RETURN_IF_ERROR(device.CopyToHost(host.data() + at, buffer.data() + part.offset,
                                              static_cast<size_t>(part.count) * sizeof(float), device.main_stream()));
    at += static_cast<size_t>(part.count);
  }
  SRUNWAY_RETURN_IF_ERROR(device.Synchronize(device.main_stream()));
  return host;
}

common::StatusOr<std::vector<int32_t>> Generate(Model& model, std::vector<int32_t> context, int count, int top_k,
                                                Rng& rng) {
  const int T = model.config().seq_len;
  for (int i = 0; i < count; ++i) {
    const int n = std::min<int>(static_cast<int>(context.size()), T);
    model.Forward(context.data() + context.size() - n, nullptr, 1, n);
    SRUNWAY_ASSIGN_OR_RETURN(std::vector<float> logits, model.Logits(0, n - 1));
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

// What each rank tells the others after every step: its share of the loss, where its time went, and whether a
// signal reached it. Gathered as bytes; every rank reads them in rank order, so sums come out the same everywhere.
struct RankStep {
  double loss = 0;        // this rank's micro-batch losses / micro-batches on all ranks (per token: their sum)
  double scored = 0;      // the positions with a loss in this rank's micro-batches
  double compute_ms = 0;  // forward and backward
  double comm_ms = 0;     // waiting for gradient reductions after the backward
  int32_t signal = 0;      // a signal this rank has seen, or kTimeUp
  int32_t pad = 0;
};
constexpr int32_t kTimeUp = -1;  // --exit-duration-in-mins has passed on this rank
constexpr int32_t kExitInterval = -2;  // --exit-interval: every rank reaches it at the same step

// --timing-log-level's timers, Megatron's names, in the order it prints them, each with the level that shows it.
enum Timer { kForwardBackward, kForwardCompute, kBackwardCompute, kBatchGenerator, kAllGradsSync, kClipMainGrad,
             kInnerStep, kOptimizer, kTimers };
constexpr std::pair<const char*, int> kTimerNames[kTimers] = {
    {"forward-backward", 1}, {"forward-compute", 2},          {"backward-compute", 2},     {"batch-generator", 2},
    {"all-grads-sync", 1},   {"optimizer-clip-main-grad", 2}, {"optimizer-inner-step", 2}, {"optimizer", 1}};
// Milliseconds each timer has run on this rank since the last log step.
struct Timers {
  double ms[kTimers] = {};
};

class Trainer {
 public:
  Trainer(const TrainOptions& options, const volatile std::sig_atomic_t* stop_signal, const GpuOpsFactory& gpu_ops)
      : o_(options), stop_signal_(stop_signal), gpu_ops_(gpu_ops) {}
  std::variant<TrainResult, TrainError> Run();
  [[noreturn]] void EndStep(const common::Status& status);

 private:
  common::Status Connect();
  common::Status OpenDevice();
  // Host values exchanged through the communicator, whose buffers may be GPU memory: `bytes` from each rank into
  // `all` (ranks x bytes), and one int32 from `root`.
  common::Status HostAllGather(const void* mine, void* all, size_t bytes);
  // --timing-log-level: the time since `since` into timer `t`, the device drained first where the level shows it.
  void Time(Timers& timers, Timer t, Clock::time_point since);
  // At a log step, on every rank: the ranks' timers, as (min, max) of their mean per step; printed by the leader,
  // and written to TensorBoard with --log-timers-to-tensorboard.
  common::Status LogTimers(const Timers& timers, int64_t steps);
  common::Status HostBroadcast(int32_t& value, int root);
  // MFU's peak on CPUs: the ranks' sgemm rates, measured by all of them at once, as they train (ranks that share a
  // node share its cores here too), averaged over the ranks, so that peak x ranks is what the machines can do. One
  // rank's own rate, measured while its peers were busy or idle, moved the quickstart's MFU from 30% to 39%.
  common::StatusOr<double> MeasureCpuPeak();
  // The threads of a rank that asked for none (ThreadCount): the CPUs it may run on, shared with the ranks of its
  // node that may run on any of them. Ranks that Slurm did not pin (no --cpus-per-task, no binding) each see all of
  // a node's CPUs, and as many threads each oversubscribed them: 4 ranks of 2 threads on 2 cores made steps 3 to 4x
  // slower. Pinned ranks, whose CPU sets are apart, keep theirs. `shared` says whether others share them.
  common::StatusOr<int> CpuShare(bool* shared);
  common::Status BuildModel();
  // The first failure of the device's work since the last call, saying which GPU on which host.
  common::Status DeviceStatus();
  common::Status InitOrLoad();
  common::Status Setup();
  common::Status AgreeOnConfig();
  common::Status CheckSaveDir();
  // A start-up step every rank takes: they agree on it before anyone goes on, `mine` being this rank's outcome.
  common::Status AgreeOnOutcome(common::Status mine, common::StatusCode code, std::string_view could_not);
  // A checkpoint in --save, or with `non_persistent` in the non-persistent checkpoints' directory, once ZeRO-1's
  // gather of the weights in flight has arrived; how long it took is kept (last_save_s_).
  common::Status Save(const char* why, bool non_persistent = false);
  common::Status WriteCheckpoint(const char* why, bool non_persistent);
  // --log-progress (rank 0): `event` appended to --save's progress.txt; a failure is said, and training goes on.
  void LogProgress(std::string_view event);
  void LogSavedProgress();  // the "Saved checkpoint" line, with the throughputs
  std::filesystem::path ProgressPath() const;  // --save's progress.txt
  // What a checkpoint records of the run beside the state: the data and how it is batched and sharded, and a
  // fingerprint of the next sample the run would draw.
  common::Json RunSettings();
  // The learning-rate and weight-decay schedules as a checkpoint keeps them, under Megatron's names.
  common::Json ScheduleJson() const;
  // --use-checkpoint-opt_param-scheduler: the schedules a checkpoint's `extra` kept replace the flags'; one line
  // says what of them differs.
  common::Status TakeSchedule(const common::Json& extra, const std::string& from);
  // A checkpoint's timed choices (its `extra`) given back to the ops, so that the resumed run computes as the run
  // that saved them did; a line where they cannot be taken.
  void KeepTimedChoices(const common::Json& extra, const std::string& from);
  std::string NextSample();  // XXH3-64 of sample consumed_ in hex ("" if it cannot be read)
  int64_t TrainSamples() const { return ramp_.SamplesOf(o_.train_steps); }  // the samples of --train-steps
  common::StatusOr<double> Evaluate();
  // Evaluate, then its line on stdout and in --metrics-file (rank 0).
  common::Status Validation();
  // --tensorboard-dir: the scalars at this step, and again under "TAG vs samples" at the samples consumed.
  common::Status WriteEvents(std::vector<Scalar> scalars);
  common::StatusOr<double> SumOverRanks(double mine);
  // The L2 norm of the fp32 parameters (Megatron's --log-params-norm); a collective under ZeRO-1 on GPUs, where
  // each rank holds its slices of them.
  common::StatusOr<double> ParamsNorm();
  // `of` (an Ops sum: SumOfSquares, CountZeros) over the step's reduced gradients, on every rank: the whole buffer,
  // or under ZeRO-1, where each rank has reduced its slices alone, theirs summed over the ranks.
  template <typename Of>
  common::StatusOr<double> OverReducedGrads(Of of);
  // --check-weight-hash-across-dp-replicas-interval, on every rank: the ranks' hashes of the weights the ops read
  // (whole on every rank once ZeRO-1's gather has arrived) and of the fp32 parameters where they are whole and
  // apart from them, compared; empty where they agree, else DescribeReplicas'.
  common::StatusOr<std::string> CompareReplicas();
  // SRUNWAY_TRAIN_FLIP_WEIGHT's fault: a bit of the first parameter flipped (the lowest its bf16 form holds), in the
  // fp32 parameters where the rank holds them whole (a fault that lasts), else (ZeRO-1) in the weights the ops read,
  // which the next step's gather writes over.
  common::Status FlipWeightBit();
  common::StatusOr<TrainResult> Loop();
  // --iterations-to-skip: the next step's samples passed over, untrained, on every rank alike.
  void SkipStep();
  common::StatusOr<std::vector<RankStep>> ExchangeStep(const RankStep& mine);
  void WatchStragglers(const std::vector<RankStep>& steps, bool log_step, common::Json& line);
  void Print(std::string_view text);
  common::Status CheckEndOutputs();
  // The data's tokenizer (FindTokenizer's), or why there is none: loaded the first time a flag needs it, and kept.
  const common::StatusOr<TokenizerRef>& DataTokenizer();
  std::optional<HfTokenizer> ExportTokenizer(std::string& none);
  common::Status Export();
  common::Status Sample();
  std::string Host(int rank) const;
  bool Leader() const { return rank_ == 0; }

  TrainOptions o_;
  const volatile std::sig_atomic_t* stop_signal_;
  GpuOpsFactory gpu_ops_;
  std::unique_ptr<launcher::Bootstrap> boot_;
  std::unique_ptr<launcher::Comm> comm_;
  launcher::Buffer exchange_;  // the communicator's memory for HostAllGather and HostBroadcast
  std::unique_ptr<Device> device_;
  std::unique_ptr<Ops> ops_;
  int rank_ = 0, world_ = 1;
  bool setup_error_everywhere_ = false;  // the error came from the flags, which every rank has
  bool error_said_elsewhere_ = false;    // another rank's failure, which that rank reports
  bool peers_know_ = false;              // this rank's failure was agreed on (AgreeOnOutcome): the peers end too
  std::optional<common::StatusOr<TokenizerRef>> tokenizer_;  // DataTokenizer's
  std::vector<int32_t> sample_context_;  // --sample's prompt, encoded
  int B_ = 0, T_ = 0, accum_ = 1;        // accum_: micro-batches per step on this rank (at the whole batch)
  BatchRamp ramp_;  // the global batch of each step (--rampup-batch-size)
  int32_t eod_ = -1;       // the tokenizer's end of document, where a flag needs it
  int32_t unscored_ = -1;  // --eod-mask-loss: the end-of-document token, whose positions have no loss
  std::unique_ptr<Model> model_;
  std::unique_ptr<AdamW> adam_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<SampleSource> train_, valid_;
  LrSchedule schedule_;
  WeightDecaySchedule weight_decay_;  // --weight-decay-incr-style's
  bool schedule_in_samples_ = false;  // its warmup and decay are samples (o_.warmup_steps and lr_decay_steps too)
  Rng rng_;
  int64_t step_ = 0, consumed_ = 0;
  int64_t adam_steps_ = 0;  // AdamW's steps since its moments were zero: step_ unless --no-load-optim reset them
  // --iterations-to-skip's steps and their samples so far, which the schedules do not count (as Megatron's, whose
  // scheduler steps with the optimizer).
  int64_t skipped_steps_ = 0, skipped_samples_ = 0;
  int64_t went_back_to_ = -1;  // --ckpt-step's step, kept in the checkpoints this run saves; -1: none
  double peak_flops_ = 0;
  // The floating-point operations trained so far by Megatron's count, the jobs this one resumed from included
  // (Megatron's num_floating_point_operations_so_far), and the count when this job started.
  double flops_ = 0, flops_at_start_ = 0;
  MetricsFile metrics_;
  EventFile events_;  // --tensorboard-dir
  std::optional<common::Heartbeat> heartbeat_ = common::Heartbeat::FromEnvironment();
  std::unique_ptr<SaveLease> lease_;  // rank 0's, on --save while this run trains
  std::vector<int> straggler_streak_;
  Clock::time_point started_ = Clock::now();
  std::time_t job_started_ = std::time(nullptr);
  std::optional<Clock::time_point> signal_seen_;  // when this rank first saw a stop signal
  double last_save_s_ = 0;                        // how long the last save took
  bool stdout_lost_ = false;                      // a write to stdout failed: Print writes no more
  std::optional<std::pair<int, int64_t>> slow_rank_ms_;  // SRUNWAY_TRAIN_SLOW_RANK=RANK:MS, a test hook
  // SRUNWAY_TRAIN_FLIP_WEIGHT=RANK:STEP, a test hook: rank RANK flips a bit of its weights after step STEP, as a
  // fault in its memory would.
  std::optional<std::pair<int, int64_t>> flip_weight_;
};

// The rank's place in the job: the launcher's bootstrap (PMIx under srun --mpi=pmix, Slurm's or torchrun's
// environment, or one rank), its device, and a communicator for that device's memory (NCCL for GPUs; MPI across
// CPU ranks, self for one).
common::Status Trainer::Connect() {
  const auto timeout = common::TimeoutMillis(o_.distributed_timeout_min * 60);
  // A failed start-up exchange may end the step (PMIx_Abort) before Train() returns: say why first.
  auto report = [](const common::Status& failure) { common::LogError("{}", failure.message()); };
  SRUNWAY_ASSIGN_OR_RETURN(boot_, launcher::CreateBootstrap(launcher::BootstrapKind::kAuto, timeout, report));
  rank_ = boot_->identity().rank;
  world_ = boot_->identity().size;
  SRUNWAY_RETURN_IF_ERROR(OpenDevice());
  launcher::CommOptions options;
  options.timeout = timeout;
  options.on_stuck = [this](const common::Status& stuck) {
    EndStep(common::Status(stuck.code(), fmt::format("{} (--distributed-timeout-minutes {:g}); ending the step",
                                                     stuck.message(), o_.distributed_timeout_min)));
  };
  const bool gpu = device_->kind() == DeviceKind::kCuda;
  const launcher::CommKind kind = gpu ? launcher::CommKind::kNccl
                                  : world_ > 1 ? launcher::CommKind::kMpi : launcher::CommKind::kSelf;
  auto comm = launcher::CreateComm(kind, *boot_, options);
  if (!comm.ok()) {
    return common::Status(comm.status().code(),
                           gpu ? fmt::format("gradients on GPUs travel through NCCL: {}", comm.status().message())
                               : fmt::format("data parallelism over {} ranks needs MPI (run under srun --mpi=pmix): {}",
                                             world_, comm.status().message()));
  }
  comm_ = std::move(*comm);
  straggler_streak_.assign(static_cast<size_t>(world_), 0);
  slow_rank_ms_ = RankHook("SRUNWAY_TRAIN_SLOW_RANK", world_, 0, 600'000);
  flip_weight_ = RankHook("SRUNWAY_TRAIN_FLIP_WEIGHT", world_, 1, int64_t{1} << 40);
  return common::Status::Ok();
}

// The rank's GPU or the host, as --device says, and the ops for it. The ranks agree: all on GPUs or all on CPUs,
// since their gradients meet in one communicator.
common::Status Trainer::OpenDevice() {
  auto choice = ParseDeviceChoice(o_.device);
  if (common::Status switches = CheckGpuSwitches(); !choice.ok() || !switches.ok()) {
    setup_error_everywhere_ = true;  // srun hands every rank the same flags and environment
    return choice.ok() ? switches : choice.status();
  }
  std::string note;
  const launcher::Identity& me = boot_->identity();
  auto device = trainer::OpenDevice(*choice, me.local_rank, me.local_size, &note);
  common::Status opened = device.status();
  if (device.ok() && (*device)->kind() == DeviceKind::kCuda) {
    auto ops = gpu_ops_ ? gpu_ops_(**device)
                        : common::StatusOr<std::unique_ptr<Ops>>(common::FailedPrecondition(
                              "this program was built without the trainer's CUDA kernels"));
    if (ops.ok()) {
      ops_ = std::move(*ops);
    } else if (*choice == DeviceChoice::kAuto) {
      note = fmt::format("training on the CPU: {}", ops.status().message());
      device = NewCpuDevice(me.local_size);
    } else {
      opened = ops.status();
    }
  }
  if (device.ok() && (*device)->kind() == DeviceKind::kCpu) ops_ = NewCpuOps();
  if (opened.ok()) device_ = std::move(*device);

  const std::string mine = !opened.ok() ? "none" : device_->kind() == DeviceKind::kCuda ? "cuda" : "cpu";
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<std::string> all, boot_->AllGather(mine, "training device"));
  if (!opened.ok()) return opened;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] == "none") {
      error_said_elsewhere_ = true;
      return common::FailedPrecondition("{} could not open its device (its line says why)",
                                        boot_->NameRank(static_cast<int>(r)));
    }
  }
  const auto gpus = std::count(all.begin(), all.end(), "cuda");
  if (gpus != 0 && gpus != world_) {
    setup_error_everywhere_ = true;
    const int cpu = static_cast<int>(std::find(all.begin(), all.end(), "cpu") - all.begin());
    return common::FailedPrecondition("{} of {} ranks have a GPU but {} has none: every rank must train on the same "
                                      "kind of device (--device cpu, or GPU nodes for all)", gpus, world_,
                                      boot_->NameRank(cpu));
  }
  if (o_.deterministic_mode && gpus != 0) {
    setup_error_everywhere_ = true;
    return common::InvalidArgument("--deterministic-mode: the GPU path adds gradients with atomics (the embedding's "
                                   "and attention's backward), whose order changes from run to run; --device cpu "
                                   "gives the same bits on every run and any number of threads");
  }
  if (Leader()) common::LogInfo("{}", note.empty() ? fmt::format("training on {}", device_->name()) : note);
  if (Leader() && o_.bf16 && device_->kind() == DeviceKind::kCpu) {
    common::LogInfo("--bf16: the CPU path computes in fp32 (bf16 is the GPU path's)");
  }
  if (o_.fp32_split_k_sums && !ops_->KeepSplitKSumsFp32() && Leader()) {
    common::LogInfo("--disable-bf16-reduced-precision-matmul: the CPU path sums in fp32 throughout");
  }
  return common::Status::Ok();
}

common::Status Trainer::HostAllGather(const void* mine, void* all, size_t bytes) {
  const size_t needed = bytes * static_cast<size_t>(world_ + 1);
  if (exchange_.bytes() < needed) {
    SRUNWAY_ASSIGN_OR_RETURN(exchange_, comm_->Allocate(needed));
  }
  uint8_t* send = exchange_.data() + bytes * static_cast<size_t>(world_);
  SRUNWAY_RETURN_IF_ERROR(comm_->Upload(send, mine, bytes));
  SRUNWAY_RETURN_IF_ERROR(comm_->AllGather(send, exchange_.data(), bytes, launcher::DataType::kUInt8));
  return comm_->Download(all, exchange_.data(), bytes * static_cast<size_t>(world_));
}

void Trainer::Time(Timers& timers, Timer t, Clock::time_point since) {
  if (o_.timing_log_level < kTimerNames[t].second) return;
  (void)device_->Synchronize(device_->main_stream());  // a failure surfaces at the step's DeviceStatus
  timers.ms[t] += std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

common::Status Trainer::LogTimers(const Timers& timers, int64_t steps) {
  std::vector<Timers> all(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&timers, all.data(), sizeof timers));
  if (!Leader()) return common::Status::Ok();
  // --timing-log-option, in Megatron's layouts: minmax and max one line a timer, all a line a rank under each.
  const std::string& option = o_.timing_log_option;
  std::string text = option == "all"   ? "times across ranks (ms):"
                     : option == "max" ? "max time across ranks (ms):"
                                       : "(min, max) time across ranks (ms):";
  std::vector<Scalar> scalars;
  for (int t = 0; t < kTimers; ++t) {
    if (o_.timing_log_level < kTimerNames[t].second) continue;
    const std::string name = kTimerNames[t].first;
    double low = INFINITY, high = 0;
    std::string ranks;  // all: as Megatron's, the ranks that timed it, and the timer only if any did
    for (size_t r = 0; r < all.size(); ++r) {
      const double ms = all[r].ms[t] / static_cast<double>(steps);
      low = std::min(low, ms);
      high = std::max(high, ms);
      if (ms > 0) ranks += fmt::format("\n     rank {:2d}: {:.2f}", r, ms);
    }
    if (option == "all" && !ranks.empty()) text += fmt::format("\n  {}:{}", name, ranks);
    if (option == "max") text += fmt::format("\n    {:.<48}: {:.2f}", name + " ", high);
    if (option == "minmax") text += fmt::format("\n    {:.<48}: ({:.2f}, {:.2f})", name + " ", low, high);
    scalars.push_back({name + "-time", static_cast<float>(high / 1e3)});
  }
  Print(text + "\n");
  return o_.log_timers_to_tensorboard ? events_.Write(step_, scalars) : common::Status::Ok();
}

common::Status Trainer::HostBroadcast(int32_t& value, int root) {
  if (exchange_.bytes() < sizeof value) {
    SRUNWAY_ASSIGN_OR_RETURN(exchange_, comm_->Allocate(sizeof value));
  }
  SRUNWAY_RETURN_IF_ERROR(comm_->Upload(exchange_.data(), &value, sizeof value));
  SRUNWAY_RETURN_IF_ERROR(comm_->Broadcast(exchange_.data(), 1, launcher::DataType::kInt32, root));
  return comm_->Download(&value, exchange_.data(), sizeof value);
}

common::StatusOr<double> Trainer::MeasureCpuPeak() {
  const int32_t ready = 1;
  std::vector<int32_t> everyone(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&ready, everyone.data(), sizeof ready));  // so that they start together
  const double mine = MeasureSgemmFlops();
  std::vector<double> rates(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&mine, rates.data(), sizeof mine));
  return std::accumulate(rates.begin(), rates.end(), 0.0) / world_;
}

common::StatusOr<int> Trainer::CpuShare(bool* shared) {
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<std::string> masks, boot_->AllGather(launcher::AffinityMaskText(), "cpus"));
  std::vector<std::string> hosts;
  for (const launcher::Peer& peer : boot_->peers()) hosts.push_back(peer.host);
  SRUNWAY_ASSIGN_OR_RETURN(launcher::CpuShare share, launcher::ShareOf(rank_, hosts, masks));
  *shared = share.ranks > 1;
  return std::min(share.threads(), kMaxThreads);
}

common::Status Trainer::DeviceStatus() {
  common::Status status = model_->ops().TakeError();
  if (status.ok() || device_->kind() == DeviceKind::kCpu) return status;
  return common::Status(status.code(), fmt::format("{} on {}: {}", device_->name(), Host(rank_), status.message()));
}

std::string Trainer::Host(int rank) const {
  const auto& peers = boot_->peers();
  return rank < static_cast<int>(peers.size()) ? peers[static_cast<size_t>(rank)].host : "?";
}

common::Status Trainer::Setup() {
  setup_error_everywhere_ = true;
  ModelConfig& m = o_.model;
  SRUNWAY_RETURN_IF_ERROR(Validate(m));
  T_ = o_.seq_length > 0 ? o_.seq_length : m.seq_len;
  if (T_ > m.seq_len) {
    return common::InvalidArgument("--seq-length {} is longer than the model's {} positions", T_, m.seq_len);
  }
  B_ = o_.micro_batch_size;
  if (B_ < 1) return common::InvalidArgument("--micro-batch-size must be at least 1, not {}", B_);
  int gbs = o_.global_batch_size > 0 ? o_.global_batch_size : B_ * world_;
  if (o_.decrease_batch_size && gbs % (B_ * world_) != 0 && gbs >= B_ * world_ && o_.rampup_batch_size.empty()) {
    const int fitted = gbs - gbs % (B_ * world_);
    if (Leader()) {
      common::LogWarn("--global-batch-size {} is not a multiple of --micro-batch-size {} x {} data-parallel ranks: "
                      "training with a global batch of {} (--decrease-batch-size-if-needed)", gbs, B_, world_, fitted);
    }
    gbs = fitted;
  }
  if (gbs % (B_ * world_) != 0) {
    return common::InvalidArgument(
        "--global-batch-size {} is not a multiple of --micro-batch-size {} x {} data-parallel rank{}", gbs, B_,
        world_, world_ == 1 ? "" : "s");
  }
  o_.global_batch_size = gbs;
  accum_ = gbs / (B_ * world_);
  if (!o_.rampup_batch_size.empty()) {
    const std::vector<int64_t>& r = o_.rampup_batch_size;
    SRUNWAY_ASSIGN_OR_RETURN(ramp_, BatchRamp::Make(r[0], r[1], r[2], gbs, B_, world_));
  } else {
    ramp_ = BatchRamp(gbs);
  }
  // Megatron's sample-based run with a batch ramp counts its schedule in samples, as Megatron does; otherwise the
  // sample counts become steps of the global batch.
  schedule_in_samples_ = ramp_.ramps() && o_.train_samples > 0;
  if (schedule_in_samples_) {
    for (const auto& [flag, given] : {std::pair{"--warmup-steps", o_.warmup_steps > 0},
                                      std::pair{"--lr-decay-steps", o_.lr_decay_steps > 0},
                                      std::pair{"--lr-wsd-decay-iters", o_.lr_wsd_decay_steps > 0},
                                      std::pair{"--constant-steps", o_.constant_steps > 0}}) {
      if (given) {
        return common::InvalidArgument("{} counts steps, and --rampup-batch-size with --train-samples counts the "
                                       "schedule in samples: give --lr-warmup-samples or --lr-decay-samples (as "
                                       "Megatron asks)", flag);
      }
    }
  }
  auto in_units = [gbs, this](int64_t samples) {
    return schedule_in_samples_ ? samples : samples / gbs + (samples % gbs >= (gbs + 1) / 2 ? 1 : 0);
  };
  if (o_.train_samples > 0) {
    o_.train_steps = ramp_.StepsIn(o_.train_samples);
    if (o_.train_steps < 1) {
      return common::InvalidArgument("--train-samples {} is less than one global batch of {}", o_.train_samples,
                                     ramp_.At(0));
    }
  }
  if (o_.lr_decay_samples > 0) o_.lr_decay_steps = std::max<int64_t>(1, in_units(o_.lr_decay_samples));
  if (o_.lr_warmup_samples > 0) o_.warmup_steps = in_units(o_.lr_warmup_samples);
  if (o_.lr_wsd_decay_samples > 0) o_.lr_wsd_decay_steps = std::max<int64_t>(1, in_units(o_.lr_wsd_decay_samples));
  if (o_.warmup_fraction > 1) {
    return common::InvalidArgument("--lr-warmup-fraction {} is more than the whole decay (at most 1)",
                                   o_.warmup_fraction);
  }
  const int64_t decay_units = o_.lr_decay_steps > 0     ? o_.lr_decay_steps
                              : schedule_in_samples_ ? o_.train_samples
                                                     : o_.train_steps;
  if (o_.warmup_fraction >= 0) o_.warmup_steps = std::llround(o_.warmup_fraction * static_cast<double>(decay_units));
  o_.lr_decay_steps = decay_units;
  // WSD's final decay: given with it (Megatron asserts so), and within the decay; nowhere else taken and ignored.
  const bool wsd = o_.lr_decay_style == "WSD";
  const char* wsd_flag = o_.lr_wsd_decay_samples > 0 ? "--lr-wsd-decay-samples" : "--lr-wsd-decay-iters";
  if (wsd && o_.lr_wsd_decay_steps == 0) {
    return common::InvalidArgument("--lr-decay-style WSD needs --lr-wsd-decay-iters or --lr-wsd-decay-samples, the "
                                   "length of its final decay");
  }
  if (!wsd && o_.lr_wsd_decay_steps > 0) return common::InvalidArgument("{} needs --lr-decay-style WSD", wsd_flag);
  if (wsd && o_.lr_wsd_decay_steps > decay_units) {
    return common::InvalidArgument("{} is {} {}, more than the decay's {} (--lr-decay-iters, or --train-iters)",
                                   wsd_flag, o_.lr_wsd_decay_steps, schedule_in_samples_ ? "samples" : "steps",
                                   decay_units);
  }
  if (o_.constant_steps > 0 && (wsd || o_.lr_decay_style == "inverse-square-root")) {
    return common::InvalidArgument("--constant-steps is NeMo's tail after a cosine or linear decay, not "
                                   "--lr-decay-style {}'s", o_.lr_decay_style);
  }
  if (o_.train_steps < 1) return common::InvalidArgument("--train-steps must be at least 1");
  // Samples and their tokens are counted in 64 bits: an absurd --train-steps or --eval-iters overflowed them.
  const int64_t most_samples = INT64_MAX / (int64_t{T_} + 1);
  for (const auto& [flag, count, batch] : {std::tuple{"--train-steps", o_.train_steps, gbs},
                                           std::tuple{"--eval-iters", o_.eval_iters, B_}}) {
    if (count > most_samples / batch) {
      return common::InvalidArgument("{} {} x {} samples of {} tokens is more than 64 bits count", flag, count, batch,
                                     T_ + 1);
    }
  }
  SRUNWAY_RETURN_IF_ERROR(ops_->CheckHeadSize(m.head_dim()));
  for (const auto& [flag, value, least] : {std::tuple{"--warmup-steps", o_.warmup_steps, int64_t{0}},
                                           std::tuple{"--log-interval", o_.log_interval, int64_t{1}},
                                           std::tuple{"--eval-iters", o_.eval_iters, int64_t{0}},
                                           std::tuple{"--save-interval", o_.save_interval, int64_t{0}},
                                           std::tuple{"--constant-steps", o_.constant_steps, int64_t{0}},
                                           std::tuple{"--sample", int64_t{o_.sample_tokens}, int64_t{0}},
                                           std::tuple{"--sample-top-k", int64_t{o_.sample_top_k}, int64_t{1}},
                                           std::tuple{"--keep-checkpoints", int64_t{o_.keep_checkpoints}, int64_t{0}},
                                           std::tuple{"--save-retain-interval", o_.save_retain_interval, int64_t{0}},
                                           std::tuple{"--threads", int64_t{o_.threads}, int64_t{0}}}) {
    if (value < least) return common::InvalidArgument("{} must be at least {}, not {}", flag, least, value);
  }
  // Megatron asserts as much: else the checkpoints it keeps would never be written.
  if (o_.save_retain_interval > 0 && (o_.save_interval == 0 || o_.save_retain_interval % o_.save_interval != 0)) {
    return common::InvalidArgument("--save-retain-interval {} is not a multiple of --save-interval {}",
                                   o_.save_retain_interval, o_.save_interval);
  }
  if (!o_.mock_data && o_.data_path.empty() && o_.train_data_path.empty()) {
    return common::InvalidArgument("give --data-path, --train-data-path or --mock-data");
  }
  if (o_.skip_train && o_.eval_iters == 0 && o_.export_safetensors.empty() && o_.export_hf.empty() &&
      o_.sample_tokens == 0) {
    return common::InvalidArgument("--skip-train has nothing to do: --eval-iters 0, and no --export, --export-hf or "
                                   "--sample");
  }
  if (o_.finetune && o_.load.empty()) {
    return common::InvalidArgument("--finetune needs --load, the checkpoint to start from");
  }
  // Without --load, --no-load-optim has nothing to leave out (a pasted script that always passes it trains from
  // scratch, as it says).
  const char* fresh_start = o_.finetune ? "--finetune" : o_.no_load_optim ? "--no-load-optim" : nullptr;
  std::vector<std::pair<std::string, std::string>> starts;  // each flag naming a checkpoint to start afresh from
  if (fresh_start != nullptr && !o_.load.empty()) starts.emplace_back(fmt::format("{} --load", fresh_start), o_.load);
  if (!o_.pretrained_checkpoint.empty()) starts.emplace_back("--pretrained-checkpoint", o_.pretrained_checkpoint);
  for (const auto& [flag, start] : starts) {
    if (!SameOrEntryOf(start, o_.save)) continue;
    return common::InvalidArgument("{} {} is in the --save directory: a requeued job could not tell its own "
                                   "checkpoints from the one it started from; --save elsewhere", flag, start);
  }
  if (WeightsFile(o_.load) && !o_.finetune && !o_.skip_train) {
    return common::InvalidArgument("--load {} holds weights alone (no step, optimizer state or data position) to "
                                   "resume: add --finetune to train from them, or --skip-train to evaluate them",
                                   o_.load);
  }
  if (!ParseDecayStyle(o_.lr_decay_style).ok()) return ParseDecayStyle(o_.lr_decay_style).status();
  // The non-persistent checkpoints' directory keeps only its newest: --save's would lose the others.
  if (SamePath(o_.non_persistent_dir, o_.save)) {
    return common::InvalidArgument("--non-persistent-global-ckpt-dir {} is --save's directory: it keeps only its "
                                   "newest checkpoint, so it needs a directory of its own", o_.non_persistent_dir);
  }
  if (o_.profile_last_step == 0 && (o_.profile_step < 0 || o_.profile_step > o_.train_steps)) {
    return common::InvalidArgument("--profile-step {} is not a step of this run (1 to --train-steps {})",
                                   o_.profile_step, o_.train_steps);
  }
  if (o_.profile_last_step > 0 && (o_.profile_step < 1 || o_.profile_last_step < o_.profile_step ||
                                   o_.profile_last_step > o_.train_steps)) {
    return common::InvalidArgument("--profile: steps {} to {} (--profile-step-start {} --profile-step-end {}) are "
                                   "not steps of this run (1 to --train-steps {})", o_.profile_step,
                                   o_.profile_last_step, o_.profile_step - 1, o_.profile_last_step, o_.train_steps);
  }
  // The optimizer's numbers (NaN fails every comparison, so it is refused too). Megatron likewise asserts
  // 0 <= --min-lr <= --lr.
  if (!(o_.lr >= 0 && o_.min_lr >= 0 && o_.min_lr <= o_.lr && std::isfinite(o_.lr))) {
    return common::InvalidArgument("--lr {} and --min-lr {} must satisfy 0 <= --min-lr <= --lr", o_.lr, o_.min_lr);
  }
  if (!(o_.lr_warmup_init >= 0 && o_.lr_warmup_init <= o_.lr)) {  // Megatron asserts init_lr <= max_lr too
    return common::InvalidArgument("--lr-warmup-init {} and --lr {} must satisfy 0 <= --lr-warmup-init <= --lr",
                                   o_.lr_warmup_init, o_.lr);
  }
  if (o_.decoupled_lr >= 0) {
    const bool own_min = o_.decoupled_min_lr >= 0;
    const float least = own_min ? o_.decoupled_min_lr : o_.min_lr;
    const char* least_flag = own_min ? "--decoupled-min-lr" : "--min-lr";
    if (!(least <= o_.decoupled_lr && std::isfinite(o_.decoupled_lr))) {
      return common::InvalidArgument("--decoupled-lr {} and {} {} must satisfy 0 <= {} <= --decoupled-lr",
                                     o_.decoupled_lr, least_flag, least, least_flag);
    }
  }
  if (!(o_.adam_beta1 >= 0 && o_.adam_beta1 < 1 && o_.adam_beta2 >= 0 && o_.adam_beta2 < 1)) {
    return common::InvalidArgument("--adam-beta1 {} and --adam-beta2 {} must be in [0, 1)", o_.adam_beta1,
                                   o_.adam_beta2);
  }
  if (!(o_.adam_eps > 0 && std::isfinite(o_.adam_eps))) {
    return common::InvalidArgument("--adam-eps {} must be positive and finite", o_.adam_eps);
  }
  if (!(o_.weight_decay >= 0 && std::isfinite(o_.weight_decay))) {
    return common::InvalidArgument("--weight-decay {} must be finite and not negative", o_.weight_decay);
  }
  // Megatron's: constant takes --weight-decay, the others both ends (and its asserts say so).
  const bool wd_changes = o_.weight_decay_incr_style != "constant";
  for (const auto& [flag, value] : {std::pair{"--start-weight-decay", o_.start_weight_decay},
                                    std::pair{"--end-weight-decay", o_.end_weight_decay}}) {
    if (!wd_changes && value >= 0) {
      return common::InvalidArgument("{} needs --weight-decay-incr-style linear or cosine (constant takes "
                                     "--weight-decay)", flag);
    }
    if (wd_changes && !(value >= 0 && std::isfinite(value))) {
      return common::InvalidArgument("--weight-decay-incr-style {} needs {}, finite and not negative",
                                     o_.weight_decay_incr_style, flag);
    }
  }
  if (!(o_.clip_grad >= 0)) return common::InvalidArgument("--clip-grad {} must not be negative", o_.clip_grad);
  for (const auto& [flag, value] : {std::pair{"--hidden-dropout", o_.hidden_dropout},
                                    std::pair{"--attention-dropout", o_.attention_dropout}}) {
    if (!(value >= 0 && value < 1)) return common::InvalidArgument("{} {} must be in [0, 1)", flag, value);
  }
  if (!(o_.bucket_size_mb > 0 && o_.bucket_size_mb <= 1e6)) {
    return common::InvalidArgument("--bucket-size-mb {} is out of range (0, 1e6]", o_.bucket_size_mb);
  }
  if (!(o_.straggler_threshold > 1) || o_.straggler_window < 1) {
    return common::InvalidArgument("--straggler-threshold {} must be above 1 and --straggler-window {} at least 1",
                                   o_.straggler_threshold, o_.straggler_window);
  }
  // Every rank masks and splits its own batches: each reads the tokenizer for its end-of-document token.
  std::vector<std::string> need_eod;
  for (const auto& [flag, on] : {std::pair{"--eod-mask-loss", o_.eod_mask_loss},
                                 std::pair{"--reset-position-ids", o_.reset_position_ids},
                                 std::pair{"--reset-attention-mask", o_.reset_attention_mask}}) {
    if (on) need_eod.emplace_back(flag);
  }
  std::string eod_text = "NullTokenizer's end of document";
  if (!need_eod.empty() && o_.null_tokenizer_vocab > 0) {
    eod_ = o_.null_tokenizer_vocab;  // NullTokenizer's
    if (o_.eod_mask_loss) unscored_ = eod_;
  } else if (!need_eod.empty()) {
    const std::string flags = fmt::format("{}", fmt::join(need_eod, " and "));
    const char* needs = need_eod.size() > 1 ? "need" : "needs";
    if (o_.mock_data && o_.vocab_file.empty() && o_.tokenizer_model.empty()) {
      return common::InvalidArgument("{} {} the tokenizer's end-of-document token: --mock-data has no tokenizer; "
                                     "give --vocab-file and --merge-file", flags, needs);
    }
    const auto& found = DataTokenizer();
    if (!found.ok()) {
      return common::Status(found.status().code(), fmt::format("{} {} the tokenizer's end-of-document token: {}",
                                                               flags, needs, found.status().message()));
    }
    const Tokenizer& tokenizer = **found;
    if (tokenizer.eod() < 0) {
      const std::string missing = tokenizer.sentencepiece() ? "eos_id (the SentencePiece model's is -1)"
                                  : tokenizer.hugging_face()
                                      ? "eos_token (tokenizer_config.json beside tokenizer.json names it)"
                                      : fmt::format("{} token", kEndOfText);
      return common::InvalidArgument("{}: the tokenizer has no {}", flags, missing);
    }
    eod_ = tokenizer.eod();
    eod_text = tokenizer.eod_text();
    if (o_.eod_mask_loss) unscored_ = eod_;
  }
  if (Leader() && (o_.reset_position_ids || o_.reset_attention_mask)) {
    common::LogInfo("documents: each ends after token {} ({}); {}", eod_, eod_text,
                    o_.reset_position_ids && o_.reset_attention_mask
                        ? "each starts again at position 0 and attends to its own tokens only"
                    : o_.reset_position_ids ? "each starts again at position 0 (attention still spans the sample)"
                                            : "each attends to its own tokens only (positions still count the sample)");
  }
  setup_error_everywhere_ = false;

  int threads = ThreadCount(o_.threads);
  bool shared = false;
  // Every rank exchanges its CPUs, whether or not it asked for threads, so that they all make the same calls.
  if (device_->kind() == DeviceKind::kCpu) {
    SRUNWAY_ASSIGN_OR_RETURN(const int share, CpuShare(&shared));
    if (threads == 0) {
      threads = share;
      if (shared && Leader()) {
        common::LogInfo("ranks share their node's CPUs (no --cpus-per-task or CPU binding): {} thread{} each, the "
                        "CPUs over the ranks that may run on them (--threads or OMP_NUM_THREADS to choose)",
                        threads, threads == 1 ? "" : "s");
      }
    }
  }
  if (threads == 0) {  // a GPU's rank: the host's threads do little
    cpu_set_t set;
    CPU_ZERO(&set);
    threads = sched_getaffinity(0, sizeof set, &set) == 0 ? std::clamp(CPU_COUNT(&set), 1, kMaxThreads) : 1;
  }
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  openblas_set_num_threads(1);  // the ops run single-threaded sgemms on OpenMP threads (see ops/cpu/matmul.cc)

  DataConfig data;
  data.data_path = o_.data_path;
  data.mock = o_.mock_data;
  data.split = o_.split;
  data.seq_len = T_;
  data.vocab = m.vocab;
  data.seed = o_.seed;
  data.stop = stop_signal_;
  // The index from --data-path holds every document of every epoch the run reaches into, in this rank's memory
  // or, with --data-cache-path, once in its node's: a run of a billion samples died in the allocator
  // (std::bad_alloc, exit 134) or of the OOM killer.
  // Megatron's per-split paths: each split's datasets whole, as if --split gave it every document.
  const bool per_split = !o_.train_data_path.empty();
  DataConfig train_data = data, valid_data = data;
  if (per_split) {
    train_data.data_path = o_.train_data_path;
    train_data.split = "1,0,0";
    valid_data.data_path = o_.valid_data_path;
    valid_data.split = "0,1,0";
  }
  const bool wants_validation = (o_.eval_interval > 0 || o_.skip_train) && o_.eval_iters > 0;
  const bool evaluates = wants_validation && (!per_split || !o_.valid_data_path.empty());
  if (wants_validation && !evaluates && Leader()) {
    common::LogInfo("--train-data-path without --valid-data-path: no validation runs (as Megatron's)");
  }
  SRUNWAY_ASSIGN_OR_RETURN(SamplePlan train_plan, PlanSamples(train_data, Split::kTrain, TrainSamples()));
  std::optional<SamplePlan> valid_plan;
  if (evaluates) {
    SRUNWAY_ASSIGN_OR_RETURN(valid_plan, PlanSamples(valid_data, Split::kValid, o_.eval_iters * B_));
  }
  const double index_bytes = train_plan.bytes() + (valid_plan ? valid_plan->bytes() : 0.0);
  // With --data-cache-path the index is one copy a node, in its page cache.
  const bool cached = !o_.data_cache_path.empty() && !o_.mock_data;
  const int local_size = boot_->identity().local_size;
  if (const HostMemory host = ShareOf(HostMemoryBudget(), cached ? 1 : local_size);
      host.bytes > 0 && index_bytes > static_cast<double>(host.bytes)) {
    return common::ResourceExhausted(
        "--train-steps {} x global batch {} = {} samples{}: their index from --data-path needs {:.2f} GiB of host "
        "memory, more than the {:.2f} GiB {} may hold ({}); train fewer steps (--exit-duration-in-mins ends a "
        "long run on time)", o_.train_steps, ramp_.ramps() ? "(ramped)" : std::to_string(gbs), TrainSamples(),
        evaluates ? fmt::format(" and --eval-iters {} x micro-batch {}", o_.eval_iters, B_) : "",
        Gib(index_bytes), Gib(host.bytes), cached ? "this node" : "this rank", host.why);
  }
  if (!cached) {
    SRUNWAY_ASSIGN_OR_RETURN(train_, BuildSamples(std::move(train_plan)));
    if (valid_plan) {
      SRUNWAY_ASSIGN_OR_RETURN(valid_, BuildSamples(*std::move(valid_plan)));
    }
  } else {
    auto open = [&](const SamplePlan& plan, std::unique_ptr<SampleSource>& into, bool build) -> common::Status {
      const auto start = Clock::now();
      bool built = false;
      SRUNWAY_ASSIGN_OR_RETURN(into, CachedSamples(plan, o_.data_cache_path, build, &built));
      if (Leader()) {
        common::LogInfo("sample index {} {} in {:.2f} s", SampleCachePath(plan, o_.data_cache_path).string(),
                        built ? "built" : "found", std::chrono::duration<double>(Clock::now() - start).count());
      }
      return common::Status::Ok();
    };
    // Files there already (a requeued run's, or a cache built beforehand that users may only read) are mapped as
    // they are; only a directory that must take new ones needs to be writable. Every rank's failure (one shared
    // directory, or the same path on every node) is said once, by rank 0.
    const bool found = open(train_plan, train_, false).ok() && (!valid_plan || open(*valid_plan, valid_, false).ok());
    SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(
        found ? common::Status::Ok() : common::PrepareWritableDir(o_.data_cache_path, "--data-cache-path"),
        common::StatusCode::kFailedPrecondition, "write in --data-cache-path"));
    // Each node's first rank builds what is missing (ranks of nodes that share the directory write the same
    // bytes, atomically); the others wait for it, then every rank maps the files.
    const bool builds = boot_->identity().local_rank == 0;
    common::Status built = common::Status::Ok();
    if (builds && !train_) built = open(train_plan, train_, true);
    if (builds && built.ok() && valid_plan && !valid_) built = open(*valid_plan, valid_, true);
    SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(built, common::StatusCode::kUnavailable,
                                           "build the sample index in --data-cache-path"));
    if (!train_) SRUNWAY_RETURN_IF_ERROR(open(train_plan, train_, false));
    if (valid_plan && !valid_) SRUNWAY_RETURN_IF_ERROR(open(*valid_plan, valid_, false));
  }
  SRUNWAY_RETURN_IF_ERROR(AgreeOnConfig());
  // At start-up, so that a --save that cannot work ends the run before its first step, not at its first save.
  if (!o_.save.empty()) SRUNWAY_RETURN_IF_ERROR(CheckSaveDir());
  if (!o_.non_persistent_dir.empty() && !o_.skip_train) {
    SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(
        common::PrepareWritableDir(o_.non_persistent_dir, "--non-persistent-save-interval's directory"),
        common::StatusCode::kFailedPrecondition, "write in the non-persistent checkpoints' directory"));
  }
  if (o_.log_progress && Leader() && !o_.skip_train) {
    if (o_.save.empty()) {
      common::LogInfo("--log-progress: no --save, so no progress.txt (it is written in --save's directory)");
    } else {
      LogProgress("Starting job");
    }
  }
  // Rank 0's own checks are agreed on, so that its failure ends every rank rather than leaving them waiting.
  SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(Leader() ? CheckEndOutputs() : common::Status::Ok(),
                                         common::StatusCode::kFailedPrecondition, "write where its outputs go"));

  SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(BuildModel(), common::StatusCode::kResourceExhausted, "build the model"));
  SRUNWAY_ASSIGN_OR_RETURN(DecayStyle style, ParseDecayStyle(o_.lr_decay_style));
  SRUNWAY_ASSIGN_OR_RETURN(WsdDecay wsd_decay, ParseWsdDecay(o_.lr_wsd_decay_style));
  SRUNWAY_ASSIGN_OR_RETURN(WeightDecayStyle wd_style, ParseWeightDecayStyle(o_.weight_decay_incr_style));
  weight_decay_ = {o_.weight_decay, o_.weight_decay, 1, wd_style};
  if (wd_style != WeightDecayStyle::kConstant) {
    weight_decay_ = {o_.start_weight_decay, o_.end_weight_decay,
                     schedule_in_samples_ ? o_.train_samples : o_.train_steps, wd_style};
  }
  schedule_ = {o_.lr,  o_.min_lr,        o_.warmup_steps,        o_.lr_decay_steps,
               style, o_.constant_steps, o_.lr_wsd_decay_steps, wsd_decay,
               o_.decoupled_lr, o_.decoupled_min_lr, o_.lr_warmup_init};
  SRUNWAY_RETURN_IF_ERROR(InitOrLoad());
  const std::optional<int64_t> resumed_at =
      o_.load.empty() || step_ == 0 || o_.skip_train ? std::nullopt : std::optional<int64_t>(step_);
  SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(Leader() ? metrics_.Open(o_.metrics_file, resumed_at) : common::Status::Ok(),
                                         common::StatusCode::kFailedPrecondition, "open --metrics-file"));
  SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(Leader() ? events_.Open(o_.tensorboard_dir, resumed_at) : common::Status::Ok(),
                                         common::StatusCode::kFailedPrecondition, "open --tensorboard-dir"));

  const bool gpu = device_->kind() == DeviceKind::kCuda;
  if (o_.peak_tflops > 0) {
    peak_flops_ = o_.peak_tflops * 1e12;
  } else if (gpu) {
    peak_flops_ = GpuPeakFlops(device_->name());
  } else {
    SRUNWAY_ASSIGN_OR_RETURN(peak_flops_, MeasureCpuPeak());
  }
  if (gpu && Leader()) {
    common::LogInfo("GPU operations: {}",
                    ops_->Describe(m.head_dim(), m.gelu(), o_.reset_attention_mask));
  }
  if (o_.recompute_activations && Leader()) {
    common::LogInfo("activations: only each layer's input is kept; its forward runs again in its backward "
                    "(--recompute-activations)");
  }
  if (o_.profile_step > 0 && Leader()) {
    const std::string what =
        o_.profile_last_step == 0
            ? fmt::format("--profile-step {}", o_.profile_step)
            : fmt::format("--profile (steps {} to {}{})", o_.profile_step, o_.profile_last_step,
                          o_.profile_ranks.empty() ? ""
                                                   : fmt::format(" on rank {}", fmt::join(o_.profile_ranks, ", ")));
    common::LogInfo("{}", gpu ? fmt::format("{}: the CUDA profiler's capture range holds {} (nsys profile "
                                            "--capture-range=cudaProfilerApi, ncu --profile-from-start off)",
                                            what, o_.profile_last_step == 0 ? "that step" : "those steps")
                              : fmt::format("{}: the CPU has no CUDA profiler; nothing to capture", what));
  }
  if (peak_flops_ <= 0 && Leader()) {
    common::LogInfo("MFU is not shown: no dense bf16 peak is known for {}; give --peak-tflops", device_->name());
  }
  const double state_mb = static_cast<double>(adam_->m().size() + adam_->v().size()) * sizeof(float) / 1e6;
  if (Leader()) {
    common::LogInfo("optimizer state {:.2f} MB per rank{}{}", state_mb,
                    o_.distributed_optimizer ? fmt::format(" (ZeRO-1: 1/{} of it)", world_) : "",
                    model_->masters().empty()
                        ? ""
                        : fmt::format("; fp32 parameters {:.2f} MB per rank (1/{} of them, beside the whole bf16 "
                                      "weights)", static_cast<double>(model_->params().size_bytes()) / 1e6, world_));
    const char* peak_of = o_.peak_tflops > 0 ? "--peak-tflops"
                          : gpu              ? "the GPU's dense bf16 peak"
                                             : "the ranks' mean fp32 sgemm rate";
    const std::string mfu_basis = peak_flops_ > 0
                                      ? fmt::format("MFU against {} {:.1f} GFLOP/s", peak_of, peak_flops_ / 1e9)
                                      : std::string("no MFU (no peak known)");
    common::LogInfo(
        "model {} ({} layers, hidden {}, heads {}/{}, vocab {}): {:.2f} M parameters; batch {} x {} "
        "tokens = {} rank{} x {} micro-batches of {}, {}; gradients in {} bucket{}{}{}; {}",
        ModelKind(m), m.n_layer, m.d_model, m.n_head, m.n_kv_head, m.vocab, ParameterCount(m) / 1e6, gbs, T_,
        world_, world_ == 1 ? "" : "s", accum_, B_,
        gpu ? fmt::format("bf16 on {}", device_->name())
            : fmt::format("{} thread{} per rank", threads, threads == 1 ? "" : "s"),
        reducer_->bucket_count(), reducer_->bucket_count() == 1 ? "" : "s",
        o_.overlap_grad_reduce ? " overlapped with the backward" : ", reduced after the backward",
        o_.grad_reduce_bf16 ? " in bf16" : "", mfu_basis);
    if (ramp_.ramps()) {
      common::LogInfo("the global batch ramps from {} by {} to {} over {} samples (--rampup-batch-size): {} steps "
                      "of {} samples, the learning rate's schedule counted in {}", ramp_.start(),
                      ramp_.increment(), gbs, ramp_.samples(), o_.train_steps, TrainSamples(),
                      schedule_in_samples_ ? "samples (with --train-samples, as Megatron's)" : "steps");
    }
  }
  return common::Status::Ok();
}

// The model, its optimizer and the gradient reducer on the rank's device; a device too small for them is one
// error that says what to shrink.
common::Status Trainer::BuildModel() {
  const ModelConfig& m = o_.model;
  try {
    std::vector<Bucket> buckets =
        MakeBuckets(ParamLayout(m).numel(), static_cast<size_t>(o_.bucket_size_mb * 1024 * 1024), world_);
    // ZeRO-1: this rank's slices of the fp32 parameters (on a GPU; the host keeps them whole) and of the moments.
    const std::vector<ParamRange> owned =
        o_.distributed_optimizer ? OwnedRanges(buckets, rank_) : std::vector<ParamRange>{};
    model_ = std::make_unique<Model>(m, B_, device_.get(), ops_.get(), o_.recompute_activations, owned);
    model_->set_dropout(o_.hidden_dropout, o_.attention_dropout);
    model_->set_documents(eod_, o_.reset_position_ids, o_.reset_attention_mask);
    AdamWConfig adam;
    adam.beta1 = o_.adam_beta1;
    adam.beta2 = o_.adam_beta2;
    adam.eps = o_.adam_eps;
    adam.weight_decay = o_.weight_decay;
    adam.decay_embeddings = o_.embedding_init_std < 0;
    adam_ = std::make_unique<AdamW>(model_->layout(), adam, owned, device_.get(), ops_.get());
    reducer_ = std::make_unique<GradReducer>(
        *comm_, *device_, model_->grads(), std::move(buckets),
        o_.distributed_optimizer ? GradReducer::Mode::kReduceScatter : GradReducer::Mode::kAllReduce,
        o_.overlap_grad_reduce, model_->weights_type(), o_.grad_reduce_bf16 ? ops_.get() : nullptr);
  } catch (const DeviceFull& full) {
    return common::ResourceExhausted("{}: the model ({:.2f} M parameters, with {} optimizer state) and the "
                                     "activations of micro-batches of {} x {} tokens do not fit; try a smaller "
                                     "--micro-batch-size{}{}", full.status().message(), ParameterCount(m) / 1e6,
                                     o_.distributed_optimizer ? "ZeRO-1's share of the" : "all its", B_, T_,
                                     o_.recompute_activations ? "" : ", --recompute-activations",
                                     o_.distributed_optimizer || world_ == 1 ? "" : " or --use-distributed-optimizer");
  }
  return common::Status::Ok();
}

// Megatron's initialisation from --seed, then a checkpoint over it when --load names one. Both are written on the
// host and copied to the device: where the model holds its whole fp32 parameters, into a host view of them (the
// host device's buffer itself, no second copy of the model in the rank's memory).
common::Status Trainer::InitOrLoad() {
  const ModelConfig& m = o_.model;
  const auto numel = static_cast<size_t>(model_->layout().numel());
  std::optional<HostMirror> whole;
  std::vector<float> gathered;
  if (model_->masters().empty()) {
    whole.emplace(*device_, model_->params().data(), numel);
  } else {
    gathered.resize(numel);
  }
  const std::span<float> params = whole ? whole->host() : std::span<float>(gathered);
  rng_.Seed(o_.seed);
  InitParams(m, model_->layout(), rng_, params, o_.init_method, o_.embedding_init_std);
  common::Status loaded = common::Status::Ok();
  // --finetune takes the parameters alone from --load, and --no-load-optim all but AdamW's moments, unless --save
  // holds this run's own checkpoint already (the job was requeued after a save): that one resumes in full, as any
  // run does.
  static const std::vector<ParamRange> kNoMoments;
  std::filesystem::path source = o_.load;
  std::filesystem::path non_persistent = o_.non_persistent_load_dir;
  bool finetune = o_.finetune, fresh_optimizer = o_.no_load_optim && !o_.finetune;
  // Megatron's --pretrained-checkpoint: where --load has nothing to resume (a job's first run), fine-tune from it.
  const char* finetune_flag = "--finetune";
  const bool pretrained = StartsFromPretrained(o_);
  if (pretrained) {
    if (Leader() && !o_.load.empty()) {
      common::LogInfo("--load {} holds no checkpoint yet: fine-tuning from --pretrained-checkpoint {}", o_.load,
                      o_.pretrained_checkpoint);
    }
    source = o_.pretrained_checkpoint;
    non_persistent.clear();
    finetune = true;
    fresh_optimizer = false;
    finetune_flag = "--pretrained-checkpoint";
  }
  const bool saved_here = !o_.save.empty() && (HasCheckpoint(o_.save) || (!o_.non_persistent_dir.empty() &&
                                                                          HasCheckpoint(o_.non_persistent_dir)));
  common::Status chosen = common::Status::Ok();
  if ((finetune || fresh_optimizer) && saved_here) {
    source = o_.save;
    non_persistent = o_.non_persistent_dir;
    finetune = fresh_optimizer = false;
  } else if (o_.ckpt_step >= 0 && (pretrained || o_.pretrained_checkpoint.empty())) {
    // Megatron's --ckpt-step: that step's checkpoint of the directory instead of its newest. With
    // --pretrained-checkpoint, of that one's: the run's own checkpoints in --load resume from their newest. And
    // unlike Megatron, a requeued job that went back already resumes where it has got to since: the checkpoints
    // of a run that went back to step N say so (went_back_to_step), and the newest saying N is resumed.
    went_back_to_ = o_.ckpt_step;
    const auto newest = LatestStep(source);
    const auto summary = !pretrained && newest.ok() && *newest > o_.ckpt_step
                             ? ReadCheckpointSummary(source)
                             : common::StatusOr<CheckpointSummary>(common::NotFound("none"));
    const bool since = summary.ok() && [&] {
      const auto went_back = summary->extra.find("went_back_to_step");
      return went_back != summary->extra.end() && went_back->is_number_integer() &&
             went_back->get<int64_t>() == o_.ckpt_step;
    }();
    if (since) {
      if (Leader()) {
        common::LogInfo("--ckpt-step {}: {}'s newest checkpoint, step {}, is of this run after it went back to "
                        "step {} (a requeued job): resuming it", o_.ckpt_step, source.string(), *newest,
                        o_.ckpt_step);
      }
    } else {
      auto of_step = CheckpointOfStep(source, o_.ckpt_step);
      chosen = of_step.status();
      if (of_step.ok()) {
        if (Leader() && newest.ok() && *newest > o_.ckpt_step && SamePath(source, o_.save) && !o_.skip_train) {
          common::LogWarn("--ckpt-step {}: {} holds checkpoints up to step {}; going back to step {} as asked (this "
                          "run's saves say so, and a requeued job resumes from them)", o_.ckpt_step,
                          source.string(), *newest, o_.ckpt_step);
        }
        source = *of_step;
        non_persistent.clear();
      }
    }
  }
  // Megatron's non-persistent checkpoints: the newest of them is resumed from where it is as new as the newest in
  // a run's directory given to resume (not a checkpoint of its own), or newer, or where that has none.
  std::error_code ec;
  if (!non_persistent.empty() && !source.empty() && !WeightsFile(source) &&
      !std::filesystem::is_regular_file(source, ec) && !std::filesystem::exists(source / "manifest.json", ec)) {
    const auto newest = LatestStep(non_persistent);
    const auto persistent = LatestStep(source);
    if (newest.ok() && (!persistent.ok() || *newest >= *persistent)) source = non_persistent;
  }
  const bool own = !source.empty() && (SamePath(source, o_.save) || (!o_.non_persistent_dir.empty() &&
                                                                      SamePath(source, o_.non_persistent_dir)));
  // A run that saves without AdamW's moments resumes its own checkpoints (a requeued job, --load DIR --save DIR)
  // with them at zero: it asked for no more.
  const char* fresh_why = "--no-load-optim";
  if (!finetune && !fresh_optimizer && o_.no_save_optim && own) {
    auto summary = ReadCheckpointSummary(source);
    if (summary.ok() && !summary->moments) {
      fresh_optimizer = true;
      fresh_why = "saved with --no-save-optim";
    }
  }
  const std::string from = source.string();
  const auto weights = WeightsFile(source);
  if (!chosen.ok()) {
    loaded = common::MakeStatus(chosen.code(), "--ckpt-step {}: {}", o_.ckpt_step, chosen.message());
  } else if (weights) {
    // Weights alone (srunway's --export, a Hugging Face model): --finetune or --skip-train, checked in Setup.
    const auto start = Clock::now();
    auto imported = ImportWeights(*weights, m, params);
    loaded = imported.status();
    if (imported.ok() && Leader()) {
      common::LogInfo("{} {} ({} names), read in {:.2f} s{}", o_.skip_train ? "weights from" : "fine-tuning from",
                      weights->string(), imported->naming,
                      std::chrono::duration<double>(Clock::now() - start).count(),
                      o_.skip_train ? "" : "; step, data position, optimizer and random state start afresh");
      for (const std::string& note : imported->notes) common::LogInfo("{}: {}", weights->string(), note);
    }
  } else if (finetune) {
    const auto start = Clock::now();
    // A checkpoint whose model reaches its positions otherwise (a shorter context, RoPE's theta or scaling) and
    // differs in nothing else has this model's parameters: they fine-tune into it, as a longer context's do.
    ModelConfig stored = m;
    if (auto summary = ReadCheckpointSummary(source);
        summary.ok() && !(summary->model == m) && WithPositionsOf(m, summary->model) == summary->model) {
      stored = summary->model;
      if (Leader()) {
        common::LogInfo("{}: {} reaches its positions otherwise than this run's model ({}): its parameters are "
                        "this model's, trained as given here", finetune_flag, from,
                        DescribeDifference(stored, m));
      }
    }
    auto state = LoadCheckpoint(source, stored, CheckpointBuffers{params, {}, {}, &kNoMoments});
    loaded = state.status();
    if (state.status().code() == common::StatusCode::kNotFound) {
      loaded = common::NotFound("{}: {}", finetune_flag, state.status().message());
    }
    if (state.ok() && Leader()) {
      common::LogInfo("fine-tuning from {} (saved at step {}): its parameters, read in {:.2f} s; step, data "
                      "position, optimizer and random state start afresh ({})", from, state->step,
                      std::chrono::duration<double>(Clock::now() - start).count(), finetune_flag);
    }
  } else if (!source.empty()) {
    // Every rank reads the parameters of every shard (a shared file system is assumed, as for the data): the
    // shards hold the whole state once, whatever the world that wrote them, and under ZeRO-1 each rank reads only
    // the moments of the shards that hold its slices, so a checkpoint loads on any number of ranks, with or
    // without ZeRO-1.
    const auto start = Clock::now();
    HostMirror m_state(*device_, adam_->m().data(), adam_->m().size());
    HostMirror v_state(*device_, adam_->v().data(), adam_->v().size());
    // Under ZeRO-1 the moments are read straight into this rank's slices.
    CheckpointBuffers buffers{params, m_state.host(), v_state.host(),
                              o_.distributed_optimizer ? &adam_->owned() : nullptr, rank_, world_};
    if (fresh_optimizer) buffers = {params, {}, {}, &kNoMoments, rank_, world_};  // the moments stay zero
    auto state = LoadCheckpoint(from, m, buffers);
    auto saved = state.ok() ? ReadSavedSettings(state->extra, state->step, from)
                            : common::StatusOr<SavedSettings>(state.status());
    // As Megatron's: the schedule comes with the optimizer state, so not with --no-load-optim.
    if (saved.ok() && o_.use_checkpoint_schedule && !fresh_optimizer) {
      if (common::Status taken = TakeSchedule(state->extra, from); !taken.ok()) {
        saved = common::StatusOr<SavedSettings>(std::move(taken));
      }
    }
    loaded = saved.status();
    if (saved.ok()) {
      for (const auto& [what, before, now] :
           {std::tuple{"global batch", saved->global_batch, int64_t{o_.global_batch_size}},
            std::tuple{"sequence length", saved->seq_length, int64_t{T_}}}) {
        if (before != 0 && before != now && Leader() && !o_.skip_train) {
          common::LogWarn("{} was written with {} {}, this run uses {}: the data order continues by samples", from,
                          what, before, now);
        }
      }
      step_ = state->step;
      consumed_ = state->consumed_samples;
      // Saved before the count was kept: the samples trained at the length they were saved with, by this model.
      const int saved_length = saved->seq_length > 0 ? static_cast<int>(saved->seq_length) : T_;
      flops_ = saved->flops.value_or(static_cast<double>(consumed_) * saved_length *
                                     MegatronFlopsPerToken(o_.model, saved_length));
      adam_steps_ = fresh_optimizer ? 0 : saved->adam_steps;
      skipped_steps_ = saved->skipped_steps;
      skipped_samples_ = saved->skipped_samples;
      if (!o_.no_load_rng && state->rng) rng_.set_state(*state->rng);
      KeepTimedChoices(state->extra, from);
      // Other data, split or seed (which shuffles it) draws other samples from here on: allowed (a new data mix
      // part-way is a recipe), but said; it went unremarked. The saved run recorded the next sample it would draw.
      // A run of more or fewer steps over the same epochs of its data draws the same; one over other epochs
      // shuffles their samples anew (as Megatron's index does).
      const int64_t samples = TrainSamples();
      const int64_t saved_samples = saved->train_samples.value_or(samples);
      const std::string& saved_next = saved->next_sample;
      const bool same_length = saved->seq_length == 0 || saved->seq_length == T_;  // else said above
      if (Leader() && !o_.skip_train && same_length && !saved_next.empty() && NextSample() != saved_next) {
        if (saved_samples != samples) {
          common::LogWarn("{} was written by a run of {} samples, this one draws {} over another number of epochs "
                          "of its data, whose samples are shuffled together (as Megatron's): from sample {} on the "
                          "order is another, some samples seen again", from, saved_samples, samples, consumed_);
        } else {
          common::LogWarn("{}: this run's data (--data-path, --mock-data, --split or --seed) gives other samples "
                          "from sample {} on than the run that saved it", from, consumed_);
        }
      }
      if (!fresh_optimizer) {
        SRUNWAY_RETURN_IF_ERROR(m_state.Upload());
        SRUNWAY_RETURN_IF_ERROR(v_state.Upload());
      }
      if (Leader()) {
        common::LogInfo("resumed from {} at step {} ({} samples consumed; read in {:.2f} s){}", from, step_,
                        consumed_, std::chrono::duration<double>(Clock::now() - start).count(),
                        fresh_optimizer ? fmt::format("; AdamW's moments start afresh ({})", fresh_why) : "");
      }
      if (step_ >= o_.train_steps && Leader() && !o_.skip_train) {
        common::LogInfo("already at step {} of --train-steps {}: nothing left to train", step_, o_.train_steps);
      }
    } else if (state.status().code() == common::StatusCode::kNotFound &&
               (std::filesystem::is_directory(source, ec) || SamePath(from, o_.save))) {
      // --load DIR --save DIR is how a job that may be requeued is written: the first run finds nothing there.
      if (o_.exit_on_missing_checkpoint) {
        loaded = common::NotFound("--load {}: no checkpoint there, and --exit-on-missing-checkpoint", from);
      } else {
        if (Leader()) common::LogInfo("no checkpoint in {} yet; starting from scratch", from);
        loaded = common::Status::Ok();
      }
    }
  }
  SRUNWAY_RETURN_IF_ERROR(model_->SetParams(params));
  if (o_.load.empty() && o_.pretrained_checkpoint.empty()) return common::Status::Ok();
  // The usual failure is every rank's (one shared directory), said once.
  return AgreeOnOutcome(loaded, common::StatusCode::kDataLoss, fmt::format("load {}", from));
}

void Trainer::KeepTimedChoices(const common::Json& extra, const std::string& from) {
  const auto choices = extra.find("timed_choices");
  if (choices == extra.end()) return;
  const common::Status kept = ops_->KeepTimedChoices(*choices);
  if (kept.ok()) return;
  // Timing anew only costs the first step a little and the last bits of exactness; said, not an error.
  if (kept.code() == common::StatusCode::kFailedPrecondition) {
    if (Leader()) common::LogInfo("{}: {}: timing them anew", from, kept.message());
  } else {
    common::LogWarn("{}: {}: timing them anew", from, kept.message());
  }
}

std::filesystem::path Trainer::ProgressPath() const { return std::filesystem::path(o_.save) / "progress.txt"; }

void Trainer::LogProgress(std::string_view event) {
  const std::filesystem::path path = ProgressPath();
  const char* job = std::getenv("SLURM_JOB_ID");
  const common::Status written =
      AppendProgress(path, ProgressLine(std::time(nullptr), job != nullptr ? job : "", world_, event));
  if (!written.ok()) common::LogWarn("--log-progress: {}; training goes on", written.message());
}

// Megatron's figures: the job's from its start, and the cumulative from the start of the jobs before it with as
// many ranks, read from progress.txt (this job's start where it has none: its line could not be written).
void Trainer::LogSavedProgress() {
  const double world = static_cast<double>(world_);
  const double job_s = std::chrono::duration<double>(Clock::now() - started_).count();
  const double job_tflops = (flops_ - flops_at_start_) / (job_s * 1e12 * world);
  const std::filesystem::path path = ProgressPath();
  ProgressStart start{job_started_, flops_at_start_};
  // A file that cannot be read cannot be written either, as the line appended below says.
  if (auto text = common::ReadFile(path); text.ok()) {
    auto found = FindProgressStart(*text, world_);
    if (found.ok() && *found) start = **found;
    if (!found.ok()) {
      common::LogWarn("--log-progress: {}: {}; the cumulative throughput is this job's", path.string(),
                      found.status().message());
    }
  }
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double cumulative_s = now - static_cast<double>(start.time);
  const double cumulative_tflops =
      cumulative_s > 0 ? (flops_ - start.flops) / (cumulative_s * 1e12 * world) : job_tflops;
  LogProgress(SavedCheckpointEvent(step_, job_tflops, cumulative_tflops, flops_,
                                   static_cast<double>(consumed_) * static_cast<double>(T_)));
}

common::Json Trainer::RunSettings() {
  return {{"seq_length", T_}, {"global_batch_size", o_.global_batch_size}, {"seed", o_.seed},
          {"data_path", o_.data_path}, {"mock_data", o_.mock_data}, {"split", o_.split},
          {"train_data_path", o_.train_data_path}, {"valid_data_path", o_.valid_data_path},
          {"data_parallel_size", world_}, {"distributed_optimizer", o_.distributed_optimizer},
          {"rampup_batch_size", o_.rampup_batch_size}, {"train_samples", TrainSamples()},
          {"next_sample", NextSample()}, {"adam_steps", adam_steps_}, {"floating_point_operations", flops_},
          {"skipped_steps", skipped_steps_}, {"skipped_train_samples", skipped_samples_},
          {"went_back_to_step", went_back_to_},
          {"opt_param_scheduler", ScheduleJson()}};
}

// A schedule's value for a log line: its rates as the floats they are (0.003, not 0.003000000026077032).
std::string Shown(const common::Json& value) {
  if (value.is_number_float()) return fmt::format("{}", static_cast<float>(value.get<double>()));
  if (value.is_null()) return "none";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

common::Json Trainer::ScheduleJson() const {
  return {{"max_lr", schedule_.lr}, {"min_lr", schedule_.min_lr}, {"lr_warmup_steps", schedule_.warmup_steps},
          {"lr_decay_steps", schedule_.decay_steps}, {"lr_decay_style", o_.lr_decay_style},
          {"constant_steps", schedule_.constant_steps}, {"lr_wsd_decay_steps", schedule_.wsd_decay_steps},
          {"lr_wsd_decay_style", o_.lr_wsd_decay_style}, {"start_wd", weight_decay_.start},
          {"end_wd", weight_decay_.end}, {"wd_incr_steps", weight_decay_.steps},
          {"wd_incr_style", o_.weight_decay_incr_style}, {"in_samples", schedule_in_samples_},
          {"lr_warmup_init", schedule_.warmup_init},
          {"decoupled_lr", schedule_.decoupled() ? common::Json(schedule_.decoupled_lr) : common::Json()},
          {"decoupled_min_lr", schedule_.decoupled_min_lr >= 0 ? common::Json(schedule_.decoupled_min_lr)
                                                               : common::Json()}};
}

common::Status Trainer::TakeSchedule(const common::Json& extra, const std::string& from) {
  const auto kept = extra.find("opt_param_scheduler");
  if (kept == extra.end()) {
    return common::FailedPrecondition("{} was saved without its schedule (by a srunway-train that kept none): give "
                                      "the schedule's flags instead of --use-checkpoint-opt_param-scheduler", from);
  }
  const std::string where = from + ": opt_param_scheduler";
  const common::Json flags = ScheduleJson();
  std::string decay_style, wsd_style, wd_style;
  LrSchedule lr;
  WeightDecaySchedule wd;
  bool in_samples = false;
  auto read = [&]() -> common::Status {
    SRUNWAY_ASSIGN_OR_RETURN(lr.lr, common::JsonField<float>(*kept, "max_lr", where));
    SRUNWAY_ASSIGN_OR_RETURN(lr.min_lr, common::JsonField<float>(*kept, "min_lr", where));
    SRUNWAY_ASSIGN_OR_RETURN(lr.warmup_steps, common::JsonField<int64_t>(*kept, "lr_warmup_steps", where));
    SRUNWAY_ASSIGN_OR_RETURN(lr.decay_steps, common::JsonField<int64_t>(*kept, "lr_decay_steps", where));
    SRUNWAY_ASSIGN_OR_RETURN(lr.constant_steps, common::JsonField<int64_t>(*kept, "constant_steps", where));
    SRUNWAY_ASSIGN_OR_RETURN(lr.wsd_decay_steps, common::JsonField<int64_t>(*kept, "lr_wsd_decay_steps", where));
    SRUNWAY_ASSIGN_OR_RETURN(decay_style, common::JsonField<std::string>(*kept, "lr_decay_style", where));
    SRUNWAY_ASSIGN_OR_RETURN(wsd_style, common::JsonField<std::string>(*kept, "lr_wsd_decay_style", where));
    SRUNWAY_ASSIGN_OR_RETURN(wd.start, common::JsonField<float>(*kept, "start_wd", where));
    SRUNWAY_ASSIGN_OR_RETURN(wd.end, common::JsonField<float>(*kept, "end_wd", where));
    SRUNWAY_ASSIGN_OR_RETURN(wd.steps, common::JsonField<int64_t>(*kept, "wd_incr_steps", where));
    SRUNWAY_ASSIGN_OR_RETURN(wd_style, common::JsonField<std::string>(*kept, "wd_incr_style", where));
    SRUNWAY_ASSIGN_OR_RETURN(in_samples, common::JsonField<bool>(*kept, "in_samples", where));
    // Kept since 2026-12-06; null, or absent from an older checkpoint, where there was none (a warmup from 0).
    for (auto [key, field] : {std::pair{"decoupled_lr", &lr.decoupled_lr}, {"decoupled_min_lr", &lr.decoupled_min_lr},
                              {"lr_warmup_init", &lr.warmup_init}}) {
      if (!kept->contains(key) || (*kept)[key].is_null()) continue;
      SRUNWAY_ASSIGN_OR_RETURN(*field, common::JsonField<float>(*kept, key, where));
      if (!(*field >= 0)) return common::InvalidArgument("{}: {} {} is negative", where, key, *field);
    }
    SRUNWAY_ASSIGN_OR_RETURN(lr.style, ParseDecayStyle(decay_style));
    SRUNWAY_ASSIGN_OR_RETURN(lr.wsd, ParseWsdDecay(wsd_style));
    SRUNWAY_ASSIGN_OR_RETURN(wd.style, ParseWeightDecayStyle(wd_style));
    if (lr.warmup_steps < 0 || lr.decay_steps < 1 || lr.constant_steps < 0 || lr.wsd_decay_steps < 0 ||
        wd.steps < 1) {
      return common::InvalidArgument("{}: a step count out of range", where);
    }
    return common::Status::Ok();
  };
  if (common::Status status = read(); !status.ok()) return common::DataLoss("{}: {}", where, status.message());
  if (in_samples != schedule_in_samples_) {
    return common::FailedPrecondition("{}'s schedule counts {} and this run's counts {} (a batch ramp with "
                                      "--train-samples counts samples): give the schedule's flags instead of "
                                      "--use-checkpoint-opt_param-scheduler", from, in_samples ? "samples" : "steps",
                                      schedule_in_samples_ ? "samples" : "steps");
  }
  o_.lr_decay_style = std::move(decay_style);
  o_.lr_wsd_decay_style = std::move(wsd_style);
  o_.weight_decay_incr_style = std::move(wd_style);
  schedule_ = lr;
  weight_decay_ = wd;
  if (!Leader()) return common::Status::Ok();
  std::string differ;
  const common::Json now = ScheduleJson();
  for (const auto& [key, value] : now.items()) {
    if (flags[key] == value) continue;
    differ += fmt::format("{}{} {} (the flags': {})", differ.empty() ? "" : ", ", key, Shown(value),
                          Shown(flags[key]));
  }
  common::LogInfo("the schedule {} kept (--use-checkpoint-opt_param-scheduler): {}", from,
                  differ.empty() ? "the flags' own" : differ);
  return common::Status::Ok();
}

std::string Trainer::NextSample() {
  std::vector<int32_t> tokens;
  if (!train_->Sample(consumed_, tokens).ok()) return "";
  return fmt::format("{:016x}", XXH3_64bits(tokens.data(), tokens.size() * sizeof(int32_t)));
}

// A rank that failed says why, or rank 0 alone when they all failed (the same flags and files everywhere, so the
// same error); the ranks that did not fail end with one line from rank 0 naming the first that did, instead of
// waiting for it in the first collective.
common::Status Trainer::AgreeOnOutcome(common::Status mine, common::StatusCode code, std::string_view could_not) {
  std::vector<int32_t> failed(static_cast<size_t>(world_));
  const int32_t flag = mine.ok() ? 0 : 1;
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&flag, failed.data(), sizeof flag));
  const auto failures = std::count(failed.begin(), failed.end(), 1);
  if (!mine.ok()) {
    setup_error_everywhere_ = failures == world_;
    peers_know_ = true;
    return mine;
  }
  if (failures == 0) return common::Status::Ok();
  setup_error_everywhere_ = true;
  const int first = static_cast<int>(std::find(failed.begin(), failed.end(), 1) - failed.begin());
  return common::Status(code, fmt::format("{} could not {} (its line says why)", boot_->NameRank(first), could_not));
}

// Ranks that train different models or read different data would average nonsense: each rank hashes its
// configuration and the first and last sample of its data, and they compare at start-up.
common::Status Trainer::AgreeOnConfig() {
  common::Json config = {{"model", ToJson(o_.model)}, {"micro_batch_size", B_}, {"global_batch_size", o_.global_batch_size},
                         {"seq_length", T_}, {"lr", o_.lr}, {"min_lr", o_.min_lr}, {"warmup", o_.warmup_steps},
                         {"decoupled", {o_.decoupled_lr, o_.decoupled_min_lr}}, {"warmup_init", o_.lr_warmup_init},
                         {"train_steps", o_.train_steps}, {"decay", o_.lr_decay_steps},
                         {"rampup", o_.rampup_batch_size}, {"eod_mask_loss", o_.eod_mask_loss},
                         {"per_token_loss", o_.per_token_loss},
                         {"documents", {o_.reset_position_ids, o_.reset_attention_mask}},
                         {"decay_style", o_.lr_decay_style}, {"constant_steps", o_.constant_steps}, {"wd", o_.weight_decay},
                         {"wd_incr", {o_.weight_decay_incr_style, o_.start_weight_decay, o_.end_weight_decay}},
                         {"wsd", {o_.lr_wsd_decay_steps, o_.lr_wsd_decay_style}},
                         {"betas", {o_.adam_beta1, o_.adam_beta2, o_.adam_eps}}, {"clip", o_.clip_grad},
                         {"dropout", {o_.hidden_dropout, o_.attention_dropout}},
                         {"seed", o_.seed}, {"data_path", o_.data_path}, {"mock", o_.mock_data}, {"split", o_.split},
                         {"train_data_path", o_.train_data_path}, {"valid_data_path", o_.valid_data_path},
                         {"save", o_.save}, {"load", o_.load}, {"finetune", o_.finetune},
                         {"skip_train", o_.skip_train}, {"save_interval", o_.save_interval},
                         {"bucket_mb", o_.bucket_size_mb}, {"overlap", o_.overlap_grad_reduce},
                         {"grad_reduce_bf16", o_.grad_reduce_bf16},
                         {"zero1", o_.distributed_optimizer}, {"weight_hash", o_.check_weight_hash_interval}};
  std::vector<int32_t> first, last;
  SRUNWAY_RETURN_IF_ERROR(train_->Sample(0, first));
  SRUNWAY_RETURN_IF_ERROR(train_->Sample(TrainSamples() - 1, last));
  const std::string text = config.dump() + "|" +
                           std::string(reinterpret_cast<const char*>(first.data()), first.size() * sizeof(int32_t)) +
                           std::string(reinterpret_cast<const char*>(last.data()), last.size() * sizeof(int32_t));
  const std::string mine = fmt::format("{:016x}", std::hash<std::string>{}(text));
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<std::string> all, boot_->AllGather(mine, "training config"));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      setup_error_everywhere_ = true;
      return common::InvalidArgument("ranks disagree on the training configuration or data: {} has hash {}, rank 0 "
                                     "{} (same flags, files and srunway-train on every rank?)",
                                     boot_->NameRank(static_cast<int>(r)), all[r], all[0]);
    }
  }
  return common::Status::Ok();
}

// Every rank writes its shard of a checkpoint in --save and rank 0 commits them, so a directory that not every node
// shares (node-local /tmp, a scratch SSD) could never hold one: rank 0 found the other nodes' shards missing at the
// first save, hours in. Each rank makes the directory; rank 0 writes a file there that every rank must see.
common::Status Trainer::CheckSaveDir() {
  SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(common::PrepareWritableDir(o_.save, "--save"),
                                         common::StatusCode::kFailedPrecondition, "write in --save"));
  // One run at a time saves there (save_lease.h): rank 0 holds the lease while this run trains.
  if (!o_.skip_train) {
    common::Status leased = common::Status::Ok();
    if (Leader()) {
      auto lease = SaveLease::Take(o_.save, ThisLeaseHolder());
      leased = lease.status();
      if (lease.ok()) lease_ = *std::move(lease);
    }
    SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(leased, common::StatusCode::kFailedPrecondition, "take --save's lease"));
  }
  if (world_ == 1) return common::Status::Ok();
  int32_t token = Leader() ? static_cast<int32_t>(std::random_device{}()) : 0;
  SRUNWAY_RETURN_IF_ERROR(HostBroadcast(token, 0));
  const std::filesystem::path probe =
      std::filesystem::path(o_.save) / fmt::format(".srunway-shared-{:08x}", static_cast<uint32_t>(token));
  SRUNWAY_RETURN_IF_ERROR(AgreeOnOutcome(Leader() ? common::WriteFileAtomic(probe, "") : common::Status::Ok(),
                                         common::StatusCode::kFailedPrecondition, "write in --save"));
  // A little while for a network file system's caches (NFS attributes) before a rank says it does not see it.
  std::error_code ec;
  int32_t seen = 0;
  for (int tries = 0; tries < 20 && seen == 0; ++tries) {
    if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seen = std::filesystem::exists(probe, ec) ? 1 : 0;
  }
  std::vector<int32_t> all(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&seen, all.data(), sizeof seen));
  if (Leader()) std::filesystem::remove(probe, ec);
  const auto blind = std::count(all.begin(), all.end(), 0);
  if (blind == 0) return common::Status::Ok();
  setup_error_everywhere_ = true;
  const int first = static_cast<int>(std::find(all.begin(), all.end(), 0) - all.begin());
  return common::FailedPrecondition(
      "--save {}: {}{} cannot see the files that rank 0 writes there: every rank writes its shard of a checkpoint "
      "there and rank 0 commits them, so --save must be a directory that every node shares", o_.save,
      boot_->NameRank(first), blind == 1 ? "" : fmt::format(" (and {} more rank{})", blind - 1, blind == 2 ? "" : "s"));
}

common::Status Trainer::Save(const char* why, bool non_persistent) {
  const auto start = Clock::now();
  SRUNWAY_RETURN_IF_ERROR(reducer_->FinishGather());
  SRUNWAY_RETURN_IF_ERROR(WriteCheckpoint(why, non_persistent));
  last_save_s_ = std::chrono::duration<double>(Clock::now() - start).count();
  return common::Status::Ok();
}

common::Status Trainer::WriteCheckpoint(const char* why, bool non_persistent) {
  const std::string& dir = non_persistent ? o_.non_persistent_dir : o_.save;
  if (dir.empty()) return common::Status::Ok();
  // Every rank writes its shard at once: its ZeRO-1 slices, or without ZeRO-1 the same slices of its replica, so
  // the shards always hold the state once. Rank 0 commits the checkpoint (manifest, then the latest pointer) only
  // when every rank has its shard on disk. Before any rank writes, rank 0 checks that the directory is still this
  // run's (another run that judged it dead took the lease over: this one stops rather than save beside it), then
  // removes what saves that never finished left behind (this step's earlier attempt too), so their space is free.
  common::Status leased = Leader() && lease_ ? lease_->Check() : common::Status::Ok();
  if (Leader() && leased.ok()) {
    auto removed = RemoveUnfinishedSaves(dir);
    if (!removed.ok()) common::LogWarn("{}: {}", dir, removed.status().message());
    for (const RemovedSave& save : removed.ok() ? *removed : std::vector<RemovedSave>{}) {
      common::LogInfo("removed {} ({}): a save that did not finish", save.path.string(), common::ByteSize(save.bytes));
    }
  }
  int32_t cleared = leased.ok() ? 1 : 0;
  SRUNWAY_RETURN_IF_ERROR(HostBroadcast(cleared, 0));
  if (cleared == 0) {
    error_said_elsewhere_ = true;  // rank 0's line
    return Leader() ? leased : common::FailedPrecondition("rank 0 no longer holds --save's lease");
  }
  TrainingState state;
  state.model = o_.model;
  state.step = step_;
  state.consumed_samples = consumed_;
  state.rng = rng_.state();
  if (o_.no_save_rng) state.rng.reset();
  state.extra = RunSettings();
  // What this rank chose by timing (its GEMMs' algorithms), so that a run resumed from here computes as this one.
  if (common::Json choices = ops_->TimedChoices(); !choices.is_null()) state.extra["timed_choices"] = choices;
  const std::vector<ParamRange> ranges =
      o_.distributed_optimizer ? adam_->owned() : OwnedRanges(reducer_->buckets(), rank_);
  const auto start = Clock::now();
  // Buffers held whole on the host have the shard's ranges written straight from them: a packed copy would need as
  // much host memory again as the state being saved, at the first save of a run that fitted until then. From a GPU
  // only the shard comes to the host, packed: without ZeRO-1 every rank holds the whole state on its device, and
  // mirroring it whole took 12 bytes of host memory a parameter on every rank (a 5B model's eight ranks on a node:
  // 480 GB) to write an eighth of it.
  std::array<std::vector<float>, 3> copies;
  std::array<ShardTensor, 3> tensors;
  const std::array<std::pair<std::span<float>, bool>, 3> buffers = {
      std::pair{model_->params(), model_->masters().empty()}, std::pair{adam_->m(), !o_.distributed_optimizer},
      std::pair{adam_->v(), !o_.distributed_optimizer}};
  common::Status written = common::Status::Ok();
  const size_t saved = o_.no_save_optim ? 1 : buffers.size();  // the parameters alone, or the moments too
  for (size_t i = 0; i < saved && written.ok(); ++i) {
    const auto [buffer, whole] = buffers[i];
    if (device_->kind() == DeviceKind::kCpu) {
      tensors[i] = {buffer, whole};
      continue;
    }
    // A buffer held whole gives the shard's ranges; a ZeRO-1 slice of one is those ranges already.
    auto copy = DownloadRanges(*device_, buffer,
                               whole ? ranges : std::vector<ParamRange>{{0, static_cast<int64_t>(buffer.size())}});
    written = copy.status();
    if (copy.ok()) copies[i] = *std::move(copy);
    tensors[i] = {copies[i], false};
  }
  if (written.ok()) written = WriteShard(dir, state, rank_, world_, ranges, tensors, !o_.no_save_optim);
  std::vector<int32_t> failed(static_cast<size_t>(world_));
  const int32_t mine = written.ok() ? 0 : 1;
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&mine, failed.data(), sizeof mine));
  const auto failures = std::count(failed.begin(), failed.end(), 1);
  if (failures > 0 && Leader()) {
    // Never committed, never read: what the ranks that succeeded wrote goes too.
    std::error_code ec;
    std::filesystem::remove_all(StagingDir(dir, step_), ec);
  }
  if (failures > 0) {
    // One line for the job, from rank 0: the first failing rank's own error, with how many others failed too.
    SRUNWAY_ASSIGN_OR_RETURN(std::vector<std::string> errors,
                             boot_->AllGather(written.ok() ? std::string() : written.message(), "checkpoint errors"));
    const int first = static_cast<int>(std::find(failed.begin(), failed.end(), 1) - failed.begin());
    error_said_elsewhere_ = true;
    const std::string others =
        failures == 1 ? "" : fmt::format(" (and {} more rank{})", failures - 1, failures == 2 ? "" : "s");
    return common::Unavailable("{}{}{}; {}", world_ == 1 ? "" : boot_->NameRank(first) + ": ",
                               errors[static_cast<size_t>(first)], others, LastCompleteCheckpoint(dir));
  }
  common::Status committed = common::Status::Ok();
  if (Leader()) {
    committed = CommitShards(dir, step_, world_);
    if (committed.ok()) {
      common::LogInfo("saved checkpoint {} ({}, {} shard{} in {:.2f} s)", ShardDir(dir, step_).string(), why,
                      world_, world_ == 1 ? "" : "s", std::chrono::duration<double>(Clock::now() - start).count());
      if (o_.log_progress) LogSavedProgress();
      // Of the non-persistent checkpoints only the newest stays.
      const bool retain = o_.save_retain_interval > 0 && !non_persistent;
      const std::string rule = non_persistent ? "non-persistent: the newest kept"
                               : retain       ? fmt::format("--save-retain-interval {}", o_.save_retain_interval)
                                              : fmt::format("--keep-checkpoints {}", o_.keep_checkpoints);
      auto pruned = retain ? PruneUnretained(dir, o_.save_retain_interval)
                           : PruneCheckpoints(dir, non_persistent ? 1 : o_.keep_checkpoints);
      if (!pruned.ok()) common::LogWarn("{}: {}", rule, pruned.status().message());
      for (const std::string& path : pruned.ok() ? *pruned : std::vector<std::string>{}) {
        common::LogInfo("deleted checkpoint {} ({})", path, rule);
      }
    }
  }
  int32_t ok = committed.ok() ? 1 : 0;
  SRUNWAY_RETURN_IF_ERROR(HostBroadcast(ok, 0));
  if (!committed.ok()) return committed;
  if (ok == 0) {
    error_said_elsewhere_ = true;
    return common::Unavailable("rank 0 could not commit the checkpoint of step {} in {}", step_, dir);
  }
  return common::Status::Ok();
}

// The validation loss over --eval-iters micro-batches, shared out between the ranks.
common::StatusOr<double> Trainer::Evaluate() {
  Batch batch;
  double mine = 0, scored = 0;
  for (int64_t i = rank_; i < o_.eval_iters; i += world_) {
    SRUNWAY_RETURN_IF_ERROR(FillBatch(*valid_, i * B_, B_, T_, batch, unscored_));
    const double weight = o_.per_token_loss ? static_cast<double>(batch.scored) : 1.0;
    mine += model_->Forward(batch.tokens.data(), batch.targets.data(), B_, T_) * weight;
    scored += weight;
  }
  SRUNWAY_RETURN_IF_ERROR(DeviceStatus());
  SRUNWAY_ASSIGN_OR_RETURN(double total, SumOverRanks(mine));
  if (!o_.per_token_loss) return total / static_cast<double>(o_.eval_iters);
  SRUNWAY_ASSIGN_OR_RETURN(double positions, SumOverRanks(scored));  // per token: the mean over every position
  return positions > 0 ? total / positions : 0.0;
}

common::Status Trainer::Validation() {
  SRUNWAY_ASSIGN_OR_RETURN(double valid_loss, Evaluate());
  if (!Leader()) return common::Status::Ok();
  Print(fmt::format("validation at step {} | loss {:.4f}\n", step_, valid_loss));
  SRUNWAY_RETURN_IF_ERROR(metrics_.Write({{"step", step_}, {"valid_loss", valid_loss}}));
  std::vector<Scalar> scalars = {{"lm loss validation", static_cast<float>(valid_loss)}};
  // Megatron's perplexity, capped as Megatron caps it (exp of at most 20).
  const auto ppl = static_cast<float>(std::exp(std::min(20.0, valid_loss)));
  if (o_.log_validation_ppl_to_tensorboard) scalars.push_back({"lm loss validation ppl", ppl});
  return WriteEvents(scalars);
}

common::StatusOr<double> Trainer::ParamsNorm() {
  const std::span<const float> params = model_->params();
  const double mine = model_->ops().SumOfSquares(params.data(), static_cast<int64_t>(params.size()));
  if (model_->masters().empty()) return std::sqrt(mine);  // every rank holds them all
  SRUNWAY_ASSIGN_OR_RETURN(double total, SumOverRanks(mine));
  return std::sqrt(total);
}

template <typename Of>
common::StatusOr<double> Trainer::OverReducedGrads(Of of) {
  const float* grads = model_->grads().data();
  if (!o_.distributed_optimizer) return static_cast<double>(of(grads, static_cast<int64_t>(model_->grads().size())));
  double mine = 0;
  for (const ParamRange& slice : adam_->owned()) mine += static_cast<double>(of(grads + slice.offset, slice.count));
  return SumOverRanks(mine);
}

common::Status Trainer::WriteEvents(std::vector<Scalar> scalars) {
  SRUNWAY_RETURN_IF_ERROR(events_.Write(step_, scalars));
  for (Scalar& scalar : scalars) scalar.tag += " vs samples";
  return events_.Write(consumed_, scalars);
}

common::StatusOr<double> Trainer::SumOverRanks(double mine) {
  std::vector<double> all(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&mine, all.data(), sizeof mine));
  double total = 0;
  for (double part : all) total += part;  // in rank order: the same sum on every rank
  return total;
}

// What the run writes once training has finished, checked before the first step so that a typo costs seconds and
// not the run: --export's directory must take a new file, --export-hf's model must have a Hugging Face class, and
// --sample's tokenizer must load and encode the prompt within the model's vocabulary.
common::Status Trainer::CheckEndOutputs() {
  if (!o_.export_safetensors.empty()) {
    SRUNWAY_RETURN_IF_ERROR(common::CheckWritableFile(o_.export_safetensors, "--export"));
  }
  if (!o_.export_hf.empty()) {
    SRUNWAY_RETURN_IF_ERROR(HuggingFaceExportable(o_.model).WithContext("--export-hf"));
    SRUNWAY_RETURN_IF_ERROR(common::PrepareWritableDir(o_.export_hf, "--export-hf"));
  }
  // --vocab-file and --merge-file, or --tokenizer-model (Megatron's flags for the data's tokenizer) must load, and
  // the model's vocabulary hold the tokenizer's, as Megatron's would: its vocabulary is the tokenizer's, padded.
  const bool given = !o_.vocab_file.empty() || !o_.tokenizer_model.empty();
  if (o_.sample_tokens > 0 && o_.null_tokenizer_vocab > 0) {
    return common::InvalidArgument("--sample: --tokenizer-type NullTokenizer has no text to prompt with or decode "
                                   "into");
  }
  if (o_.sample_tokens == 0 && !given) return common::Status::Ok();
  const auto& found = DataTokenizer();
  if (!found.ok()) {
    return common::Status(found.status().code(), fmt::format("{}: {}",
                          !given                       ? "--sample needs the dataset's tokenizer"
                          : o_.tokenizer_model.empty() ? "--vocab-file and --merge-file"
                                                       : "--tokenizer-model",
                          found.status().message()));
  }
  const Tokenizer& tokenizer = **found;
  if (given && tokenizer.vocab_size() > o_.model.vocab) {
    return common::InvalidArgument("{} {} holds {} tokens, more than the model's vocabulary of {}: give "
                                   "--vocab-size {} (the tokenizer's, padded to a multiple of 128 as Megatron pads "
                                   "it) or a --preset that holds it",
                                   o_.tokenizer_model.empty() ? "--vocab-file" : "--tokenizer-model",
                                   o_.tokenizer_model.empty() ? o_.vocab_file : o_.tokenizer_model,
                                   tokenizer.vocab_size(), o_.model.vocab, PaddedVocabSize(tokenizer.vocab_size()));
  }
  if (o_.sample_tokens == 0) return common::Status::Ok();
  sample_context_ = tokenizer.Encode(o_.sample_prompt);
  if (sample_context_.empty()) sample_context_.push_back(tokenizer.eod() >= 0 ? tokenizer.eod() : 0);
  for (int32_t token : sample_context_) {
    if (token >= o_.model.vocab) {
      return common::InvalidArgument("--sample: the tokenizer's token {} is outside the model's vocabulary {}", token,
                                     o_.model.vocab);
    }
  }
  return common::Status::Ok();
}

const common::StatusOr<TokenizerRef>& Trainer::DataTokenizer() {
  if (!tokenizer_) tokenizer_.emplace(FindTokenizer(o_));
  return *tokenizer_;
}

// --export-hf's tokenizer: the run's files as they are (srunway-prep's BPE is GPT-2's format); or none, and `none`
// says why for the log line (mock data, no files beside the dataset, or what is wrong with them).
std::optional<HfTokenizer> Trainer::ExportTokenizer(std::string& none) {
  if (o_.mock_data || o_.null_tokenizer_vocab > 0) {
    none = o_.mock_data ? "--mock-data" : "--tokenizer-type NullTokenizer";
    return std::nullopt;
  }
  const auto& loaded = DataTokenizer();
  if (!loaded.ok()) {
    none = loaded.status().code() == common::StatusCode::kNotFound ? "none beside --data-path"
                                                                   : loaded.status().message();
    return std::nullopt;
  }
  const Tokenizer& tokenizer = **loaded;
  HfTokenizer files;
  if (tokenizer.hugging_face() || tokenizer.sentencepiece()) {  // tokenizer.json or .model, and its config
    files.tokenizer_json = tokenizer.hf_json();
    files.tokenizer_model = tokenizer.sp_model();
    files.tokenizer_config = tokenizer.hf_config();
    files.bos = tokenizer.bos();
    files.eos = tokenizer.eod();
    return files;
  }
  auto paths = TokenizerPaths(o_);
  if (!paths.ok()) {
    none = paths.status().message();
    return std::nullopt;
  }
  auto vocab = common::ReadFile(paths->vocab);
  auto merges = common::ReadFile(paths->merges);
  for (const auto* read : {&vocab, &merges}) {
    if (read->ok()) continue;
    none = read->status().message();
    return std::nullopt;
  }
  files.vocab_json = std::move(*vocab);
  files.merges_txt = std::move(*merges);
  files.bos = files.eos = tokenizer.eod();  // GPT-2's convention: <|endoftext|> begins and ends
  return files;
}

common::Status Trainer::Sample() {
  assert(DataTokenizer().ok());  // CheckEndOutputs loaded it
  const Tokenizer& tokenizer = **DataTokenizer();
  std::vector<int32_t> context = sample_context_;
  const size_t prompt = context.size();
  Rng rng(o_.seed + 17);
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<int32_t> out, Generate(*model_, context, o_.sample_tokens, o_.sample_top_k, rng));
  std::vector<int32_t> generated(out.begin() + static_cast<int64_t>(prompt), out.end());
  Print(fmt::format("sample ({} tokens, {}):\n{}{}\n", o_.sample_tokens,
                    o_.sample_top_k > 1 ? fmt::format("top-{}", o_.sample_top_k) : "greedy", o_.sample_prompt,
                    tokenizer.DecodeText(generated, /*continues=*/!o_.sample_prompt.empty())));
  return common::Status::Ok();
}

common::StatusOr<std::vector<RankStep>> Trainer::ExchangeStep(const RankStep& mine) {
  std::vector<RankStep> all(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&mine, all.data(), sizeof mine));
  return all;
}

// The monitoring recipe's outlier check, done by the job: the slowest rank and the median go in the metrics line;
// a rank slower than --straggler-threshold x the median for --straggler-window steps in a row is named, and with
// --straggler-minmax-count N the N slowest and fastest ranks follow each log line.
void Trainer::WatchStragglers(const std::vector<RankStep>& steps, bool log_step, common::Json& line) {
  std::vector<double> compute;
  for (const RankStep& s : steps) compute.push_back(s.compute_ms);
  std::vector<int> by_time(compute.size());  // the ranks, fastest first; ties by rank
  std::iota(by_time.begin(), by_time.end(), 0);
  std::stable_sort(by_time.begin(), by_time.end(),
                   [&](int a, int b) { return compute[static_cast<size_t>(a)] < compute[static_cast<size_t>(b)]; });
  auto nth = [&](size_t k) { return compute[static_cast<size_t>(by_time[k])]; };  // the k-th fastest's time
  const size_t half = by_time.size() / 2;
  const double median = by_time.size() % 2 == 1 ? nth(half) : 0.5 * (nth(half - 1) + nth(half));
  const int slowest = static_cast<int>(std::max_element(compute.begin(), compute.end()) - compute.begin());
  double comm_max = 0;
  for (const RankStep& s : steps) comm_max = std::max(comm_max, s.comm_ms);
  line["compute_ms_median"] = median;
  line["compute_ms_max"] = compute[static_cast<size_t>(slowest)];
  line["slowest_rank"] = slowest;
  line["slowest_host"] = Host(slowest);
  line["comm_wait_ms_max"] = comm_max;
  for (int r = 0; r < world_; ++r) {
    int& streak = straggler_streak_[static_cast<size_t>(r)];
    streak = world_ > 1 && compute[static_cast<size_t>(r)] > o_.straggler_threshold * median ? streak + 1 : 0;
    if (streak == o_.straggler_window && Leader() && o_.watch_stragglers) {
      common::LogWarn("straggler: {} computed {:.1f} ms per step against a median of {:.1f} ms for {} steps in a "
                      "row (threshold {}x)", boot_->NameRank(r), compute[static_cast<size_t>(r)], median, streak,
                      o_.straggler_threshold);
    }
  }
  if (o_.straggler_minmax_count == 0) return;
  const auto n = static_cast<ptrdiff_t>(std::min(o_.straggler_minmax_count, world_));
  const std::vector<int> fastest(by_time.begin(), by_time.begin() + n);
  const std::vector<int> slowest_n(by_time.rbegin(), by_time.rbegin() + n);
  line["slowest_ranks"] = slowest_n;
  line["fastest_ranks"] = fastest;
  if (!log_step || !Leader() || !o_.watch_stragglers) return;
  auto named = [&](const std::vector<int>& ranks) {
    std::vector<std::string> names;
    for (int r : ranks) {
      names.push_back(fmt::format("{} {:.1f} ms", boot_->NameRank(r), compute[static_cast<size_t>(r)]));
    }
    return fmt::format("{}", fmt::join(names, ", "));
  };
  common::LogInfo("step {} compute: slowest {}; fastest {}", step_, named(slowest_n), named(fastest));
}

common::StatusOr<std::string> Trainer::CompareReplicas() {
  SRUNWAY_RETURN_IF_ERROR(reducer_->FinishGather());
  const auto numel = static_cast<size_t>(model_->layout().numel());
  std::array<uint64_t, 2> hashes = {};
  SRUNWAY_ASSIGN_OR_RETURN(hashes[0],
                           HashDeviceBytes(*device_, model_->weights(), numel * DTypeSize(model_->weights_type())));
  // The fp32 parameters the GPU's bf16 weights are made from at each step, where every rank holds them whole (not
  // ZeRO-1's slices): a fault there lasts, where one in the bf16 copy is written over by the next step.
  if (model_->masters().empty() && model_->weights() != model_->params().data()) {
    SRUNWAY_ASSIGN_OR_RETURN(hashes[1], HashDeviceBytes(*device_, model_->params().data(), numel * sizeof(float)));
  }
  uint64_t mine = XXH3_64bits(hashes.data(), sizeof hashes);
  std::vector<uint64_t> all(static_cast<size_t>(world_));
  SRUNWAY_RETURN_IF_ERROR(HostAllGather(&mine, all.data(), sizeof mine));
  return DescribeReplicas(all, [this](int rank) { return boot_->NameRank(rank); });
}

common::Status Trainer::FlipWeightBit() {
  SRUNWAY_RETURN_IF_ERROR(reducer_->FinishGather());
  // Of fp32, the third byte's lowest bit (bit 16, bf16's lowest): the lowest bit of all could be rounded away by the
  // next update (p - u on a coarser grid), and the replicas agree again before the check.
  auto* first = model_->masters().empty() ? static_cast<std::byte*>(static_cast<void*>(model_->params().data())) + 2
                                          : static_cast<std::byte*>(model_->weights());
  std::byte byte{};
  SRUNWAY_RETURN_IF_ERROR(device_->CopyToHost(&byte, first, 1, device_->main_stream()));
  SRUNWAY_RETURN_IF_ERROR(device_->Synchronize(device_->main_stream()));
  byte ^= std::byte{1};
  SRUNWAY_RETURN_IF_ERROR(device_->CopyFromHost(first, &byte, 1, device_->main_stream()));
  return device_->Synchronize(device_->main_stream());
}

void Trainer::SkipStep() {
  const int64_t global_batch = ramp_.At(consumed_);
  if (Leader()) {
    common::LogInfo("step {} skipped (--iterations-to-skip {}): samples {} to {} passed over untrained", step_ + 1,
                    step_, consumed_, consumed_ + global_batch - 1);
  }
  ++step_;
  ++skipped_steps_;
  consumed_ += global_batch;
  skipped_samples_ += global_batch;
  if (heartbeat_) heartbeat_->Beat(std::to_string(step_));
}

// Trains to --train-steps; an error is returned, every other ending is a result.
common::StatusOr<TrainResult> Trainer::Loop() {
  const double flops_per_token = TrainingFlopsPerToken(o_.model, T_);
  const double megatron_flops_per_token = MegatronFlopsPerToken(o_.model, T_);
  Batch batch;
  double window_ms = 0;
  int64_t window_steps = 0, window_tokens = 0;
  int64_t last_batch = ramp_.At(consumed_);
  Timers step_timers;  // --timing-log-level's, since the last log step
  TrainResult result;
  result.rank = rank_;
  if (o_.skip_train) {
    if (valid_) SRUNWAY_RETURN_IF_ERROR(Validation());
    result.step = step_;
    return result;
  }
  flops_at_start_ = flops_;
  const bool profiled = o_.profile_ranks.empty() ||
                        std::find(o_.profile_ranks.begin(), o_.profile_ranks.end(), rank_) != o_.profile_ranks.end();
  Model::GradsReady ready = [this](ParamRange range) { reducer_->Ready(range); };
  if (o_.check_weight_hash_interval > 0 && world_ == 1) {
    common::LogInfo("--check-weight-hash-across-dp-replicas-interval: one rank, no replica to compare its weights "
                    "with");
  }
  while (step_ < o_.train_steps) {
    if (std::find(o_.iterations_to_skip.begin(), o_.iterations_to_skip.end(), step_) != o_.iterations_to_skip.end()) {
      SkipStep();
      if (step_ == o_.train_steps) {
        SRUNWAY_RETURN_IF_ERROR(Save("final"));
        result.saved = !o_.save.empty();
      }
      continue;
    }
    if (step_ + 1 == o_.profile_step && profiled) SRUNWAY_RETURN_IF_ERROR(device_->Profile(true));
    const auto start = Clock::now();
    const int64_t global_batch = ramp_.At(consumed_);
    if (global_batch != last_batch && Leader()) {
      common::LogInfo("step {}: the global batch ramps up from {} to {}", step_ + 1, last_batch, global_batch);
    }
    last_batch = global_batch;
    const int accum = static_cast<int>(global_batch / (int64_t{B_} * world_));
    const int64_t per_rank = int64_t{B_} * accum;  // this rank's share of the step's samples
    const float loss_scale = 1.0f / static_cast<float>(accum * world_);
    // The schedules go by the steps (or samples) trained, as Megatron's, whose scheduler steps with the optimizer.
    const int64_t trained_steps = step_ - skipped_steps_, trained_samples = consumed_ - skipped_samples_;
    auto rate = [&](const LrSchedule& schedule) {
      return schedule_in_samples_ ? schedule.At(trained_samples, global_batch) : schedule.At(trained_steps);
    };
    const float lr = rate(schedule_), embedding_lr = rate(schedule_.Decoupled());
    model_->ZeroGrad();
    RankStep mine;
    for (int micro = 0; micro < accum; ++micro) {
      // Rank r takes the r-th slice of the step's samples, so any world size sees the same samples per step.
      const int64_t first = (o_.overfit_batch ? 0 : consumed_) + rank_ * per_rank + int64_t{micro} * B_;
      auto phase = Clock::now();
      SRUNWAY_RETURN_IF_ERROR(FillBatch(*train_, first, B_, T_, batch, unscored_));
      Time(step_timers, kBatchGenerator, phase);
      if (slow_rank_ms_ && slow_rank_ms_->first == rank_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(slow_rank_ms_->second));
      }
      const DropoutContext dropout{o_.seed, step_, first};
      common::Status gathered = common::Status::Ok();
      Model::ParamsNeeded need = [&](ParamRange range) {
        if (gathered.ok()) gathered = reducer_->Need(range);
      };
      phase = Clock::now();
      // --calculate-per-token-loss: the micro-batch's loss is the sum over its positions (its mean times their
      // count), and the step divides the reduced gradients by the count over all ranks.
      const float scale = o_.per_token_loss ? static_cast<float>(batch.scored) : loss_scale;
      mine.loss += model_->Forward(batch.tokens.data(), batch.targets.data(), B_, T_, &dropout,
                                   o_.distributed_optimizer ? need : nullptr, scale) *
                   scale;
      mine.scored += static_cast<double>(batch.scored);
      SRUNWAY_RETURN_IF_ERROR(gathered);
      Time(step_timers, kForwardCompute, phase);
      const bool last = micro + 1 == accum;
      if (last) reducer_->Arm();
      phase = Clock::now();
      model_->Backward(scale, last ? ready : nullptr);
      Time(step_timers, kBackwardCompute, phase);
    }
    Time(step_timers, kForwardBackward, start);
    const auto computed = Clock::now();
    SRUNWAY_RETURN_IF_ERROR(reducer_->Finish());
    Time(step_timers, kAllGradsSync, computed);
    mine.compute_ms = std::chrono::duration<double, std::milli>(computed - start).count();
    mine.comm_ms = reducer_->wait_ms();
    mine.signal = stop_signal_ != nullptr ? *stop_signal_ : 0;
    if (mine.signal != 0 && !signal_seen_) signal_seen_ = Clock::now();
    const double minutes = std::chrono::duration<double>(Clock::now() - started_).count() / 60;
    if (mine.signal == 0 && o_.exit_duration_min > 0 && minutes >= o_.exit_duration_min) mine.signal = kTimeUp;
    SRUNWAY_ASSIGN_OR_RETURN(std::vector<RankStep> steps, ExchangeStep(mine));
    double loss = 0, scored = 0;
    int signal = 0;
    for (const RankStep& s : steps) {
      loss += s.loss;
      scored += s.scored;
      if (s.signal != 0 && signal <= 0) signal = s.signal;  // a real signal before a time limit
    }
    // The gradients are sums over the positions: AdamW reads them divided by the count, the norm is theirs (a step
    // without a position to score has no loss and no gradient, as a micro-batch without one has by default).
    const double per_position = !o_.per_token_loss ? 1.0 : scored > 0 ? 1.0 / scored : 0.0;
    loss *= per_position;
    if (signal == 0 && o_.exit_interval > 0 && (step_ + 1) % o_.exit_interval == 0 && step_ + 1 < o_.train_steps) {
      signal = kExitInterval;
    }
    Ops& ops = model_->ops();
    const auto optimizer_start = Clock::now();
    SRUNWAY_ASSIGN_OR_RETURN(const double squares, OverReducedGrads([&](const float* values, int64_t n) {
                               return ops.SumOfSquares(values, n);
                             }));
    const double norm = std::sqrt(squares) * per_position;
    Time(step_timers, kClipMainGrad, optimizer_start);
    // A GPU's failures surface here, where the step has waited for the device.
    SRUNWAY_RETURN_IF_ERROR(DeviceStatus());
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      result.ending = TrainResult::Ending::kDiverged;
      result.step = step_ + 1;
      result.loss = loss;
      result.grad_norm = norm;
      return result;
    }
    // Clipping scales the gradients as AdamW reads them, so they stay as the reduction left them.
    const auto inner_start = Clock::now();
    adam_->set_weight_decay(weight_decay_.At(schedule_in_samples_ ? trained_samples : trained_steps));
    adam_->Step(model_->params(), model_->grads(), {lr, embedding_lr}, ++adam_steps_,
                ClipScale(norm, o_.clip_grad) * static_cast<float>(per_position), model_->weights());
    Time(step_timers, kInnerStep, inner_start);
    // ZeRO-1: the updated slices of the weights the ops read (the GPU's bf16 copy, which AdamW wrote beside its
    // fp32 slices) travel while the next forward runs; it waits for each part as it gets there.
    if (o_.distributed_optimizer) SRUNWAY_RETURN_IF_ERROR(reducer_->StartGather(model_->weights()));
    Time(step_timers, kOptimizer, optimizer_start);
    ++step_;
    consumed_ += global_batch;
    flops_ += static_cast<double>(global_batch * T_) * megatron_flops_per_token;
    if (step_ == std::max(o_.profile_step, o_.profile_last_step) && profiled) {
      SRUNWAY_RETURN_IF_ERROR(device_->Profile(false));
    }
    window_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    ++window_steps;
    window_tokens += global_batch * T_;

    common::Json line = {{"step", step_}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm}};
    if (schedule_.decoupled()) line["decoupled_lr"] = embedding_lr;
    const bool log_step = step_ % o_.log_interval == 0 || step_ == o_.train_steps;
    WatchStragglers(steps, log_step, line);
    const bool event_step = !o_.tensorboard_dir.empty() && step_ % o_.tensorboard_log_interval == 0;
    std::optional<double> params_norm;
    if (o_.log_params_norm && (log_step || event_step)) {  // on every rank: a collective under ZeRO-1
      SRUNWAY_RETURN_IF_ERROR(reducer_->FinishGather());
      SRUNWAY_ASSIGN_OR_RETURN(params_norm, ParamsNorm());
      line["params_norm"] = *params_norm;
    }
    std::optional<int64_t> zeros;
    if (o_.log_num_zeros_in_grad && (log_step || event_step)) {  // on every rank: a collective under ZeRO-1
      SRUNWAY_ASSIGN_OR_RETURN(const double counted, OverReducedGrads([&](const float* values, int64_t n) {
                                 return ops.CountZeros(values, n);
                               }));
      zeros = static_cast<int64_t>(counted);  // exact: counts below 2^53
      line["num_zeros"] = *zeros;
    }
    if (Leader() && log_step) {
      const double ms = window_ms / static_cast<double>(window_steps);
      const double tokens_per_s = static_cast<double>(window_tokens) / (window_ms / 1e3);
      // No peak known (a GPU outside GpuPeakFlops' table, without --peak-tflops): no MFU, rather than "inf%".
      const double mfu = peak_flops_ > 0 ? tokens_per_s * flops_per_token / (peak_flops_ * world_) : 0;
      // Megatron's --log-throughput: TFLOP/s per GPU (rank) by Megatron's count, so that the figure is Megatron's
      // for the same speed (MFU keeps the PaLM formula of the benchmarks).
      const double tflops = tokens_per_s * megatron_flops_per_token / world_ / 1e12;
      Print(fmt::format("step {:>6}/{} | loss {:.4f} | lr {:.3e}{} | grad norm {:.3f}{}{}{} | {:.1f} ms | {:.0f} tok/s{}{}\n",
                        step_, o_.train_steps, loss, lr,
                        schedule_.decoupled() ? fmt::format(" | decoupled lr {:.3e}", embedding_lr) : "", norm,
                        ramp_.ramps() ? fmt::format(" | batch {}", global_batch) : "",
                        params_norm ? fmt::format(" | params norm {:.3f}", *params_norm) : "",
                        zeros ? fmt::format(" | num zeros {}", *zeros) : "", ms, tokens_per_s,
                        o_.log_throughput ? fmt::format(" | {:.3g} TFLOP/s per GPU", tflops) : "",
                        peak_flops_ > 0 ? fmt::format(" | MFU {:.1f}%", 100 * mfu) : ""));
      line["ms"] = ms;
      line["global_batch_size"] = global_batch;
      line["tokens_per_s"] = tokens_per_s;
      if (peak_flops_ > 0) line["mfu"] = mfu;
      if (o_.log_throughput) line["tflops_per_gpu"] = tflops;
      line["ranks"] = world_;
      line["peak_memory_gib"] = static_cast<double>(device_->peak_allocated()) / (1 << 30);
      SRUNWAY_RETURN_IF_ERROR(metrics_.Write(line));
      // Megatron writes these two at its log lines, without "vs samples".
      std::vector<Scalar> timers;
      if (o_.log_timers_to_tensorboard) timers.push_back({"iteration-time", static_cast<float>(ms / 1e3)});
      if (o_.log_timers_to_tensorboard && o_.log_throughput) timers.push_back({"throughput", static_cast<float>(tflops)});
      SRUNWAY_RETURN_IF_ERROR(events_.Write(step_, timers));
    }
    if (Leader() && event_step) {
      std::vector<Scalar> scalars = {{"batch-size", static_cast<float>(global_batch)},
                                     {"lm loss", static_cast<float>(loss)},
                                     {"grad-norm", static_cast<float>(norm)}};
      if (o_.log_learning_rate_to_tensorboard) {
        scalars.insert(scalars.begin(), {"learning-rate", static_cast<float>(lr)});
        if (schedule_.decoupled()) scalars.insert(scalars.begin() + 1, {"decoupled-learning-rate", embedding_lr});
      }
      if (o_.log_world_size_to_tensorboard) scalars.push_back({"world-size", static_cast<float>(world_)});
      if (params_norm) scalars.push_back({"params-norm", static_cast<float>(*params_norm)});
      if (zeros) scalars.push_back({"num-zeros", static_cast<float>(*zeros)});
      if (o_.log_memory_to_tensorboard) {  // Megatron's names for PyTorch's memory_stats() of the same
        const AllocationStats memory = device_->allocations();
        scalars.push_back({"mem-allocated-bytes", static_cast<float>(memory.bytes)});
        scalars.push_back({"mem-max-allocated-bytes", static_cast<float>(memory.peak_bytes)});
        scalars.push_back({"mem-allocated-count", static_cast<float>(memory.count)});
      }
      SRUNWAY_RETURN_IF_ERROR(WriteEvents(std::move(scalars)));
    }
    if (o_.timing_log_level > 0 && log_step) {  // on every rank: the timers are gathered
      SRUNWAY_RETURN_IF_ERROR(LogTimers(step_timers, window_steps));
      step_timers = {};
    }
    if (window_steps > 0 && log_step) {
      window_ms = 0;
      window_steps = 0;
      window_tokens = 0;
    }
    if (flip_weight_ && flip_weight_->first == rank_ && flip_weight_->second == step_) {
      SRUNWAY_RETURN_IF_ERROR(FlipWeightBit());
    }
    // Before anything reads the weights again (validation, a checkpoint): ranks that hold other weights than their
    // peers would save a checkpoint whose shards do not belong together.
    if (o_.check_weight_hash_interval > 0 && world_ > 1 && step_ % o_.check_weight_hash_interval == 0) {
      SRUNWAY_ASSIGN_OR_RETURN(std::string differ, CompareReplicas());
      if (!differ.empty()) {
        result.ending = TrainResult::Ending::kReplicasDiffer;
        result.step = step_;
        result.replicas = std::move(differ);
        return result;
      }
    }
    if (valid_ && step_ % o_.eval_interval == 0) {
      SRUNWAY_RETURN_IF_ERROR(reducer_->FinishGather());
      SRUNWAY_RETURN_IF_ERROR(Validation());
    }
    if (heartbeat_) heartbeat_->Beat(std::to_string(step_));  // for srunway-launch's hang detection
    const bool interval_save = o_.save_interval > 0 && step_ % o_.save_interval == 0;
    if (signal > 0 && !o_.save.empty()) {
      // Rank 0 decides (it writes the checkpoint), from the time since it saw the signal, or since the step it
      // learned of another rank's.
      if (!signal_seen_) signal_seen_ = Clock::now();
      const double left_s = o_.exit_save_budget_s - std::chrono::duration<double>(Clock::now() - *signal_seen_).count();
      int32_t skip = Leader() && last_save_s_ > left_s ? 1 : 0;
      SRUNWAY_RETURN_IF_ERROR(HostBroadcast(skip, 0));
      if (skip != 0) {
        result.not_saved = fmt::format(
            "not saving: the last save took {:.1f} s and {:.1f} s are left of --exit-save-budget {} s; {}",
            last_save_s_, std::max(0.0, left_s), o_.exit_save_budget_s, LastCompleteCheckpoint(o_.save));
        result.ending = TrainResult::Ending::kSignalled;
        result.signal = signal;
        result.step = step_;
        return result;
      }
    }
    if (signal != 0 || interval_save || step_ == o_.train_steps) {
      SRUNWAY_RETURN_IF_ERROR(Save(signal > 0                   ? "stopping on a signal"
                                   : signal == kTimeUp       ? "--exit-duration-in-mins"
                                   : signal == kExitInterval ? "--exit-interval"
                                   : step_ == o_.train_steps ? "final"
                                                             : "interval"));
      result.saved = !o_.save.empty();
      if (signal != 0) {
        result.ending = signal == kTimeUp         ? TrainResult::Ending::kTimeLimit
                        : signal == kExitInterval ? TrainResult::Ending::kExitInterval
                                                  : TrainResult::Ending::kSignalled;
        result.signal = std::max(signal, 0);
        result.step = step_;
        return result;
      }
    } else if (o_.non_persistent_save_interval > 0 && step_ % o_.non_persistent_save_interval == 0) {
      SRUNWAY_RETURN_IF_ERROR(Save("non-persistent", /*non_persistent=*/true));
    }
  }
  result.step = step_;
  return result;
}

common::Status Trainer::Export() {
  if (o_.export_safetensors.empty() && o_.export_hf.empty()) return common::Status::Ok();
  // Sharded fp32 parameters come together from every rank first, on rank 0's host.
  std::vector<float> gathered;
  if (!model_->masters().empty()) {
    if (Leader()) gathered.resize(static_cast<size_t>(model_->layout().numel()));
    SRUNWAY_RETURN_IF_ERROR(reducer_->GatherMasters(model_->params(), gathered));
  }
  if (!Leader()) return common::Status::Ok();
  std::optional<HostMirror> params;  // the whole parameters where this rank holds them
  if (model_->masters().empty()) {
    params.emplace(*device_, model_->params().data(), model_->params().size());
    SRUNWAY_RETURN_IF_ERROR(params->Download());
  }
  const float* whole = params ? params->host().data() : gathered.data();
  if (!o_.export_hf.empty()) {
    const std::span<const float> all(whole, static_cast<size_t>(model_->layout().numel()));
    std::string none;
    const std::optional<HfTokenizer> tokenizer = ExportTokenizer(none);
    if (common::Status written = ExportHuggingFace(
            o_.export_hf, o_.model, all, tokenizer,
            HfExport{o_.export_dtype, static_cast<uint64_t>(o_.export_hf_max_shard_gb * 1e9)});
        !written.ok()) {
      return common::Status(written.code(), fmt::format("--export-hf {}: {}", o_.export_hf, written.message()));
    }
    common::LogInfo("exported the model to {} for transformers' from_pretrained ({}, {}; {})", o_.export_hf,
                    HuggingFaceArchitecture(o_.model), DtypeName(o_.export_dtype),
                    !tokenizer                            ? "no tokenizer: " + none
                    : !tokenizer->tokenizer_model.empty() ? "with the tokenizer, its tokenizer.model (LlamaTokenizer)"
                    : tokenizer->tokenizer_json.empty()   ? "with the tokenizer, GPT2Tokenizer"
                                                          : "with the tokenizer, its tokenizer.json");
  }
  if (o_.export_safetensors.empty()) return common::Status::Ok();
  std::vector<NamedTensor> tensors;
  for (const TensorSpec& spec : model_->layout().tensors()) {
    tensors.push_back({spec.name, spec.shape, whole + spec.offset});
  }
  common::Json config = ToJson(o_.model);
  if (common::Status written =
          WriteSafetensors(o_.export_safetensors, tensors, {{"srunway_model", config.dump()}, {"format", "pt"}},
                           o_.export_dtype);
      !written.ok()) {
    return common::Status(written.code(), fmt::format("--export {}: {}", o_.export_safetensors, written.message()));
  }
  common::LogInfo("exported weights to {} ({})", o_.export_safetensors, DtypeName(o_.export_dtype));
  return common::Status::Ok();
}

// The step, validation and sample lines on stdout, flushed at once (before the log lines that follow on stderr).
// A stdout that went away (a closed pipe: `srunway-train ... | head`; SIGPIPE is ignored) or filled up must not end
// the run: one warning, and training goes on without them.
void Trainer::Print(std::string_view text) {
  if (stdout_lost_) return;
  if (std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0) return;
  stdout_lost_ = true;
  common::LogWarn("cannot write to stdout ({}): no more step lines{}; training goes on", std::strerror(errno),
                  o_.metrics_file.empty() ? "" : fmt::format(" (--metrics-file {} has them)", o_.metrics_file));
}

// A rank that fails alone during training or at start-up (its metrics line, its data) leaves its peers waiting in
// a collective it will never join (until MPI's deadline, --distributed-timeout-minutes, 10 by default), and its own
// MPI_Finalize then waits for them. It says why at once and ends the step: PMIx_Abort under srun --mpi=pmix; under
// srunway-launch its exit, which ends every rank. It exits here, as MPI_Abort does, since tearing down its
// communicator would wait for the peers too.
void Trainer::EndStep(const common::Status& status) {
  common::LogError("{}{}", boot_->Prefix(), status.message());
  lease_.reset();  // given up: std::_Exit runs no destructor
  std::fflush(nullptr);
  boot_->Abort(status.message());
  std::fflush(nullptr);
  std::_Exit(kExitError);
}

std::variant<TrainResult, TrainError> Trainer::Run() {
  auto fail = [this](common::Status status, bool every_rank) -> std::variant<TrainResult, TrainError> {
    if (world_ > 1 && !every_rank) status = common::Status(status.code(), boot_->Prefix() + status.message());
    return TrainError{std::move(status), rank_, every_rank};
  };
  if (common::Status status = Connect(); !status.ok()) {
    return fail(status, setup_error_everywhere_ || error_said_elsewhere_);
  }
  if (common::Status status = Setup(); !status.ok()) {
    // Not every failure at start-up is agreed on (a rank's own --save directory, its data, its memory share).
    if (world_ > 1 && !setup_error_everywhere_ && !error_said_elsewhere_ && !peers_know_) EndStep(status);
    return fail(status, setup_error_everywhere_);
  }
  auto result = Loop();
  if (!result.ok()) {
    if (world_ > 1 && !error_said_elsewhere_) EndStep(result.status());
    return fail(result.status(), error_said_elsewhere_);
  }
  if (Leader()) {
    common::LogInfo("peak memory of the model, optimizer and activations: {:.2f} GiB on {}",
                    static_cast<double>(device_->peak_allocated()) / (1 << 30), device_->name());
  }
  if (result->ending == TrainResult::Ending::kFinished) {
    if (common::Status status = Export(); !status.ok()) return fail(status, false);
    if (o_.sample_tokens > 0 && Leader()) {
      if (common::Status status = Sample(); !status.ok()) return fail(status, false);
    }
  }
  (void)boot_->Finalize();
  return *result;
}

}  // namespace

bool StartsFromPretrained(const TrainOptions& o) {
  return !o.pretrained_checkpoint.empty() && !HoldsCheckpoint(o.load) &&
         (o.non_persistent_load_dir.empty() || !HasCheckpoint(o.non_persistent_load_dir));
}

std::variant<TrainResult, TrainError> Train(const TrainOptions& options, const volatile std::sig_atomic_t* stop_signal,
                                            const GpuOpsFactory& gpu_ops) {
  return Trainer(options, stop_signal, gpu_ops).Run();
}

}  // namespace srunway::trainer
