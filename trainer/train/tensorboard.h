// TensorBoard's event files (Megatron's --tensorboard-dir): the scalars Megatron writes, under its tag names, so that
// a run's curves sit beside Megatron's in one TensorBoard.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.h"
#include "common/status.h"

namespace srunway::trainer {

// CRC-32C (Castagnoli), and the mask TFRecord frames carry it under.
uint32_t Crc32c(std::string_view bytes);
uint32_t MaskedCrc32c(std::string_view bytes);

struct Scalar {
  std::string tag;
  float value = 0;
};

// Records of an event file: each a serialized tensorflow.Event in TFRecord's frame (length, masked CRC-32C of the
// length, the bytes, masked CRC-32C of the bytes).
std::string FileVersionRecord(double wall_time_s);  // an event file's first record
std::string ScalarsRecord(double wall_time_s, int64_t step, const std::vector<Scalar>& scalars);
// A SessionLog START at `step`: TensorBoard drops what earlier files of the run logged at `step` and after, as
// PyTorch's SummaryWriter(purge_step=...) has it do.
std::string SessionStartRecord(double wall_time_s, int64_t step);

// An event file of its own per run, events.out.tfevents.<seconds>.<host>.<pid> in the directory: TensorBoard reads
// a directory's files in the order of their names, so a resumed run's come after the runs before it.
class EventFile {
 public:
  // `resumed_at`: the run goes on from this step of an earlier run's checkpoint; what that run logged after it
  // (between its last checkpoint and its end) is dropped from the curves.
  common::Status Open(const std::string& dir, std::optional<int64_t> resumed_at);
  // Nothing to write (no --tensorboard-dir) is done.
  common::Status Write(int64_t step, const std::vector<Scalar>& scalars);
  const std::string& path() const { return path_; }

 private:
  common::Status Append(const std::string& record);
  std::string path_;
  common::Fd fd_;
};

}  // namespace srunway::trainer
