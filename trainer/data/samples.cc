// Sample indices over token sources, blends and mock data.
#include "trainer/data/samples.h"

#define XXH_INLINE_ALL  // xxHash's header alone (see trainer/meson.build)
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <span>
#include <string_view>

#include "common/fs.h"
#include "common/parse.h"
#include "common/signals.h"
#include "trainer/model/rng.h"

namespace srunway::trainer {
namespace {

// A blend's table keeps a dataset's number in its low 16 bits and the dataset's sample number above them.
constexpr int kSourceBits = 16;
constexpr size_t kMaxBlended = size_t{1} << kSourceBits;
constexpr int64_t kMaxBlendedSamples = int64_t{1} << (63 - kSourceBits);

// Tables of one dataset's index: its documents of every epoch, and the tokens before every block of them.
constexpr size_t kTablesPerDataset = 2;

// Aborted once `stop` is set; a build looks at it every 2^16 of its steps (`done` of `count` `unit`).
constexpr int64_t kStopEvery = int64_t{1} << 16;
common::Status CheckStop(const volatile std::sig_atomic_t* stop, int64_t done, int64_t count, std::string_view unit,
                         const std::string& of) {
  if (stop == nullptr || done % kStopEvery != 0 || *stop == 0) return common::Status::Ok();
  return common::Aborted("stopped by {} while building the sample index of {} ({} of {} {})",
                         common::SignalName(*stop), of, done, count, unit);
}

// Fisher-Yates; a long one (a billion documents' epochs) looks at `stop` as the build's loops do.
template <typename Index>
common::Status Shuffle(std::span<Index> values, uint64_t seed, const volatile std::sig_atomic_t* stop,
                       std::string_view unit, const std::string& of) {
  Rng rng(seed);
  const auto count = static_cast<int64_t>(values.size());
  for (int64_t i = count; i > 1; --i) {
    SRUNWAY_RETURN_IF_ERROR(CheckStop(stop, count - i, count, unit, of));
    std::swap(values[i - 1], values[rng.Below(static_cast<uint64_t>(i))]);
  }
  return common::Status::Ok();
}

common::Status CheckTokens(const std::vector<int32_t>& tokens, int vocab, const std::string& where, int64_t sample) {
  for (int32_t token : tokens) {
    if (token < 0) return common::DataLoss("{}: token {} in sample {} is negative", where, token, sample);
    if (token >= vocab) {
      return common::DataLoss(
          "{}: token {} in sample {} is not below the model's vocabulary size {} (--vocab-size sets it: at least "
          "the vocabulary of the data's tokenizer, which srunway-prep prints)", where, token, sample, vocab);
    }
  }
  return common::Status::Ok();
}

// A sample that the tables of a cache file put outside the data: a damaged file (Build's tables never do that,
// and a file of other data has another name).
common::Status Damaged(const std::shared_ptr<const MappedFile>& mapping, int64_t sample, std::string_view what) {
  return common::DataLoss("{}: sample {} {} (a damaged sample index: delete the file and the run builds it again)",
                          mapping ? mapping->path().string() : std::string("the sample index"), sample, what);
}

// Tables held in memory, or in a mapped cache file (Tables says where each lies, for writing one).
class IndexedSamples : public SampleSource {
 public:
  virtual std::vector<std::span<const uint8_t>> Tables() const = 0;
};

template <typename T>
std::span<const uint8_t> BytesOf(std::span<const T> table) {
  return {reinterpret_cast<const uint8_t*>(table.data()), table.size_bytes()};
}

// BytesOf's inverse, for a table in a mapped cache file (each starts at a multiple of 8 bytes).
template <typename T>
std::span<const T> TableOf(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
}

// A keyed bijection of [0, n): a balanced Feistel network on the fewest even bits that hold n, applied again while
// it lands outside (cycle walking: under 4 tries on average). The order of the samples without a table of it, and
// the same for the first k of n whatever k.
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t seed) : n_(n), seed_(seed) {
    while (half_ < 32 && (uint64_t{1} << (2 * half_)) < n) ++half_;
    mask_ = (uint64_t{1} << half_) - 1;
  }
  uint64_t operator()(uint64_t i) const {
    if (n_ <= 1) return 0;
    do {
      uint64_t left = i >> half_, right = i & mask_;
      for (uint64_t round = 0; round < kRounds; ++round) {
        const uint64_t mixed = left ^ (XXH3_64bits_withSeed(&right, sizeof right, seed_ + round) & mask_);
        left = right;
        right = mixed;
      }
      i = left << half_ | right;
    } while (i >= n_);
    return i;
  }

