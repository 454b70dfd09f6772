// Training samples of seq_len + 1 tokens (inputs and shifted targets) from datasets, as Megatron's GPTDataset
// and BlendedDataset build them: documents shuffled per epoch, packed end to end, cut into samples that share
// their boundary token, the samples shuffled; blends interleave datasets in proportion to their weights.
#pragma once

#include <csignal>
#include <cstdint>
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
};

struct WeightedPath {
  double weight;
  std::string prefix;
};
common::StatusOr<std::vector<WeightedPath>> ParseDataPath(const std::vector<std::string>& args);

// Megatron's split: the shares normalised, boundaries rounded; [begin, end) of `count` documents for `split`.
common::StatusOr<std::pair<int64_t, int64_t>> SplitRange(const std::string& split, int64_t count, Split which);

// The samples of one split, built to hold at least `num_samples` (more are drawn by wrapping around).
common::StatusOr<std::unique_ptr<SampleSource>> BuildSamples(const DataConfig& config, Split split,
                                                              int64_t num_samples);

// Bytes of host memory BuildSamples' index of `num_samples` takes: Megatron's per-sample tables (where each sample
// starts, their shuffled order) for each dataset, and the blend's own; 0 for --mock-data, which keeps none.
double SampleIndexBytes(const DataConfig& config, int64_t num_samples);

// Opens PREFIX.bin/.idx, or llm.c shards matching PREFIX; the error names what was looked for.
common::StatusOr<std::unique_ptr<TokenSource>> OpenTokenSource(const std::string& prefix);

}  // namespace srunway::trainer
