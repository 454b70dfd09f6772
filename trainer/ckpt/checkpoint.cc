// Checkpoint writer and reader.
#include "trainer/ckpt/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <set>

// xxHash, compiled into this file (no library to link or install).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/parse.h"
#include "trainer/data/indexed_dataset.h"

namespace srunway::trainer {
namespace {

constexpr char kMagic[8] = {'S', 'R', 'W', 'Y', 'C', 'K', 'P', 'T'};
constexpr char kEndMagic[8] = {'S', 'R', 'W', 'Y', 'E', 'N', 'D', '\0'};
// Version 2 checks each tensor with its own XXH3-64; version 1 (still read) had one FNV-1a over all three, at under
// 1 GB/s, and so made every rank read every byte of every shard it loaded.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kVersionFnv = 1;
constexpr char kLatest[] = "latest_checkpointed_iteration.txt";
constexpr const char* kTensorNames[] = {"params", "adam_m", "adam_v"};

uint64_t Fnv1a(uint64_t hash, std::span<const uint8_t> bytes) {
  for (uint8_t b : bytes) {
    hash ^= b;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

// The trailer after the `tensors` tensors: their checksums, then the end marker.
size_t TrailerBytes(uint32_t version, size_t tensors) {
  return (version == kVersionFnv ? 1 : tensors) * sizeof(uint64_t) + sizeof kEndMagic;
}

// The elements `ranges` hold, each checked to lie within `numel` parameters (InvalidArgument naming the `what`
// range that does not).
common::StatusOr<int64_t> CountWithin(const std::vector<ParamRange>& ranges, int64_t numel, std::string_view what) {
  int64_t held = 0;
  for (const ParamRange& r : ranges) {
    if (r.offset < 0 || r.count < 0 || r.offset > numel || r.count > numel - r.offset) {
      return common::InvalidArgument("{} range [{}, +{}) is outside the {} parameters", what, r.offset, r.count, numel);
    }
    held += r.count;
  }
  return held;
}

std::span<const uint8_t> AsBytes(std::span<const float> values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()};
}

// Where CommitShards sets aside an earlier checkpoint of the step it commits.
std::filesystem::path ReplacedDir(const std::filesystem::path& dir, int64_t step) {
  return dir / fmt::format(".replaced_iter_{:07d}", step);
}

// The step latest_checkpointed_iteration.txt in `dir` names: an error from reading it, or InvalidArgument (naming
// the file) when it holds no step.
common::StatusOr<int64_t> ReadLatest(const std::filesystem::path& dir) {
  SRUNWAY_ASSIGN_OR_RETURN(std::string text, common::ReadFile(dir / kLatest));
  return common::ParseInt(common::Trim(text), (dir / kLatest).string(), 0);
}

// The complete checkpoints in a --save directory by step: a sharded directory with its manifest, or a single file.
common::StatusOr<std::vector<std::pair<int64_t, std::filesystem::path>>> CompleteCheckpoints(
    const std::filesystem::path& dir) {
  std::vector<std::pair<int64_t, std::filesystem::path>> complete;
  std::error_code ec;
  // Without throwing: an entry that cannot be looked at (no permission) is no complete checkpoint, and a listing that
  // fails midway is an error, where either ended the program with an uncaught filesystem_error.
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("iter_")) continue;
    std::error_code unseen;
    const bool sharded = entry.is_directory(unseen) && std::filesystem::exists(entry.path() / "manifest.json", unseen);
    const bool single = name.ends_with(".ckpt") && entry.is_regular_file(unseen);
    if (!sharded && !single) continue;
    auto step = common::ParseInt(name.substr(5, 7), name, 0);
    if (step.ok()) complete.emplace_back(*step, entry.path());
  }
  if (ec) return common::Unavailable("list {}: {}", dir.string(), ec.message());
  std::sort(complete.begin(), complete.end());
  return complete;
}

// CompleteCheckpoints' steps for an error line: "step 10, 20", or "none".
std::string StepsOf(const std::vector<std::pair<int64_t, std::filesystem::path>>& complete) {
  if (complete.empty()) return "none";
  std::vector<int64_t> steps;
  for (const auto& [step, path] : complete) steps.push_back(step);
  return fmt::format("step {}", fmt::join(steps, ", "));
}

}  // namespace

