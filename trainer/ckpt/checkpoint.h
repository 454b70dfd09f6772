// Training checkpoints: one file per save (DIR/iter_NNNNNNN.ckpt) holding the model config, step, data position,
// RNG state, parameters and AdamW moments (a shard saved with --no-save-optim: the parameters alone), written
// atomically (temporary name, fsync, rename), then DIR/latest_checkpointed_iteration.txt naming it (Megatron's file
// name), so a crash mid-save leaves the previous checkpoint in charge.
//
// Layout: "SRWYCKPT", u32 version (2), u32 0, u64 header length, JSON header, zero padding to 64 bytes, then the
// tensors listed in the header (fp32: params, adam_m, adam_v; params alone without optimizer state), then the u64
// XXH3-64 of each tensor's bytes and "SRWYEND\0". The header's rng is absent where it was not saved. A reader
// checks and reads only the tensors it needs (a ZeRO-1 rank skips the moments of shards outside its slices).
// Version 1 (read, not written) ended with one u64 FNV-1a of all three tensors' bytes instead.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "trainer/model/config.h"
#include "trainer/model/params.h"

namespace srunway::trainer {

struct TrainingState {
  ModelConfig model;
  int64_t step = 0;              // optimizer steps done
  int64_t consumed_samples = 0;  // training samples drawn so far (the data position)
  std::optional<std::array<uint64_t, 4>> rng = std::array<uint64_t, 4>{};  // none: not saved (--no-save-rng)
  common::Json extra = common::Json::object();  // anything else worth keeping (data settings, optimizer settings)
};

// What a checkpoint holds beside the state: views of the buffers to write from or read into.
struct CheckpointBuffers {
  std::span<float> params;
  std::span<float> adam_m;
  std::span<float> adam_v;
  // Loading only: when set, the moments are these ranges of the flat buffers alone, packed in this order (a ZeRO-1
  // rank's slices), and only those parts of the checkpoint's moments are read; no whole copy is made.
  const std::vector<ParamRange>* moment_ranges = nullptr;
  // Loading only: the loading rank and how many ranks load. Where the checkpoint has that rank's shard of a world
  // of that size, the state returned is that shard's (its `extra` holds what the rank kept of its own: the GEMM
  // algorithms it chose), else the first shard's; the shards' other fields are the same.
  int rank = 0;
  int ranks = 0;
};

// Writes DIR/iter_<step>.ckpt and then points DIR/latest_checkpointed_iteration.txt at it. Returns its path.
common::StatusOr<std::filesystem::path> SaveCheckpoint(const std::filesystem::path& dir, const TrainingState& state,
                                                       const CheckpointBuffers& buffers);

// A checkpoint's header, read from the file's bytes: the state, and where the tensors start.
struct CheckpointHeader {
  TrainingState state;
  size_t data_offset = 0;
  uint32_t version = 0;
  std::optional<std::vector<std::pair<int64_t, int64_t>>> ranges;  // a shard's (offset, count) ranges
  bool moments = true;  // false: the parameters alone, saved without AdamW's moments (--no-save-optim)
};
// Every field is checked (types, integer ranges, the header inside the file); `name` names the file in errors.
common::StatusOr<CheckpointHeader> ReadCheckpointHeader(std::span<const uint8_t> bytes, const std::string& name);

// Sharded checkpoints, written by every rank at once: DIR/iter_NNNNNNN/ holds shard_RRRRR_of_WWWWW.ckpt per rank
// (the format above; its header lists the ranges of the flat buffers the shard holds, and its tensors are those
// ranges of the parameters and of both moments, packed) and manifest.json, which rank 0 writes once every shard is
// on disk (each is fsynced before its rename); latest_checkpointed_iteration.txt changes only after the manifest.
// The shards' ranges tile the buffers, so any number of ranks can load them.
std::filesystem::path ShardDir(const std::filesystem::path& dir, int64_t step);
// Where WriteShard puts the shards of `step` until CommitShards moves them to ShardDir whole: DIR/.saving_iter_NNNNNNN,
// never taken for a checkpoint, so a save that dies midway leaves an earlier save of the same step (a run rewound to
// an older checkpoint saves that step again) as it was.
std::filesystem::path StagingDir(const std::filesystem::path& dir, int64_t step);
std::string ShardName(int rank, int ranks);

// One of a shard's three buffers (parameters, first and second moments): the whole flat buffer, whose shard ranges
// are written straight from it (no packed copy of a model's state in host memory while it is saved), or just those
// ranges, packed one after another.
struct ShardTensor {
  std::span<const float> data;
  bool whole = false;
};
// This rank's shard: `ranges` of the flat buffers (within the model's `state.model` parameters), from the
// parameters and the moments; with `moments` false (--no-save-optim), from the parameters alone (the moments'
// tensors are not read). A buffer of the wrong size is InvalidArgument.
common::Status WriteShard(const std::filesystem::path& dir, const TrainingState& state, int rank, int ranks,
                          const std::vector<ParamRange>& ranges, const std::array<ShardTensor, 3>& tensors,
                          bool moments = true);
// Rank 0, after every rank's WriteShard succeeded: checks that the shards are there, removes any other file in the
// staging directory (an earlier attempt's), writes the manifest, puts the directory in place of ShardDir (an
// earlier checkpoint of the step is replaced whole), then points latest_checkpointed_iteration.txt at `step`.
common::Status CommitShards(const std::filesystem::path& dir, int64_t step, int ranks);
// A save that never finished (its job killed midway: a time limit's SIGKILL, a node lost) leaves its staging
// directory, as large as a checkpoint, which no later save reuses unless it saves that very step again. Rank 0 removes
// every staging directory in `dir` before a save, when no rank is writing; returns each one removed with its size in
// bytes. So a run killed while saving frees the space its next save needs (before, a --save at its quota stayed
// full of dead saves).
struct RemovedSave {
  std::filesystem::path path;
  uintmax_t bytes = 0;
};
common::StatusOr<std::vector<RemovedSave>> RemoveUnfinishedSaves(const std::filesystem::path& dir);
// --keep-checkpoints: deletes all but the newest `keep` complete checkpoints in `dir` (never the one `latest`
// names); returns what it deleted.
common::StatusOr<std::vector<std::string>> PruneCheckpoints(const std::filesystem::path& dir, int keep);
// Megatron's --save-retain-interval: deletes every complete checkpoint in `dir` whose step is not a multiple of
// `interval`, except the one `latest` names; returns what it deleted.
common::StatusOr<std::vector<std::string>> PruneUnretained(const std::filesystem::path& dir, int64_t interval);
// What a failed or skipped save leaves in charge, for its error line: "the last complete checkpoint in DIR stays
// (step N)", or "there is no complete checkpoint in DIR yet".
std::string LastCompleteCheckpoint(const std::filesystem::path& dir);

// What a checkpoint holds (`path` as LoadCheckpoint takes it), from one file's header: the model config it was
// saved with (--use-checkpoint-args), whether it has AdamW's moments, and the run's settings kept beside the state
// (TrainingState::extra). NotFound when a directory has no checkpoint yet.
struct CheckpointSummary {
  ModelConfig model;
  bool moments = true;
  common::Json extra = common::Json::object();
};
common::StatusOr<CheckpointSummary> ReadCheckpointSummary(const std::filesystem::path& path);

// Whether `dir` holds a checkpoint's pointer (latest_checkpointed_iteration.txt): a run has saved there.
bool HasCheckpoint(const std::filesystem::path& dir);
// The step that pointer names; NotFound without one.
common::StatusOr<int64_t> LatestStep(const std::filesystem::path& dir);
// Whether `path`, as --load takes it, holds something to load: a file, a sharded checkpoint's directory, or a run's
// directory with the pointer.
bool HoldsCheckpoint(const std::filesystem::path& path);
// Megatron's --ckpt-step: the complete checkpoint of `step` in a run's directory `dir` (a sharded directory or a
// single file), as LoadCheckpoint takes it; NotFound naming the steps that are there.
common::StatusOr<std::filesystem::path> CheckpointOfStep(const std::filesystem::path& dir, int64_t step);

// `path` is a checkpoint file, a sharded checkpoint's directory, or a directory with
// latest_checkpointed_iteration.txt (pointing at either kind). NotFound when a directory has no checkpoint yet.
// The stored model config must equal `expected` (the error names every difference); the buffers are the whole
// buffers, of the sizes that config implies (moments: none read for empty `moment_ranges` and empty spans). A
// missing, corrupt or foreign shard is an error naming the file; moments asked of a checkpoint saved without them
// (--no-save-optim) are FailedPrecondition, naming the file and --no-load-optim.
common::StatusOr<TrainingState> LoadCheckpoint(const std::filesystem::path& path, const ModelConfig& expected,
                                               const CheckpointBuffers& buffers);

}  // namespace srunway::trainer