 private:
  static constexpr uint64_t kRounds = 6;
  uint64_t n_, seed_;
  int half_ = 1;
  uint64_t mask_ = 1;
};

// Megatron's GPTDataset over one dataset's share, its document table of `Index` (uint32_t where every value fits):
// the documents of every epoch shuffled (each epoch by itself), packed end to end and cut into samples of seq_len
// + 1 tokens that share their boundary token; the samples of every epoch shuffled (as Megatron, the last epoch by
// itself when the run takes under 80% of it), and the run takes the first of them. The sample order is a keyed
// permutation (no table) and where a sample starts is found from every kBlock-th position's token count (8 bytes
// per kBlock documents, no table per sample), so the index is about the document table alone, and a run of more
// steps over the same epochs draws the same samples first (tables of the run's samples, shuffled among themselves,
// gave another order for every other --train-steps).
template <typename Index>
class GptSamples : public IndexedSamples {
 public:
  static constexpr int64_t kBlock = 16;

  static common::StatusOr<std::unique_ptr<GptSamples>> Build(const DatasetPlan& plan, int seq_len, int vocab,
                                                             uint64_t seed, const volatile std::sig_atomic_t* stop) {
    auto samples = std::make_unique<GptSamples>(plan, seq_len, vocab, seed);
    std::vector<Index>& docs = samples->docs_store_;
    std::vector<int64_t>& blocks = samples->blocks_store_;
    const std::string name = plan.tokens->name();
    const int64_t per_epoch = plan.end - plan.begin;
    docs.resize(plan.epochs * per_epoch);
    for (int64_t e = 0; e < plan.epochs; ++e) {
      SRUNWAY_RETURN_IF_ERROR(CheckStop(stop, e, plan.epochs, "epochs", name));
      std::span<Index> epoch(docs.data() + e * per_epoch, per_epoch);
      std::iota(epoch.begin(), epoch.end(), static_cast<Index>(plan.begin));
      SRUNWAY_RETURN_IF_ERROR(
          Shuffle(epoch, seed + 1000003 * static_cast<uint64_t>(e), stop, "documents of an epoch shuffled", name));
    }
    // Tokens before every kBlock-th position of docs.
    blocks.resize(BlockCount(plan));
    int64_t tokens = 0;
    for (int64_t pos = 0; pos < static_cast<int64_t>(docs.size()); ++pos) {
      SRUNWAY_RETURN_IF_ERROR(CheckStop(stop, pos, static_cast<int64_t>(docs.size()), "documents counted", name));
      if (pos % kBlock == 0) blocks[pos / kBlock] = tokens;
      tokens += plan.tokens->length(docs[pos]);
    }
    samples->docs_ = docs;
    samples->blocks_ = blocks;
    return samples;
  }

  // The tables of `plan` as Build makes them, lying in `mapping` (which they keep open).
  static std::unique_ptr<GptSamples> Mapped(const DatasetPlan& plan, int seq_len, int vocab, uint64_t seed,
                                            std::shared_ptr<const MappedFile> mapping,
                                            std::span<const std::span<const uint8_t>, kTablesPerDataset> tables) {
    auto samples = std::make_unique<GptSamples>(plan, seq_len, vocab, seed);
    samples->mapping_ = std::move(mapping);
    samples->docs_ = TableOf<Index>(tables[0]);
    samples->blocks_ = TableOf<int64_t>(tables[1]);
    return samples;
  }

  // Bytes of each table of `plan`: documents of every epoch, tokens before every kBlock-th.
  static std::array<size_t, kTablesPerDataset> TableBytes(const DatasetPlan& plan) {
    return {static_cast<size_t>(plan.epochs * (plan.end - plan.begin)) * sizeof(Index),
            static_cast<size_t>(BlockCount(plan)) * sizeof(int64_t)};
  }

  GptSamples(const DatasetPlan& plan, int seq_len, int vocab, uint64_t seed)
      : source_(plan.tokens), begin_(plan.begin), end_(plan.end), seq_len_(seq_len), vocab_(vocab),
        num_samples_(plan.num_samples), first_(plan.shuffled_first),
        first_order_(plan.shuffled_first, seed ^ 0x5eedULL),
        last_order_(plan.epoch_samples - plan.shuffled_first, seed ^ 0x1a57ULL) {}