namespace {

// One checkpoint file: the header (the state, the tensors' sizes, `ranges` for a shard), the tensors (the
// parameters, then the moments unless they are left out), their checksums and the end marker; written to a
// temporary name, fsynced and renamed. Each tensor is written as its pieces, one after another.
using Pieces = std::vector<std::span<const float>>;

common::Status WriteCheckpointFile(const std::filesystem::path& path, const TrainingState& state,
                                   const std::vector<ParamRange>* ranges, const std::vector<Pieces>& tensors) {
  common::Json header;
  header["format"] = "srunway-checkpoint";
  header["version"] = kVersion;
  header["model"] = ToJson(state.model);
  header["step"] = state.step;
  header["consumed_samples"] = state.consumed_samples;
  if (state.rng) header["rng"] = *state.rng;
  header["extra"] = state.extra;
  if (ranges != nullptr) {
    header["ranges"] = common::Json::array();
    for (const ParamRange& r : *ranges) header["ranges"].push_back({r.offset, r.count});
  }
  header["tensors"] = common::Json::array();
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t numel = 0;
    for (std::span<const float> piece : tensors[i]) numel += piece.size();
    header["tensors"].push_back({{"name", kTensorNames[i]}, {"numel", numel}, {"checksum", "xxh3-64"}});
  }
  std::string text = header.dump();
  const uint64_t length = text.size();

  std::string head(kMagic, sizeof kMagic);
  head.append(reinterpret_cast<const char*>(&kVersion), 4);
  head.append(4, '\0');
  head.append(reinterpret_cast<const char*>(&length), 8);
  head += text;
  head.append((64 - head.size() % 64) % 64, '\0');

  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile file, common::AtomicFile::Create(path));
  SRUNWAY_RETURN_IF_ERROR(file.Write(head));
  std::string tail;
  for (const Pieces& pieces : tensors) {
    XXH3_state_t hash;
    XXH3_64bits_reset(&hash);
    for (std::span<const float> piece : pieces) {
      std::span<const uint8_t> bytes = AsBytes(piece);
      XXH3_64bits_update(&hash, bytes.data(), bytes.size());
      SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(bytes.data()), bytes.size()}));
    }
    const uint64_t digest = XXH3_64bits_digest(&hash);
    tail.append(reinterpret_cast<const char*>(&digest), sizeof digest);
  }
  tail.append(kEndMagic, sizeof kEndMagic);
  SRUNWAY_RETURN_IF_ERROR(file.Write(tail));
  return file.Commit();
}

}  // namespace

common::StatusOr<std::filesystem::path> SaveCheckpoint(const std::filesystem::path& dir, const TrainingState& state,
                                                       const CheckpointBuffers& buffers) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return common::FailedPrecondition("create checkpoint directory {}: {}", dir.string(), ec.message());
  const std::filesystem::path path = dir / fmt::format("iter_{:07d}.ckpt", state.step);
  SRUNWAY_RETURN_IF_ERROR(
      WriteCheckpointFile(path, state, nullptr, {{buffers.params}, {buffers.adam_m}, {buffers.adam_v}}));
  // The pointer last: until it is replaced, a reader loads the previous complete checkpoint.
  SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(dir / kLatest, fmt::format("{}\n", state.step)));
  return path;
}

std::filesystem::path ShardDir(const std::filesystem::path& dir, int64_t step) {
  return dir / fmt::format("iter_{:07d}", step);
}

std::filesystem::path StagingDir(const std::filesystem::path& dir, int64_t step) {
  return dir / fmt::format(".saving_iter_{:07d}", step);
}

std::string ShardName(int rank, int ranks) { return fmt::format("shard_{:05d}_of_{:05d}.ckpt", rank, ranks); }

common::Status WriteShard(const std::filesystem::path& dir, const TrainingState& state, int rank, int ranks,
                          const std::vector<ParamRange>& ranges, const std::array<ShardTensor, 3>& tensors,
                          bool moments) {
  const std::filesystem::path shard_dir = StagingDir(dir, state.step);
  std::error_code ec;
  std::filesystem::create_directories(shard_dir, ec);
  if (ec) return common::FailedPrecondition("create checkpoint directory {}: {}", shard_dir.string(), ec.message());
  const int64_t numel = ParamLayout(state.model).numel();
  SRUNWAY_ASSIGN_OR_RETURN(const int64_t held, CountWithin(ranges, numel, "shard"));
  const char* names[] = {"parameters", "first moments", "second moments"};
  std::vector<Pieces> pieces(moments ? tensors.size() : 1);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const ShardTensor& t = tensors[i];
    const int64_t want = t.whole ? numel : held;
    if (static_cast<int64_t>(t.data.size()) != want) {
      return common::InvalidArgument("shard of {} elements of {} parameters: {} {} {}, want {}", held, numel,
                                     t.data.size(), t.whole ? "whole" : "packed", names[i], want);
    }
    if (!t.whole) {
      pieces[i] = {t.data};
      continue;
    }
    for (const ParamRange& r : ranges) {
      pieces[i].push_back(t.data.subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.count)));
    }
  }
  return WriteCheckpointFile(shard_dir / ShardName(rank, ranks), state, &ranges, pieces);
}

