// Training samples of seq_len + 1 tokens (inputs and shifted targets) from datasets, as Megatron's GPTDataset
// and BlendedDataset build them: documents shuffled per epoch, packed end to end, cut into samples that share
// their boundary token, the samples of the epochs shuffled; blends interleave datasets in proportion to their
// weights.
#pragma once

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/data/indexed_dataset.h"

namespace srunway::trainer {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Replaces `out` with sample `index` (any index >= 0; the order repeats after the samples asked for).
  virtual common::Status Sample(int64_t index, std::vector<int32_t>& out) = 0;
  // Bytes of host memory its index holds.
  virtual int64_t IndexBytes() const = 0;
};

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };

struct DataConfig {
  // --data-path: "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ..."; a prefix names PREFIX.bin/.idx or llm.c shards (glob).
  std::vector<std::string> data_path;
  bool mock = false;                // --mock-data: deterministic random tokens, no files
  std::string split = "969,30,1";   // --split: train, validation, test shares of the documents
  int seq_len = 0;
  int vocab = 0;
  uint64_t seed = 1234;
  // Once set (a stop signal's number), a long index build ends with Aborted naming it: Ctrl-C or Slurm's SIGTERM
  // waited for the whole build, minutes for a billion samples.
  const volatile std::sig_atomic_t* stop = nullptr;
  bool wide_index = false;  // tests: 64-bit tables even where 32 bits hold every value
};

struct WeightedPath {
  double weight;
  std::string prefix;
};
common::StatusOr<std::vector<WeightedPath>> ParseDataPath(const std::vector<std::string>& args);

// Megatron's split: the shares normalised, boundaries rounded; [begin, end) of `count` documents for `split`.
common::StatusOr<std::pair<int64_t, int64_t>> SplitRange(const std::string& split, int64_t count, Split which);

// One dataset's share of a split's index: its documents [begin, end), the epochs of them that hold its samples,
// and whether a 32-bit table holds every document number, as Megatron's int32 tables do; past 2^32 it is 64-bit.
struct DatasetPlan {
  std::shared_ptr<TokenSource> tokens;
  double weight = 1;
  int64_t begin = 0, end = 0;
  int64_t tokens_per_epoch = 0;
  uint64_t lengths_hash = 0;   // of its documents' lengths, which the index depends on: a cache file's name
  int64_t epochs = 0;
  int64_t num_samples = 0;     // the run's
  int64_t epoch_samples = 0;   // in all its epochs: the run draws the first num_samples of their order
  int64_t shuffled_first = 0;  // the samples shuffled together first: all, or those before a last epoch kept apart
  bool narrow = true;
  // The index's tables: the documents of every epoch in shuffled order, the tokens before every 16th of them.
  double bytes() const;
};

// What BuildSamples allocates, known before it does: the datasets are open and each one's share counted.
struct SamplePlan {
  DataConfig config;
  Split split = Split::kTrain;
  int64_t num_samples = 0;
  std::vector<DatasetPlan> datasets;  // none for --mock-data
  double bytes() const;               // host memory of the whole index, a blend's own table included
};
common::StatusOr<SamplePlan> PlanSamples(const DataConfig& config, Split split, int64_t num_samples);

// The samples of one split, built to hold at least `num_samples` (more are drawn by wrapping around).
common::StatusOr<std::unique_ptr<SampleSource>> BuildSamples(SamplePlan plan);
common::StatusOr<std::unique_ptr<SampleSource>> BuildSamples(const DataConfig& config, Split split,
                                                              int64_t num_samples);

// Megatron's --data-cache-path: the plan's index kept in DIR as one file, named by a fingerprint of the plan (the
// datasets with their documents and tokens, the split, seed, sequence length and epochs, a blend's sample count)
// and mapped, so that the ranks of a node share one copy in the page cache instead of each holding its own, and a
// run that finds it skips the build. With `build`, a missing file or one of another plan is built and written (atomically; ranks
// that write the same file at once write the same bytes); without, that is an error. `built` says which it was.
common::StatusOr<std::unique_ptr<SampleSource>> CachedSamples(const SamplePlan& plan, const std::filesystem::path& dir,
                                                               bool build, bool* built = nullptr);
std::filesystem::path SampleCachePath(const SamplePlan& plan, const std::filesystem::path& dir);

// Opens PREFIX.bin/.idx, or llm.c shards matching PREFIX; the error names what was looked for.
common::StatusOr<std::unique_ptr<TokenSource>> OpenTokenSource(const std::string& prefix);

}  // namespace srunway::trainer