  common::Status Sample(int64_t index, std::vector<int32_t>& out) override {
    const auto i = static_cast<uint64_t>(index % num_samples_);
    const int64_t sample = i < first_ ? static_cast<int64_t>(first_order_(i))
                                      : static_cast<int64_t>(first_ + last_order_(i - first_));
    // Its first token: the position whose document holds it, from the count before its block.
    const int64_t start = sample * seq_len_;
    const auto block = std::upper_bound(blocks_.begin(), blocks_.end(), start) - blocks_.begin() - 1;
    if (block < 0 || blocks_[block] < 0 || blocks_[block] > start) {
      return Damaged(mapping_, index, fmt::format("falls outside the token counts of {}", source_->name()));
    }
    int64_t pos = block * kBlock, offset = start - blocks_[block];
    while (Holds(pos) && offset >= source_->length(docs_[pos])) offset -= source_->length(docs_[pos++]);
    out.clear();
    int64_t remaining = seq_len_ + 1;
    while (remaining > 0) {
      if (!Holds(pos)) {
        return Damaged(mapping_, index, fmt::format("lies outside the documents of {}", source_->name()));
      }
      const int64_t doc = docs_[pos];
      const int64_t take = std::min(remaining, source_->length(doc) - offset);
      SRUNWAY_RETURN_IF_ERROR(source_->Read(doc, offset, take, out));
      remaining -= take;
      ++pos;
      offset = 0;
    }
    return CheckTokens(out, vocab_, source_->name(), index);
  }

  int64_t IndexBytes() const override {
    return static_cast<int64_t>(docs_store_.capacity() * sizeof(Index) + blocks_store_.capacity() * sizeof(int64_t));
  }

  std::vector<std::span<const uint8_t>> Tables() const override { return {BytesOf(docs_), BytesOf(blocks_)}; }

 private:
  static int64_t BlockCount(const DatasetPlan& plan) {
    return (plan.epochs * (plan.end - plan.begin) + kBlock - 1) / kBlock;
  }

  // Whether the document table has entry `pos` and it is one of the dataset's documents.
  bool Holds(int64_t pos) const {
    return pos < static_cast<int64_t>(docs_.size()) && static_cast<int64_t>(docs_[pos]) >= begin_ &&
           static_cast<int64_t>(docs_[pos]) < end_;
  }

  std::shared_ptr<TokenSource> source_;
  int64_t begin_ = 0, end_ = 0;
  int seq_len_ = 0, vocab_ = 0;
  int64_t num_samples_ = 0;
  uint64_t first_ = 0;
  Permutation first_order_, last_order_;
  // Built here, or read from a cache file that stays mapped.
  std::vector<Index> docs_store_;
  std::vector<int64_t> blocks_store_;
  std::shared_ptr<const MappedFile> mapping_;
  std::span<const Index> docs_;
  std::span<const int64_t> blocks_;
};

// NeMo's mock data: every sample is seq_len + 1 tokens drawn uniformly from the vocabulary, a function of the
// seed and the sample index only.
class MockSamples : public SampleSource {
 public:
  MockSamples(int seq_len, int vocab, uint64_t seed) : seq_len_(seq_len), vocab_(vocab), seed_(seed) {}
  common::Status Sample(int64_t index, std::vector<int32_t>& out) override {
    Rng rng(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(index));
    out.resize(seq_len_ + 1);
    for (int32_t& token : out) token = static_cast<int32_t>(rng.Below(vocab_));
    return common::Status::Ok();
  }
  int64_t IndexBytes() const override { return 0; }

 private:
  int seq_len_, vocab_;
  uint64_t seed_;
};

// Megatron's blending: sample i goes to the dataset furthest below its share, weight * i - drawn so far.
class BlendedSamples : public IndexedSamples {
 public:
  static common::StatusOr<std::unique_ptr<BlendedSamples>> Build(
      std::vector<std::unique_ptr<IndexedSamples>> sources, const std::vector<double>& weights, int64_t num_samples,
      const volatile std::sig_atomic_t* stop) {
    auto blend = std::make_unique<BlendedSamples>(std::move(sources));
    SRUNWAY_RETURN_IF_ERROR(blend->Draw(weights, num_samples, stop));
    return blend;
  }