common::Status CommitShards(const std::filesystem::path& dir, int64_t step, int ranks) {
  const std::filesystem::path staging = StagingDir(dir, step), shard_dir = ShardDir(dir, step);
  common::Json manifest = {{"format", "srunway-sharded-checkpoint"}, {"version", kVersion}, {"step", step},
                           {"ranks", ranks}, {"shards", common::Json::array()}};
  std::set<std::string> names;
  for (int r = 0; r < ranks; ++r) {
    const std::filesystem::path shard = staging / ShardName(r, ranks);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(shard, ec);
    if (ec) return common::DataLoss("{}: {} (every rank said it was written)", shard.string(), ec.message());
    manifest["shards"].push_back({{"file", ShardName(r, ranks)}, {"bytes", bytes}});
    names.insert(ShardName(r, ranks));
  }
  // An earlier attempt's files (it died, or ran on another number of ranks) are not this checkpoint's: listed
  // first (without the iterator's throwing increment), then removed.
  std::error_code ec;
  std::vector<std::filesystem::path> stray;
  for (std::filesystem::directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec)) {
    if (!names.contains(it->path().filename().string())) stray.push_back(it->path());
  }
  for (const std::filesystem::path& path : stray) std::filesystem::remove_all(path, ec);
  SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(staging / "manifest.json", manifest.dump(1) + "\n"));
  // A checkpoint of this step from before (the run was rewound to an older one) is replaced whole: set aside,
  // the new one renamed into place, then deleted.
  const std::filesystem::path replaced = ReplacedDir(dir, step);
  const bool replacing = std::filesystem::exists(shard_dir, ec);
  if (replacing) {
    std::filesystem::remove_all(replaced, ec);
    std::filesystem::rename(shard_dir, replaced, ec);
    if (ec) return common::Unavailable("move {} aside: {}", shard_dir.string(), ec.message());
  }
  std::filesystem::rename(staging, shard_dir, ec);
  if (ec) return common::Unavailable("rename {} to {}: {}", staging.string(), shard_dir.string(), ec.message());
  // The pointer last: until it is replaced, a reader loads the previous complete checkpoint.
  SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(dir / kLatest, fmt::format("{}\n", step)));
  // Also one set aside by a save that died between its renames (LoadFrom fell back to it until now).
  std::filesystem::remove_all(replaced, ec);
  return common::Status::Ok();
}

common::StatusOr<std::vector<RemovedSave>> RemoveUnfinishedSaves(const std::filesystem::path& dir) {
  std::vector<RemovedSave> removed;
  std::error_code ec;
  // Listed first (without the iterator's throwing increment), then removed.
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().starts_with(".saving_iter_") && it->is_directory(ec)) {
      removed.push_back({it->path()});
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return common::Unavailable("list {}: {}", dir.string(), ec.message());
  }
  for (RemovedSave& save : removed) {
    for (std::filesystem::directory_iterator it(save.path, ec), end; !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec)) save.bytes += it->file_size(ec);
    }
    std::filesystem::remove_all(save.path, ec);
    if (ec) return common::Unavailable("delete {}: {}", save.path.string(), ec.message());
  }
  return removed;
}

namespace {

// Deletes the complete checkpoints in `dir` older than the one `latest` names that `drop(index, count, step)`
// picks (index counts the `count` complete ones up to `latest`, oldest first). Those after `latest` (a run that
// went back to an earlier step left them, until it saves those steps again) are neither deleted nor counted: they
// are not this run's newest.
template <typename Drop>
common::StatusOr<std::vector<std::string>> DeleteOlder(const std::filesystem::path& dir, Drop drop) {
  std::vector<std::string> deleted;
  auto read = ReadLatest(dir);
  if (!read.ok() && read.status().code() != common::StatusCode::kInvalidArgument) return deleted;  // none to keep
  SRUNWAY_ASSIGN_OR_RETURN(int64_t latest, std::move(read));
  SRUNWAY_ASSIGN_OR_RETURN(auto complete, CompleteCheckpoints(dir));
  std::erase_if(complete, [latest](const auto& checkpoint) { return checkpoint.first > latest; });
  std::error_code ec;
  for (size_t i = 0; i < complete.size(); ++i) {
    const auto& [step, path] = complete[i];
    if (step >= latest || !drop(i, complete.size(), step)) continue;  // never the newest complete one
    std::filesystem::remove_all(path, ec);
    if (ec) return common::Unavailable("delete {}: {}", path.string(), ec.message());
    deleted.push_back(path.string());
  }
  return deleted;
}

}  // namespace

