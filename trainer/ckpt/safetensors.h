// safetensors files (https://github.com/huggingface/safetensors): a little-endian u64 header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw tensors. PyTorch users load
// them with safetensors.torch.load_file or by hand; the trainer exports weights this way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::trainer {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // F32, shape.product() values
};

// How the file stores the F32 tensors it is given: as they are, or rounded to the nearest bf16 or fp16 (half the
// bytes; --export-dtype).
enum class StoredDtype { kF32, kBF16, kF16 };
// "F32", "BF16", "F16": the format's names.
std::string_view DtypeName(StoredDtype dtype);
// The bytes `tensor` takes in a file that stores it as `dtype`.
uint64_t StoredBytes(const NamedTensor& tensor, StoredDtype dtype);

// Written atomically; tensors keep the given order in the file. A finite value past fp16's range (65504) is an
// error naming the tensor, rather than an infinity in the file.
common::Status WriteSafetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                                const std::map<std::string, std::string>& metadata = {},
                                StoredDtype dtype = StoredDtype::kF32);

// One tensor as a safetensors header describes it; `begin` and `end` are byte offsets into the data after the header.
struct TensorEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + the header's length
};

// Reads and checks a safetensors file's header against the format's rules: a header of at most 100 MB inside the
// file, a JSON object, known dtypes, non-negative shapes whose byte size (checked for overflow) matches the
// data_offsets, and data that the tensors cover exactly, without holes or overlaps. `head` is the file's first
// bytes (its header's 8-byte length and the JSON, or the whole file), `file_size` its size, `name` its name.
common::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(std::span<const uint8_t> head, uint64_t file_size,
                                                          const std::string& name);

// The limit on a header's length that the safetensors library itself applies.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

}  // namespace srunway::trainer