  // The blend's table lying in `mapping`, which the sources' tables share.
  static std::unique_ptr<BlendedSamples> Mapped(std::vector<std::unique_ptr<IndexedSamples>> sources,
                                                std::shared_ptr<const MappedFile> mapping,
                                                std::span<const uint8_t> table) {
    auto blend = std::make_unique<BlendedSamples>(std::move(sources));
    blend->mapping_ = std::move(mapping);
    blend->index_ = TableOf<uint64_t>(table);
    return blend;
  }

  explicit BlendedSamples(std::vector<std::unique_ptr<IndexedSamples>> sources) : sources_(std::move(sources)) {}

  common::Status Sample(int64_t index, std::vector<int32_t>& out) override {
    const uint64_t entry = index_[index % static_cast<int64_t>(index_.size())];
    const int64_t wraps = index / static_cast<int64_t>(index_.size());
    const auto sample = static_cast<int64_t>(entry >> kSourceBits);
    const uint64_t source = entry & ((1u << kSourceBits) - 1);
    if (source >= sources_.size()) {
      return Damaged(mapping_, index, fmt::format("is drawn from dataset {} of the blend's {}", source + 1,
                                                  sources_.size()));
    }
    return sources_[source]->Sample(sample + wraps * static_cast<int64_t>(index_.size()), out);
  }

  int64_t IndexBytes() const override {
    int64_t bytes = static_cast<int64_t>(store_.capacity() * sizeof(uint64_t));
    for (const auto& source : sources_) bytes += source->IndexBytes();
    return bytes;
  }

  // Each dataset's tables, then the blend's.
  std::vector<std::span<const uint8_t>> Tables() const override {
    std::vector<std::span<const uint8_t>> tables;
    for (const auto& source : sources_) {
      for (std::span<const uint8_t> table : source->Tables()) tables.push_back(table);
    }
    tables.push_back(BytesOf(index_));
    return tables;
  }

 private:
  common::Status Draw(const std::vector<double>& weights, int64_t num_samples, const volatile std::sig_atomic_t* stop) {
    std::vector<int64_t> drawn(sources_.size(), 0);
    store_.resize(num_samples);
    for (int64_t i = 0; i < num_samples; ++i) {
      SRUNWAY_RETURN_IF_ERROR(CheckStop(stop, i, num_samples, "samples", "the blend"));
      size_t best = 0;
      double best_error = -INFINITY;
      for (size_t d = 0; d < sources_.size(); ++d) {
        const double error = weights[d] * static_cast<double>(std::max<int64_t>(i, 1)) - static_cast<double>(drawn[d]);
        if (error > best_error) {
          best_error = error;
          best = d;
        }
      }
      store_[i] = static_cast<uint64_t>(drawn[best]++) << kSourceBits | best;
    }
    index_ = store_;
    return common::Status::Ok();
  }

  std::vector<std::unique_ptr<IndexedSamples>> sources_;
  std::vector<uint64_t> store_;
  std::shared_ptr<const MappedFile> mapping_;
  std::span<const uint64_t> index_;
};

// Bytes of each table of a dataset's index, as GptSamples lays them out.
std::array<size_t, kTablesPerDataset> TableBytes(const DatasetPlan& dataset) {
  return dataset.narrow ? GptSamples<uint32_t>::TableBytes(dataset) : GptSamples<int64_t>::TableBytes(dataset);
}

// Bytes of each table the plan's index has, in Tables' order: each dataset's, then a blend's own.
std::vector<size_t> TableBytes(const SamplePlan& plan) {
  std::vector<size_t> bytes;
  for (const DatasetPlan& dataset : plan.datasets) {
    const std::array<size_t, kTablesPerDataset> tables = TableBytes(dataset);
    bytes.insert(bytes.end(), tables.begin(), tables.end());
  }
  if (plan.datasets.size() > 1) bytes.push_back(static_cast<size_t>(plan.num_samples) * sizeof(uint64_t));
  return bytes;
}

}  // namespace