common::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::filesystem::path& dir, int keep) {
  if (keep <= 0) return std::vector<std::string>{};
  return DeleteOlder(dir, [keep](size_t index, size_t count, int64_t) {
    return static_cast<int64_t>(index) < static_cast<int64_t>(count) - keep;
  });
}

common::StatusOr<std::vector<std::string>> PruneUnretained(const std::filesystem::path& dir, int64_t interval) {
  if (interval <= 0) return std::vector<std::string>{};
  return DeleteOlder(dir, [interval](size_t, size_t, int64_t step) { return step % interval != 0; });
}

std::string LastCompleteCheckpoint(const std::filesystem::path& dir) {
  auto step = ReadLatest(dir);
  if (!step.ok()) return fmt::format("there is no complete checkpoint in {} yet", dir.string());
  return fmt::format("the last complete checkpoint in {} stays (step {})", dir.string(), *step);
}

namespace {

// A missing key (JsonField's NotFound) or a bad value in a checkpoint's header or manifest is corrupt data: as
// NotFound it read as "no checkpoint yet", and a resume started from scratch and saved over the checkpoints.
template <typename T>
common::StatusOr<T> AsDataLoss(common::StatusOr<T> read) {
  if (read.ok() || read.status().code() == common::StatusCode::kDataLoss) return read;
  return common::DataLoss("{}", read.status().message());
}

common::StatusOr<CheckpointHeader> ParseCheckpointHeader(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    // A safetensors file (--export's) starts with its header's length, then the JSON header.
    if (bytes.size() > 8 && bytes[8] == '{') {
      return common::DataLoss("{}: not a srunway checkpoint but a safetensors file (--export's weights, without the "
                              "optimizer state and data position that --load resumes)", name);
    }
    return common::DataLoss("{}: not a srunway checkpoint (bad magic)", name);
  }
  uint32_t version;
  uint64_t length;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&length, bytes.data() + 16, 8);
  if (version != kVersion && version != kVersionFnv) {
    return common::DataLoss("{}: checkpoint version {} (this build reads {} and {})", name, version, kVersionFnv,
                            kVersion);
  }
  if (length > bytes.size() - 24) return common::DataLoss("{}: truncated header", name);
  SRUNWAY_ASSIGN_OR_RETURN(common::Json header,
                           common::ParseJson({reinterpret_cast<const char*>(bytes.data() + 24), length}, name));
  SRUNWAY_ASSIGN_OR_RETURN(common::Json model_json, common::JsonField<common::Json>(header, "model", name));
  CheckpointHeader read;
  read.version = version;
  TrainingState& state = read.state;
  SRUNWAY_ASSIGN_OR_RETURN(state.model, FromJson(model_json, name + ": model"));
  SRUNWAY_ASSIGN_OR_RETURN(state.step, common::JsonField<int64_t>(header, "step", name));
  SRUNWAY_ASSIGN_OR_RETURN(state.consumed_samples, common::JsonField<int64_t>(header, "consumed_samples", name));
  if (state.step < 0 || state.consumed_samples < 0) {
    return common::DataLoss("{}: step {} and consumed_samples {} cannot be negative", name, state.step,
                            state.consumed_samples);
  }
  if (!header.contains("rng")) {
    state.rng.reset();  // saved with --no-save-rng
  } else {
    const common::Json& rng = header["rng"];
    if (!rng.is_array() || rng.size() != state.rng->size()) {
      return common::DataLoss("{}: rng is not an array of {} numbers", name, state.rng->size());
    }
    for (size_t i = 0; i < state.rng->size(); ++i) {
      SRUNWAY_ASSIGN_OR_RETURN((*state.rng)[i],
                               common::JsonInteger<uint64_t>(rng[i], fmt::format("{}: rng[{}]", name, i)));
    }
  }
  // The tensors the file holds: all three, or the parameters alone (--no-save-optim). Version 1 did not list them.
  if (header.contains("tensors")) {
    const common::Json& tensors = header["tensors"];
    if (!tensors.is_array() || (tensors.size() != 1 && tensors.size() != 3)) {
      return common::DataLoss("{}: tensors is not a list of 1 or 3 tensors", name);
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::string where = fmt::format("{}: tensors[{}]", name, i);
      SRUNWAY_ASSIGN_OR_RETURN(std::string tensor, common::JsonField<std::string>(tensors[i], "name", where));
      if (tensor != kTensorNames[i]) return common::DataLoss("{} is {}, not {}", where, tensor, kTensorNames[i]);
    }
    read.moments = tensors.size() == 3;
  }
  state.extra = header.value("extra", common::Json::object());
  if (!state.extra.is_object()) return common::DataLoss("{}: extra is not an object", name);
  if (header.contains("ranges")) {
    const common::Json& ranges = header["ranges"];
    if (!ranges.is_array()) return common::DataLoss("{}: ranges is not an array", name);
    read.ranges.emplace();
    for (size_t i = 0; i < ranges.size(); ++i) {
      const std::string where = fmt::format("{}: ranges[{}]", name, i);
      if (!ranges[i].is_array() || ranges[i].size() != 2) return common::DataLoss("{} is not [offset, count]", where);
      SRUNWAY_ASSIGN_OR_RETURN(int64_t offset, common::JsonInteger<int64_t>(ranges[i][0], where));
      SRUNWAY_ASSIGN_OR_RETURN(int64_t count, common::JsonInteger<int64_t>(ranges[i][1], where));
      read.ranges->emplace_back(offset, count);
    }
  }
  read.data_offset = 24 + length;
  read.data_offset += (64 - read.data_offset % 64) % 64;
  return read;
}

}  // namespace

