// Training checkpoints: one file per save (DIR/iter_NNNNNNN.ckpt) holding the model config, step, data position,
// RNG state, parameters and AdamW moments, written atomically (temporary name, fsync, rename), then
// DIR/latest_checkpointed_iteration.txt naming it (Megatron's file name), so a crash mid-save leaves the previous
// checkpoint in charge.
//
// Layout: "SRWYCKPT", u32 version (1), u32 0, u64 header length, JSON header, zero padding to 64 bytes, then the
// tensors listed in the header (fp32), then u64 FNV-1a of those bytes and "SRWYEND\0".
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "trainer/model/config.h"

namespace srunway::trainer {

struct TrainingState {
  ModelConfig model;
  int64_t step = 0;              // optimizer steps done
  int64_t consumed_samples = 0;  // training samples drawn so far (the data position)
  std::array<uint64_t, 4> rng{};
  common::Json extra = common::Json::object();  // anything else worth keeping (data settings, optimizer settings)
};

// What a checkpoint holds beside the state: views of the buffers to write from or read into.
struct CheckpointBuffers {
  std::span<float> params;
  std::span<float> adam_m;
  std::span<float> adam_v;
};

// Writes DIR/iter_<step>.ckpt and then points DIR/latest_checkpointed_iteration.txt at it. Returns its path.
common::StatusOr<std::filesystem::path> SaveCheckpoint(const std::filesystem::path& dir, const TrainingState& state,
                                                       const CheckpointBuffers& buffers);

// A checkpoint's header, read from the file's bytes: the state, and where the tensors start.
struct CheckpointHeader {
  TrainingState state;
  size_t data_offset = 0;
};
// Every field is checked (types, integer ranges, the header inside the file); `name` names the file in errors.
common::StatusOr<CheckpointHeader> ReadCheckpointHeader(std::span<const uint8_t> bytes, const std::string& name);

// `path` is a checkpoint file or a directory with latest_checkpointed_iteration.txt. NotFound when a directory
// has no checkpoint yet. The stored model config must equal `expected` (the error names every difference); the
// buffers must have the sizes that config implies.
common::StatusOr<TrainingState> LoadCheckpoint(const std::filesystem::path& path, const ModelConfig& expected,
                                               const CheckpointBuffers& buffers);

}  // namespace srunway::trainer