common::StatusOr<std::vector<WeightedPath>> ParseDataPath(const std::vector<std::string>& args) {
  if (args.empty()) return common::InvalidArgument("--data-path: no dataset given");
  if (args.size() == 1) return std::vector<WeightedPath>{{1.0, args[0]}};
  if (args.size() % 2 != 0) {
    return common::InvalidArgument("--data-path: a blend is pairs of weight and prefix ('0.7 a 0.3 b'); got {} words",
                                   args.size());
  }
  if (args.size() / 2 > kMaxBlended) {
    return common::InvalidArgument("--data-path: a blend of {} datasets; at most {}", args.size() / 2, kMaxBlended);
  }
  std::vector<WeightedPath> paths;
  double total = 0;
  for (size_t i = 0; i < args.size(); i += 2) {
    auto weight = common::ParseDouble(args[i], "--data-path weight");
    if (!weight.ok() || !(*weight > 0)) {
      return common::InvalidArgument("--data-path: weight '{}' (before '{}') is not a positive number", args[i],
                                     args[i + 1]);
    }
    paths.push_back({*weight, args[i + 1]});
    total += *weight;
  }
  for (WeightedPath& path : paths) path.weight /= total;
  return paths;
}

common::StatusOr<std::pair<int64_t, int64_t>> SplitRange(const std::string& split, int64_t count, Split which) {
  std::vector<double> shares;
  for (std::string_view part : common::Split(split, split.find('/') != std::string::npos ? '/' : ',')) {
    std::string_view text = common::Trim(part);
    auto share = common::ParseDouble(text, "--split share", 0.0);
    if (!share.ok()) return common::InvalidArgument("--split '{}': '{}' is not a non-negative number", split, text);
    shares.push_back(*share);
  }
  if (shares.empty() || shares.size() > 3) {
    return common::InvalidArgument("--split '{}': expected up to three shares (train,valid,test)", split);
  }
  shares.resize(3, 0.0);
  const double total = shares[0] + shares[1] + shares[2];
  if (!(total > 0)) return common::InvalidArgument("--split '{}': the shares add up to zero", split);
  int64_t bounds[4] = {0, 0, 0, 0};
  double cumulative = 0;
  for (int i = 0; i < 3; ++i) {
    cumulative += shares[i] / total;
    bounds[i + 1] = static_cast<int64_t>(std::llround(cumulative * static_cast<double>(count)));
  }
  bounds[3] = count;
  const int w = static_cast<int>(which);
  return std::pair<int64_t, int64_t>{bounds[w], bounds[w + 1]};
}

common::StatusOr<std::unique_ptr<TokenSource>> OpenTokenSource(const std::string& prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(prefix + ".idx", ec) || fs::exists(prefix + ".bin", ec)) return OpenIndexedDataset(prefix);
  if (prefix.find_first_of("*?[") != std::string::npos || IsLlmcShard(prefix)) return OpenLlmcShards(prefix);
  if (fs::exists(prefix, ec)) {
    return common::DataLoss("{}: neither a Megatron dataset prefix ({}.bin + {}.idx) nor an llm.c token shard",
                            prefix, prefix, prefix);
  }
  return common::NotFound("{}: no such dataset (looked for {}.bin + {}.idx and an llm.c shard {})", prefix, prefix,
                          prefix, prefix);
}

double DatasetPlan::bytes() const {
  const std::array<size_t, kTablesPerDataset> tables = TableBytes(*this);
  return static_cast<double>(std::accumulate(tables.begin(), tables.end(), size_t{0}));
}

double SamplePlan::bytes() const {
  const std::vector<size_t> tables = TableBytes(*this);
  return static_cast<double>(std::accumulate(tables.begin(), tables.end(), size_t{0}));
}