common::StatusOr<CheckpointHeader> ReadCheckpointHeader(std::span<const uint8_t> bytes, const std::string& name) {
  return AsDataLoss(ParseCheckpointHeader(bytes, name));
}

namespace {

// Whether any element is in both sets of ranges.
bool Overlap(const std::vector<ParamRange>& a, const std::vector<ParamRange>& b) {
  for (const ParamRange& x : a) {
    for (const ParamRange& y : b) {
      if (std::max(x.offset, y.offset) < std::min(x.offset + x.count, y.offset + y.count)) return true;
    }
  }
  return false;
}

// The elements of the range `r` (read from `from`) that fall in any of `packed`'s ranges, into their places in
// `target`, which holds those ranges one after another.
void CopyOverlaps(const ParamRange& r, const float* from, const std::vector<ParamRange>& packed,
                  std::span<float> target) {
  int64_t at = 0;
  for (const ParamRange& p : packed) {
    const int64_t begin = std::max(r.offset, p.offset), end = std::min(r.offset + r.count, p.offset + p.count);
    if (begin < end) {
      std::memcpy(target.data() + at + (begin - p.offset), from + (begin - r.offset),
                  static_cast<size_t>(end - begin) * sizeof(float));
    }
    at += p.count;
  }
}

// A checkpoint's header copied out of its mapping under the bus-error guard (ReadCheckpointHeader builds strings as
// it reads, so it cannot run under it): the fixed 24 bytes and the JSON their length names, as much of it as the
// file holds (ReadCheckpointHeader says what is missing); a file without the magic, just its first bytes.
common::StatusOr<std::vector<uint8_t>> HeaderBytes(std::span<const uint8_t> bytes) {
  SRUNWAY_ASSIGN_OR_RETURN(std::vector<uint8_t> fixed,
                           CopyMappedBytes(bytes.first(std::min<size_t>(bytes.size(), 24))));
  if (fixed.size() < 24 || std::memcmp(fixed.data(), kMagic, 8) != 0) return fixed;
  uint64_t length;
  std::memcpy(&length, fixed.data() + 16, 8);
  return CopyMappedBytes(bytes.first(24 + std::min<uint64_t>(length, bytes.size() - 24)));
}

// One checkpoint file, checked: its state, the ranges it holds (the whole buffer for a single checkpoint) and
// its three tensors, copied into `buffers` at those ranges.
common::StatusOr<TrainingState> ReadCheckpointFile(const std::filesystem::path& path, const ModelConfig& expected,
                                                   const CheckpointBuffers& buffers,
                                                   std::vector<ParamRange>* ranges_read) {
  SRUNWAY_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  std::span<const uint8_t> bytes = mapped->bytes();
  const std::string name = path.string();
  SRUNWAY_ASSIGN_OR_RETURN(const std::vector<uint8_t> head, HeaderBytes(bytes));
  SRUNWAY_ASSIGN_OR_RETURN(CheckpointHeader read, ReadCheckpointHeader(head, name));
  TrainingState& state = read.state;
  if (!(state.model == expected)) {
    return common::FailedPrecondition("{}: the checkpoint is of another model: {}", name,
                                      DescribeDifference(state.model, expected));
  }
  const int64_t numel = static_cast<int64_t>(buffers.params.size());
  std::vector<ParamRange> ranges = {{0, numel}};
  int64_t held = numel;
  if (read.ranges) {
    ranges.clear();
    held = 0;
    for (const auto& [offset, count] : *read.ranges) {
      if (offset < 0 || count < 0 || offset > numel || count > numel - offset) {
        return common::DataLoss("{}: range [{}, +{}) is outside this model's {} parameters", name, offset, count, numel);
      }
      ranges.push_back({offset, count});
      held += count;
    }
  }
  // A rank's moment slices may lie outside this shard: its moments are then neither checked nor read from disk.
  const bool moments_here = buffers.moment_ranges == nullptr || Overlap(ranges, *buffers.moment_ranges);
  if (moments_here && !read.moments) {
    return common::FailedPrecondition("{}: saved without optimizer state (--no-save-optim): resume from it with "
                                      "--no-load-optim (AdamW's moments start at zero) or --finetune", name);
  }
  const size_t tensors = read.moments ? 3 : 1;
  size_t offset = read.data_offset;
  const size_t section = static_cast<size_t>(held) * sizeof(float);
  const size_t need = offset + tensors * section, trailer = TrailerBytes(read.version, tensors);
  if (bytes.size() != need + trailer) {
    return common::DataLoss("{}: {} bytes, expected {} for this model (truncated or not this model's)", name,
                            bytes.size(), need + trailer);
  }
  // The reads of the tensors (and of the trailer) under the bus-error guard: a file cut short or unreadable while it
  // is read (rewritten in place, a file system's I/O error) is a line naming it, not a silent SIGBUS. Nothing below
  // holds an object with a destructor while it reads the mapping.
  SRUNWAY_RETURN_IF_ERROR(GuardMappedReads([&]() -> common::Status {
    if (std::memcmp(bytes.data() + need + trailer - sizeof kEndMagic, kEndMagic, sizeof kEndMagic) != 0) {
      return common::DataLoss("{}: missing end marker", name);
    }
    auto stored_hash = [&](size_t i) {
      uint64_t hash;
      std::memcpy(&hash, bytes.data() + need + i * sizeof hash, sizeof hash);
      return hash;
    };
    if (read.version == kVersionFnv && Fnv1a(kFnvOffset, bytes.subspan(offset, need - offset)) != stored_hash(0)) {
      return common::DataLoss("{}: checksum mismatch: the tensors are corrupt", name);
    }
    const std::array<std::span<float>, 3> targets = {buffers.params, buffers.adam_m, buffers.adam_v};
    for (size_t t = 0; t < tensors; ++t, offset += section) {
      const bool packed = t > 0 && buffers.moment_ranges != nullptr;
      if (t > 0 && !moments_here) continue;
      if (read.version != kVersionFnv && XXH3_64bits(bytes.data() + offset, section) != stored_hash(t)) {
        return common::DataLoss("{}: checksum mismatch: the tensor {} is corrupt", name, kTensorNames[t]);
      }
      size_t at = offset;
      for (const ParamRange& r : ranges) {
        const auto* from = reinterpret_cast<const float*>(bytes.data() + at);
        if (packed) {
          CopyOverlaps(r, from, *buffers.moment_ranges, targets[t]);
        } else {
          std::memcpy(targets[t].data() + r.offset, from, static_cast<size_t>(r.count) * sizeof(float));
        }
        at += static_cast<size_t>(r.count) * sizeof(float);
      }
    }
    return common::Status::Ok();
  }));
  if (ranges_read != nullptr) *ranges_read = std::move(ranges);
  return state;
}

// A sharded checkpoint's manifest.json: its step and the shards it lists, each a file of the directory.
struct Manifest {
  std::filesystem::path path;
  int64_t step = 0;
  std::vector<std::filesystem::path> shards;  // at least one
};

common::StatusOr<Manifest> ParseManifest(const std::filesystem::path& shard_dir) {
  Manifest read;
  read.path = shard_dir / "manifest.json";
  const std::string name = read.path.string();
  SRUNWAY_ASSIGN_OR_RETURN(std::string text, common::ReadFile(read.path));
  SRUNWAY_ASSIGN_OR_RETURN(common::Json manifest, common::ParseJson(text, name));
  SRUNWAY_ASSIGN_OR_RETURN(read.step, common::JsonField<int64_t>(manifest, "step", name));
  SRUNWAY_ASSIGN_OR_RETURN(common::Json shards, common::JsonField<common::Json>(manifest, "shards", name));
  if (!shards.is_array() || shards.empty()) return common::DataLoss("{}: no shards listed", name);
  for (const common::Json& shard : shards) {
    SRUNWAY_ASSIGN_OR_RETURN(std::string file, common::JsonField<std::string>(shard, "file", name));
    if (file.find('/') != std::string::npos || file.empty()) {
      return common::DataLoss("{}: shard name '{}' is not a file in the directory", name, file);
    }
    read.shards.push_back(shard_dir / file);
  }
  return read;
}

common::StatusOr<Manifest> ReadManifest(const std::filesystem::path& shard_dir) {
  return AsDataLoss(ParseManifest(shard_dir));
}

// A sharded checkpoint's directory: the manifest, then every shard it lists, which must tile the buffers.
common::StatusOr<TrainingState> ReadShards(const std::filesystem::path& shard_dir, const ModelConfig& expected,
                                           const CheckpointBuffers& buffers) {
  SRUNWAY_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(shard_dir));
  const int64_t step = manifest.step;
  const int64_t numel = static_cast<int64_t>(buffers.params.size());
  std::vector<ParamRange> covered;
  std::optional<TrainingState> first, own;
  const std::string own_name = buffers.ranks > 0 && static_cast<int64_t>(manifest.shards.size()) == buffers.ranks
                                   ? ShardName(buffers.rank, buffers.ranks)
                                   : std::string();
  for (const std::filesystem::path& path : manifest.shards) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return common::DataLoss("{}: missing (listed in {})", path.string(), manifest.path.string());
    }
    std::vector<ParamRange> ranges;
    SRUNWAY_ASSIGN_OR_RETURN(TrainingState state, ReadCheckpointFile(path, expected, buffers, &ranges));
    if (state.step != step) return common::DataLoss("{}: step {}, the manifest says {}", path.string(), state.step, step);
    if (!first) first = state;
    if (path.filename() == own_name) own = state;
    covered.insert(covered.end(), ranges.begin(), ranges.end());
  }
  std::sort(covered.begin(), covered.end(), [](const ParamRange& a, const ParamRange& b) { return a.offset < b.offset; });
  int64_t next = 0;
  for (const ParamRange& r : covered) {
    if (r.count == 0) continue;
    if (r.offset != next) {
      return common::DataLoss("{}: the shards do not tile the parameters (element {} is {})", shard_dir.string(),
                              std::min(next, r.offset), r.offset > next ? "in no shard" : "in two");
    }
    next = r.offset + r.count;
  }
  if (next != numel) {
    return common::DataLoss("{}: the shards hold {} of the {} parameters", shard_dir.string(), next, numel);
  }
  return own ? *own : *first;
}

}  // namespace

