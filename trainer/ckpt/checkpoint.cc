// Checkpoint writer and reader.
#include "trainer/ckpt/checkpoint.h"

#include <fmt/format.h>

#include <cstring>

#include "common/fs.h"
#include "common/parse.h"
#include "trainer/data/indexed_dataset.h"

namespace srunway::trainer {
namespace {

constexpr char kMagic[8] = {'S', 'R', 'W', 'Y', 'C', 'K', 'P', 'T'};
constexpr char kEndMagic[8] = {'S', 'R', 'W', 'Y', 'E', 'N', 'D', '\0'};
constexpr uint32_t kVersion = 1;
constexpr char kLatest[] = "latest_checkpointed_iteration.txt";

uint64_t Fnv1a(uint64_t hash, std::span<const uint8_t> bytes) {
  for (uint8_t b : bytes) {
    hash ^= b;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;

std::span<const uint8_t> AsBytes(std::span<const float> values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()};
}

}  // namespace

common::StatusOr<std::filesystem::path> SaveCheckpoint(const std::filesystem::path& dir, const TrainingState& state,
                                                       const CheckpointBuffers& buffers) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return common::FailedPrecondition("create checkpoint directory {}: {}", dir.string(), ec.message());
  const std::string name = fmt::format("iter_{:07d}.ckpt", state.step);
  const std::filesystem::path path = dir / name;

  common::Json header;
  header["format"] = "srunway-checkpoint";
  header["version"] = kVersion;
  header["model"] = ToJson(state.model);
  header["step"] = state.step;
  header["consumed_samples"] = state.consumed_samples;
  header["rng"] = state.rng;
  header["extra"] = state.extra;
  header["tensors"] = common::Json::array();
  const std::pair<const char*, std::span<const float>> tensors[] = {
      {"params", buffers.params}, {"adam_m", buffers.adam_m}, {"adam_v", buffers.adam_v}};
  for (const auto& [tensor_name, data] : tensors) header["tensors"].push_back({{"name", tensor_name}, {"numel", data.size()}});
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
  uint64_t hash = kFnvOffset;
  for (const auto& [tensor_name, data] : tensors) {
    std::span<const uint8_t> bytes = AsBytes(data);
    hash = Fnv1a(hash, bytes);
    SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(bytes.data()), bytes.size()}));
  }
  std::string tail(reinterpret_cast<const char*>(&hash), 8);
  tail.append(kEndMagic, sizeof kEndMagic);
  SRUNWAY_RETURN_IF_ERROR(file.Write(tail));
  SRUNWAY_RETURN_IF_ERROR(file.Commit());
  // The pointer last: until it is replaced, a reader loads the previous complete checkpoint.
  SRUNWAY_RETURN_IF_ERROR(common::WriteFileAtomic(dir / kLatest, fmt::format("{}\n", state.step)));
  return path;
}

common::StatusOr<CheckpointHeader> ReadCheckpointHeader(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return common::DataLoss("{}: not a srunway checkpoint (bad magic)", name);
  }
  uint32_t version;
  uint64_t length;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&length, bytes.data() + 16, 8);
  if (version != kVersion) return common::DataLoss("{}: checkpoint version {} (this build reads {})", name, version, kVersion);
  if (length > bytes.size() - 24) return common::DataLoss("{}: truncated header", name);
  SRUNWAY_ASSIGN_OR_RETURN(common::Json header,
                           common::ParseJson({reinterpret_cast<const char*>(bytes.data() + 24), length}, name));
  SRUNWAY_ASSIGN_OR_RETURN(common::Json model_json, common::JsonField<common::Json>(header, "model", name));
  CheckpointHeader read;
  TrainingState& state = read.state;
  SRUNWAY_ASSIGN_OR_RETURN(state.model, FromJson(model_json, name + ": model"));
  SRUNWAY_ASSIGN_OR_RETURN(state.step, common::JsonField<int64_t>(header, "step", name));
  SRUNWAY_ASSIGN_OR_RETURN(state.consumed_samples, common::JsonField<int64_t>(header, "consumed_samples", name));
  if (state.step < 0 || state.consumed_samples < 0) {
    return common::DataLoss("{}: step {} and consumed_samples {} cannot be negative", name, state.step,
                            state.consumed_samples);
  }
  SRUNWAY_ASSIGN_OR_RETURN(common::Json rng, common::JsonField<common::Json>(header, "rng", name));
  if (!rng.is_array() || rng.size() != state.rng.size()) {
    return common::DataLoss("{}: rng is not an array of {} numbers", name, state.rng.size());
  }
  for (size_t i = 0; i < state.rng.size(); ++i) {
    SRUNWAY_ASSIGN_OR_RETURN(state.rng[i], common::JsonInteger<uint64_t>(rng[i], fmt::format("{}: rng[{}]", name, i)));
  }
  state.extra = header.value("extra", common::Json::object());
  if (!state.extra.is_object()) return common::DataLoss("{}: extra is not an object", name);
  read.data_offset = 24 + length;
  read.data_offset += (64 - read.data_offset % 64) % 64;
  return read;
}

common::StatusOr<TrainingState> LoadCheckpoint(const std::filesystem::path& where, const ModelConfig& expected,
                                               const CheckpointBuffers& buffers) {
  std::filesystem::path path = where;
  std::error_code ec;
  if (std::filesystem::is_directory(where, ec)) {
    const std::filesystem::path latest = where / kLatest;
    if (!std::filesystem::exists(latest, ec)) return common::NotFound("{}: no checkpoint yet (no {})", where.string(), kLatest);
    SRUNWAY_ASSIGN_OR_RETURN(std::string text, common::ReadFile(latest));
    SRUNWAY_ASSIGN_OR_RETURN(int64_t step, common::ParseInt(common::Trim(text), latest.string(), 0));
    path = where / fmt::format("iter_{:07d}.ckpt", step);
  }
  SRUNWAY_ASSIGN_OR_RETURN(auto mapped, MappedFile::Open(path));
  std::span<const uint8_t> bytes = mapped->bytes();
  const std::string name = path.string();
  SRUNWAY_ASSIGN_OR_RETURN(CheckpointHeader read, ReadCheckpointHeader(bytes, name));
  TrainingState& state = read.state;
  if (!(state.model == expected)) {
    return common::FailedPrecondition("{}: the checkpoint is of another model: {}", name,
                                      DescribeDifference(state.model, expected));
  }
  size_t offset = read.data_offset;
  const std::span<float> targets[] = {buffers.params, buffers.adam_m, buffers.adam_v};
  size_t need = offset;
  for (const auto& target : targets) need += target.size_bytes();
  if (bytes.size() != need + 16) {
    return common::DataLoss("{}: {} bytes, expected {} for this model (truncated or not this model's)", name,
                            bytes.size(), need + 16);
  }
  if (std::memcmp(bytes.data() + need + 8, kEndMagic, 8) != 0) return common::DataLoss("{}: missing end marker", name);
  uint64_t stored_hash;
  std::memcpy(&stored_hash, bytes.data() + need, 8);
  if (Fnv1a(kFnvOffset, bytes.subspan(offset, need - offset)) != stored_hash) {
    return common::DataLoss("{}: checksum mismatch: the tensors are corrupt", name);
  }
  for (const auto& target : targets) {
    std::memcpy(target.data(), bytes.data() + offset, target.size_bytes());
    offset += target.size_bytes();
  }
  return state;
}

}  // namespace srunway::trainer