common::StatusOr<SamplePlan> PlanSamples(const DataConfig& config, Split split, int64_t num_samples) {
  SamplePlan plan{config, split, std::max<int64_t>(num_samples, 1), {}};
  if (config.mock) return plan;
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<WeightedPath> paths, ParseDataPath(config.data_path));
  if (paths.size() > 1 && plan.num_samples > kMaxBlendedSamples) {
    return common::ResourceExhausted("--data-path: a blend of {} samples; at most {}", plan.num_samples,
                                     kMaxBlendedSamples);
  }
  for (const WeightedPath& path : paths) {
    SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<TokenSource> tokens, OpenTokenSource(path.prefix));
    SRUNWAY_ASSIGN_OR_RETURN(auto range, SplitRange(config.split, tokens->size(), split));
    if (range.first == range.second) {
      return common::FailedPrecondition("{}: the {} split '{}' leaves no documents of {}", path.prefix,
                                        split == Split::kTrain ? "training" : "validation", config.split,
                                        tokens->size());
    }
    DatasetPlan dataset{std::shared_ptr<TokenSource>(std::move(tokens)), path.weight, range.first, range.second};
    std::array<int64_t, 4096> lengths;
    size_t held = 0;
    for (int64_t d = dataset.begin; d < dataset.end; ++d) {
      dataset.tokens_per_epoch += lengths[held++] = dataset.tokens->length(d);
      if (held == lengths.size() || d + 1 == dataset.end) {
        dataset.lengths_hash = XXH3_64bits_withSeed(lengths.data(), held * sizeof lengths[0], dataset.lengths_hash);
        held = 0;
      }
    }
    const int64_t tokens_per_epoch = dataset.tokens_per_epoch;
    if (tokens_per_epoch <= config.seq_len) {
      return common::FailedPrecondition("{}: documents {}..{} hold {} tokens, fewer than one sample of {} + 1",
                                        dataset.tokens->name(), dataset.begin, dataset.end, tokens_per_epoch,
                                        config.seq_len);
    }
    // As Megatron: each dataset of a blend is built a little larger than its share, so rounding never runs short.
    dataset.num_samples = paths.size() == 1
                              ? plan.num_samples
                              : static_cast<int64_t>(std::ceil(path.weight * plan.num_samples * 1.005));
    // Counted in 64 bits (the trainer keeps samples x tokens within them; a blend's shares are 0.5% larger).
    const double wanted = static_cast<double>(dataset.num_samples) * config.seq_len;
    const double positions = (wanted / static_cast<double>(tokens_per_epoch) + 1) *
                             static_cast<double>(dataset.end - dataset.begin);
    if (wanted > 0x1p62 || positions > 0x1p62) {
      return common::ResourceExhausted("{}: {} samples of {} tokens pass {:.3g} documents, more than any index holds",
                                       dataset.tokens->name(), dataset.num_samples, config.seq_len, positions);
    }
    // Megatron's epochs: enough for the samples and the one token past the last; every sample of them is in the
    // order, the last epoch's apart when the run takes under 80% of it (else those would be drawn as often as the
    // earlier epochs' and some documents seen twice before others once).
    const int64_t seq_len = config.seq_len;
    dataset.epochs = (dataset.num_samples * seq_len + tokens_per_epoch) / tokens_per_epoch;
    dataset.epoch_samples = (dataset.epochs * tokens_per_epoch - 1) / seq_len;
    dataset.shuffled_first = dataset.epoch_samples;
    if (dataset.epochs > 1) {
      const int64_t before_last = ((dataset.epochs - 1) * tokens_per_epoch - 1) / seq_len;
      const int64_t per_epoch = (tokens_per_epoch - 1) / seq_len;
      if (dataset.num_samples - before_last < static_cast<int64_t>(0.8 * static_cast<double>(per_epoch))) {
        dataset.shuffled_first = before_last;
      }
    }
    constexpr double kNarrow = std::numeric_limits<uint32_t>::max();
    const double entries = static_cast<double>(dataset.epochs) * static_cast<double>(dataset.end - dataset.begin);
    dataset.narrow = !config.wide_index && entries <= kNarrow && static_cast<double>(dataset.end) <= kNarrow;
    plan.datasets.push_back(std::move(dataset));
  }
  return plan;
}

namespace {

uint64_t SeedOf(const SamplePlan& plan) { return plan.config.seed + 7919 * static_cast<uint64_t>(plan.split); }

template <typename Index>
common::StatusOr<std::unique_ptr<IndexedSamples>> BuildDataset(const SamplePlan& plan, const DatasetPlan& dataset) {
  SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<IndexedSamples> samples,
                           GptSamples<Index>::Build(dataset, plan.config.seq_len, plan.config.vocab, SeedOf(plan),
                                                    plan.config.stop));
  return samples;
}

// The index of a plan with datasets (not --mock-data), built.
common::StatusOr<std::unique_ptr<IndexedSamples>> BuildIndexed(const SamplePlan& plan) {
  std::vector<std::unique_ptr<IndexedSamples>> sources;
  std::vector<double> weights;
  for (const DatasetPlan& dataset : plan.datasets) {
    SRUNWAY_ASSIGN_OR_RETURN(auto samples, dataset.narrow ? BuildDataset<uint32_t>(plan, dataset)
                                                          : BuildDataset<int64_t>(plan, dataset));
    sources.push_back(std::move(samples));
    weights.push_back(dataset.weight);
  }
  if (sources.size() == 1) return std::move(sources[0]);
  SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<IndexedSamples> blend,
                           BlendedSamples::Build(std::move(sources), weights, plan.num_samples, plan.config.stop));
  return blend;
}