bool HasCheckpoint(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / kLatest, ec);
}

common::StatusOr<int64_t> LatestStep(const std::filesystem::path& dir) {
  if (!HasCheckpoint(dir)) return common::NotFound("{}: no checkpoint yet (no {})", dir.string(), kLatest);
  return ReadLatest(dir);
}

bool HoldsCheckpoint(const std::filesystem::path& path) {
  if (path.empty()) return false;
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) || std::filesystem::exists(path / "manifest.json", ec) ||
         HasCheckpoint(path);
}

common::StatusOr<std::filesystem::path> CheckpointOfStep(const std::filesystem::path& dir, int64_t step) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec) || std::filesystem::exists(dir / "manifest.json", ec)) {
    return common::InvalidArgument("{} is not a run's directory of checkpoints (iter_NNNNNNN), to choose a step in",
                                   dir.string());
  }
  SRUNWAY_ASSIGN_OR_RETURN(auto complete, CompleteCheckpoints(dir));
  for (const auto& [complete_step, path] : complete) {
    if (complete_step == step) return path;
  }
  return common::NotFound("{} holds no complete checkpoint of step {} (complete: {})", dir.string(), step,
                          StepsOf(complete));
}

namespace {

// What `where` names, to read: a checkpoint file, or a sharded checkpoint's directory; through the pointer when it
// is a run's directory. NotFound when that directory has no checkpoint yet.
common::StatusOr<std::filesystem::path> Resolve(const std::filesystem::path& where, bool warn) {
  std::error_code ec;
  if (!std::filesystem::is_directory(where, ec)) return where;
  if (std::filesystem::exists(where / "manifest.json", ec)) return where;
  const std::filesystem::path latest = where / kLatest;
  if (!HasCheckpoint(where)) return common::NotFound("{}: no checkpoint yet (no {})", where.string(), kLatest);
  SRUNWAY_ASSIGN_OR_RETURN(int64_t step, ReadLatest(where));
  const std::filesystem::path sharded = ShardDir(where, step);
  // A save of the same step (a rewound run's) that died between CommitShards' renames left latest's checkpoint
  // set aside, complete: it is loaded from there.
  if (const std::filesystem::path replaced = ReplacedDir(where, step);
      !std::filesystem::exists(sharded, ec) && std::filesystem::exists(replaced / "manifest.json", ec)) {
    if (warn) {
      common::LogWarn("{} names step {}, whose checkpoint a later save of that step set aside and did not replace: "
                      "loading {}", latest.string(), step, replaced.string());
    }
    return replaced;
  }
  if (std::filesystem::is_directory(sharded, ec)) {
    if (!std::filesystem::exists(sharded / "manifest.json", ec)) {
      return common::DataLoss("{}: no manifest.json ({} names step {})", sharded.string(), latest.string(), step);
    }
    return sharded;
  }
  const std::filesystem::path single = where / fmt::format("iter_{:07d}.ckpt", step);
  if (!std::filesystem::exists(single, ec)) {
    // Not "no checkpoint yet": starting from scratch would later save over the checkpoints that are here.
    SRUNWAY_ASSIGN_OR_RETURN(auto complete, CompleteCheckpoints(where));
    return common::DataLoss("{} names step {}, but neither {}/ nor {} is there (complete: {})", latest.string(), step,
                            sharded.filename().string(), single.filename().string(), StepsOf(complete));
  }
  return single;
}

common::StatusOr<TrainingState> LoadFrom(const std::filesystem::path& where, const ModelConfig& expected,
                                         const CheckpointBuffers& buffers) {
  SRUNWAY_ASSIGN_OR_RETURN(const std::filesystem::path path, Resolve(where, /*warn=*/true));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return ReadShards(path, expected, buffers);
  if (path != where) return ReadCheckpointFile(path, expected, buffers, nullptr);
  std::vector<ParamRange> ranges;
  SRUNWAY_ASSIGN_OR_RETURN(TrainingState state, ReadCheckpointFile(where, expected, buffers, &ranges));
  // One shard alone would resume its ranges over the initialisation: a model part trained, part random.
  const auto numel = static_cast<int64_t>(buffers.params.size());
  SRUNWAY_ASSIGN_OR_RETURN(const int64_t held, CountWithin(ranges, numel, "checkpoint"));
  if (held != numel) {
    return common::FailedPrecondition("{} is one shard of a sharded checkpoint ({} of the {} parameters): --load "
                                      "its directory, {}", where.string(), held, buffers.params.size(),
                                      where.parent_path().string());
  }
  return state;
}

}  // namespace