// The cache file: "SRWYSIDX", the plan's fingerprint, the number of tables and each one's bytes (uint64 each), then
// the tables (Tables' order), each starting at a multiple of 8 bytes.
constexpr std::string_view kCacheMagic = "SRWYSIDX";

size_t Aligned(size_t bytes) { return (bytes + 7) & ~size_t{7}; }

// What the file holds depends on, hashed: a cache file of another plan (other data, split, seed, epochs) never
// matches, nor one of the same files prepared again with other document lengths (documents reordered, another
// tokenizer giving the same totals). A dataset's tables hold its epochs' documents, not its samples (their order
// is computed from the plan), so runs of other lengths over the same epochs share the file; a blend's table holds
// the run's samples.
uint64_t Fingerprint(const SamplePlan& plan) {
  std::string text = fmt::format("v3 split {} seed {} seq {} vocab {}", static_cast<int>(plan.split),
                                 plan.config.seed, plan.config.seq_len, plan.config.vocab);
  if (plan.datasets.size() > 1) text += fmt::format(" blend of {} samples", plan.num_samples);
  for (const DatasetPlan& d : plan.datasets) {
    text += fmt::format("|{} docs {} [{}, {}) tokens {} lengths {:016x} epochs {} weight {} narrow {}",
                        d.tokens->name(), d.tokens->size(), d.begin, d.end, d.tokens_per_epoch, d.lengths_hash,
                        d.epochs, d.weight, d.narrow);
  }
  return XXH3_64bits(text.data(), text.size());
}

template <typename Index>
std::unique_ptr<IndexedSamples> MapDataset(const SamplePlan& plan, const DatasetPlan& dataset,
                                           std::shared_ptr<const MappedFile> mapping,
                                           std::span<const std::span<const uint8_t>, kTablesPerDataset> tables) {
  return GptSamples<Index>::Mapped(dataset, plan.config.seq_len, plan.config.vocab, SeedOf(plan), std::move(mapping),
                                   tables);
}

// The plan's index from a cache file; NotFound where the file is missing, FailedPrecondition where it is of
// another plan or cut short (it is then rebuilt).
common::StatusOr<std::unique_ptr<IndexedSamples>> MapIndexed(const SamplePlan& plan, const std::filesystem::path& path) {
  SRUNWAY_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, MappedFile::Open(path));
  const std::span<const uint8_t> bytes = mapping->bytes();
  const std::vector<size_t> sizes = TableBytes(plan);
  size_t offset = Aligned(kCacheMagic.size() + 8 * (2 + sizes.size()));
  uint64_t header[2];
  if (bytes.size() < offset) return common::FailedPrecondition("{}: cut short", path.string());
  std::memcpy(header, bytes.data() + kCacheMagic.size(), sizeof header);
  if (std::string_view(reinterpret_cast<const char*>(bytes.data()), kCacheMagic.size()) != kCacheMagic ||
      header[0] != Fingerprint(plan) || header[1] != sizes.size()) {
    return common::FailedPrecondition("{}: not this run's index", path.string());
  }
  std::vector<std::span<const uint8_t>> tables;
  for (size_t i = 0; i < sizes.size(); ++i) {
    uint64_t size;
    std::memcpy(&size, bytes.data() + kCacheMagic.size() + 8 * (2 + i), sizeof size);
    if (size != sizes[i] || offset + size > bytes.size()) {
      return common::FailedPrecondition("{}: table {} holds {} bytes, not {}", path.string(), i, size, sizes[i]);
    }
    tables.push_back(bytes.subspan(offset, size));
    offset += Aligned(size);
  }
  std::vector<std::unique_ptr<IndexedSamples>> sources;
  for (size_t d = 0; d < plan.datasets.size(); ++d) {
    const DatasetPlan& dataset = plan.datasets[d];
    const std::span<const std::span<const uint8_t>, kTablesPerDataset> own(tables.data() + kTablesPerDataset * d,
                                                                           kTablesPerDataset);
    sources.push_back(dataset.narrow ? MapDataset<uint32_t>(plan, dataset, mapping, own)
                                     : MapDataset<int64_t>(plan, dataset, mapping, own));
  }
  if (sources.size() == 1) return std::move(sources[0]);
  return std::unique_ptr<IndexedSamples>(BlendedSamples::Mapped(std::move(sources), mapping, tables.back()));
}

common::Status WriteCache(const IndexedSamples& index, uint64_t fingerprint, const std::filesystem::path& path) {
  const std::vector<std::span<const uint8_t>> tables = index.Tables();
  std::string header(kCacheMagic);
  for (uint64_t word : {fingerprint, static_cast<uint64_t>(tables.size())}) {
    header.append(reinterpret_cast<const char*>(&word), sizeof word);
  }
  for (std::span<const uint8_t> table : tables) {
    const uint64_t size = table.size();
    header.append(reinterpret_cast<const char*>(&size), sizeof size);
  }
  header.resize(Aligned(header.size()), '\0');
  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile file, common::AtomicFile::Create(path));
  SRUNWAY_RETURN_IF_ERROR(file.Write(header));
  for (std::span<const uint8_t> table : tables) {
    SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(table.data()), table.size()}));
    SRUNWAY_RETURN_IF_ERROR(file.Write(std::string(Aligned(table.size()) - table.size(), '\0')));
  }
  return file.Commit();
}

// Every sample read under GuardMappedReads: the datasets' files (and a cache file) are mapped, and one cut short
// under the run stops it with a line naming the file instead of a bus error.
class GuardedSamples : public SampleSource {
 public:
  explicit GuardedSamples(std::unique_ptr<SampleSource> samples) : samples_(std::move(samples)) {}
  common::Status Sample(int64_t index, std::vector<int32_t>& out) override {
    return GuardMappedReads([&] { return samples_->Sample(index, out); });
  }
  int64_t IndexBytes() const override { return samples_->IndexBytes(); }

 private:
  std::unique_ptr<SampleSource> samples_;
};

std::unique_ptr<SampleSource> Guarded(std::unique_ptr<IndexedSamples> samples) {
  return std::make_unique<GuardedSamples>(std::move(samples));
}

}  // namespace

common::StatusOr<std::unique_ptr<SampleSource>> BuildSamples(SamplePlan plan) {
  const DataConfig& config = plan.config;
  if (config.mock) return std::unique_ptr<SampleSource>(new MockSamples(config.seq_len, config.vocab, SeedOf(plan)));
  SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<IndexedSamples> index, BuildIndexed(plan));
  return Guarded(std::move(index));
}

std::filesystem::path SampleCachePath(const SamplePlan& plan, const std::filesystem::path& dir) {
  static constexpr const char* kSplits[] = {"train", "valid", "test"};
  return dir / fmt::format("{:016x}-{}.sidx", Fingerprint(plan), kSplits[static_cast<int>(plan.split)]);
}

common::StatusOr<std::unique_ptr<SampleSource>> CachedSamples(const SamplePlan& plan,
                                                               const std::filesystem::path& dir, bool build,
                                                               bool* built) {
  if (built != nullptr) *built = false;
  if (plan.config.mock) return BuildSamples(plan);
  const std::filesystem::path path = SampleCachePath(plan, dir);
  auto mapped = MapIndexed(plan, path);
  if (mapped.ok()) return Guarded(std::move(*mapped));
  if (!build) return mapped.status();
  if (built != nullptr) *built = true;
  SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<IndexedSamples> index, BuildIndexed(plan));
  SRUNWAY_RETURN_IF_ERROR(WriteCache(*index, Fingerprint(plan), path));
  // Read back from the file, so that this process too holds the index in the shared page cache only.
  index.reset();
  SRUNWAY_ASSIGN_OR_RETURN(std::unique_ptr<IndexedSamples> cached, MapIndexed(plan, path));
  return Guarded(std::move(cached));
}

common::StatusOr<std::unique_ptr<SampleSource>> BuildSamples(const DataConfig& config, Split split,
                                                              int64_t num_samples) {
  SRUNWAY_ASSIGN_OR_RETURN(SamplePlan plan, PlanSamples(config, split, num_samples));
  return BuildSamples(std::move(plan));
}

}  // namespace srunway::trainer