common::StatusOr<CheckpointSummary> ReadCheckpointSummary(const std::filesystem::path& where) {
  SRUNWAY_ASSIGN_OR_RETURN(std::filesystem::path path, Resolve(where, /*warn=*/false));
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // Every shard holds the model's config, and every shard or none the moments: the manifest's first.
    SRUNWAY_ASSIGN_OR_RETURN(const Manifest manifest, ReadManifest(path));
    path = manifest.shards.front();
  }
  SRUNWAY_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  SRUNWAY_ASSIGN_OR_RETURN(const std::vector<uint8_t> head, HeaderBytes(mapped->bytes()));
  SRUNWAY_ASSIGN_OR_RETURN(CheckpointHeader header, ReadCheckpointHeader(head, path.string()));
  return CheckpointSummary{header.state.model, header.moments, header.state.extra};
}

common::StatusOr<TrainingState> LoadCheckpoint(const std::filesystem::path& where, const ModelConfig& expected,
                                               const CheckpointBuffers& buffers) {
  const int64_t numel = static_cast<int64_t>(buffers.params.size());
  int64_t moments = numel;
  if (buffers.moment_ranges != nullptr) {
    SRUNWAY_ASSIGN_OR_RETURN(moments, CountWithin(*buffers.moment_ranges, numel, "moment"));
  }
  if (static_cast<int64_t>(buffers.adam_m.size()) != moments || static_cast<int64_t>(buffers.adam_v.size()) != moments) {
    return common::InvalidArgument("moment buffers of {} and {} elements to load {} into", buffers.adam_m.size(),
                                   buffers.adam_v.size(), moments);
  }
  auto state = LoadFrom(where, expected, buffers);
  // The pointer or a manifest that does not parse is corrupt data (exit 1), not a bad command line.
  if (!state.ok() && state.status().code() == common::StatusCode::kInvalidArgument) {
    return common::DataLoss("{}", state.status().message());
  }
  return state;
}

}  // namespace srunway::trainer
