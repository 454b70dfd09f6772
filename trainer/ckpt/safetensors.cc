// safetensors writer (F32 tensors, stored as F32, BF16 or F16) and header reader.
#include "trainer/ckpt/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "common/fs.h"
#include "common/half.h"
#include "common/json.h"

namespace srunway::trainer {

std::string_view DtypeName(StoredDtype dtype) {
  switch (dtype) {
    case StoredDtype::kF32: return "F32";
    case StoredDtype::kBF16: return "BF16";
    case StoredDtype::kF16: return "F16";
  }
  return "F32";
}

namespace {

uint64_t Numel(const NamedTensor& tensor) {
  uint64_t numel = 1;
  for (int64_t dim : tensor.shape) numel *= static_cast<uint64_t>(dim);
  return numel;
}

// One tensor's values as `dtype` stores them, written a slice at a time (a model's largest tensor, its embedding,
// is not copied whole).
common::Status WriteTensor(common::AtomicFile& file, const NamedTensor& tensor, StoredDtype dtype) {
  const uint64_t numel = Numel(tensor);
  if (dtype == StoredDtype::kF32) return file.Write({reinterpret_cast<const char*>(tensor.data), 4 * numel});
  constexpr uint64_t kSlice = 1 << 20;
  std::vector<uint16_t> stored(static_cast<size_t>(std::min(numel, kSlice)));
  for (uint64_t from = 0; from < numel; from += kSlice) {
    const uint64_t n = std::min(kSlice, numel - from);
    const float* values = tensor.data + from;
    for (uint64_t i = 0; i < n; ++i) {
      if (dtype == StoredDtype::kBF16) {
        stored[i] = common::FloatToBFloat16(values[i]);
        continue;
      }
      stored[i] = common::FloatToHalf(values[i]);
      if ((stored[i] & 0x7fff) == 0x7c00 && std::isfinite(values[i])) {
        return common::FailedPrecondition("tensor '{}' holds {} (element {}), past fp16's largest value 65504: "
                                          "export it as bf16 or fp32", tensor.name, values[i], from + i);
      }
    }
    SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(stored.data()), 2 * n}));
  }
  return common::Status::Ok();
}

}  // namespace

uint64_t StoredBytes(const NamedTensor& tensor, StoredDtype dtype) {
  return Numel(tensor) * (dtype == StoredDtype::kF32 ? 4 : 2);
}

common::Status WriteSafetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                                const std::map<std::string, std::string>& metadata, StoredDtype dtype) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  common::Json header = common::Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const NamedTensor& tensor : tensors) {
    const uint64_t bytes = StoredBytes(tensor, dtype);
    header[tensor.name] = {
        {"dtype", DtypeName(dtype)}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format pads the header with spaces to 8 bytes
  const uint64_t length = text.size();

  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile file, common::AtomicFile::Create(path));
  SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(&length), sizeof length}));
  SRUNWAY_RETURN_IF_ERROR(file.Write(text));
  for (const NamedTensor& tensor : tensors) SRUNWAY_RETURN_IF_ERROR(WriteTensor(file, tensor, dtype));
  return file.Commit();
}

namespace {

// The format's dtypes and their element sizes in bytes.
int DtypeBytes(std::string_view dtype) {
  static constexpr std::pair<std::string_view, int> kDtypes[] = {
      {"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4},  {"U32", 4},  {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  for (const auto& [name, bytes] : kDtypes) {
    if (name == dtype) return bytes;
  }
  return 0;
}

}  // namespace

common::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(std::span<const uint8_t> head, uint64_t file_size,
                                                          const std::string& name) {
  if (file_size < 8) return common::DataLoss("{}: {} bytes is too short for a safetensors file", name, file_size);
  uint64_t length = 0;
  if (head.size() >= 8) std::memcpy(&length, head.data(), 8);
  if (length > kMaxSafetensorsHeaderBytes || length > file_size - 8) {
    return common::DataLoss("{}: header length {} does not fit the file ({} bytes; at most {})", name, length,
                            file_size, kMaxSafetensorsHeaderBytes);
  }
  if (head.size() < 8 + length) {
    return common::DataLoss("{}: only {} bytes of its {}-byte header were read", name, head.size(), 8 + length);
  }
  SRUNWAY_ASSIGN_OR_RETURN(common::Json json,
                           common::ParseJson({reinterpret_cast<const char*>(head.data() + 8), length}, name));
  if (!json.is_object()) return common::DataLoss("{}: the header is not a JSON object", name);
  SafetensorsHeader header;
  header.data_start = 8 + length;
  for (const auto& [key, value] : json.items()) {
    const std::string where = fmt::format("{}: tensor '{}'", name, key);
    if (key == "__metadata__") {
      if (!value.is_object()) return common::DataLoss("{}: __metadata__ is not an object", name);
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) return common::DataLoss("{}: __metadata__ '{}' is not a string", name, meta_key);
        header.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    TensorEntry entry;
    entry.name = key;
    SRUNWAY_ASSIGN_OR_RETURN(entry.dtype, common::JsonField<std::string>(value, "dtype", where));
    const int element = DtypeBytes(entry.dtype);
    if (element == 0) return common::DataLoss("{}: unknown dtype '{}'", where, entry.dtype);
    SRUNWAY_ASSIGN_OR_RETURN(common::Json shape, common::JsonField<common::Json>(value, "shape", where));
    SRUNWAY_ASSIGN_OR_RETURN(common::Json offsets, common::JsonField<common::Json>(value, "data_offsets", where));
    if (!shape.is_array()) return common::DataLoss("{}: shape is not an array", where);
    if (!offsets.is_array() || offsets.size() != 2) return common::DataLoss("{}: data_offsets is not [begin, end]", where);
    uint64_t size = static_cast<uint64_t>(element);
    for (const common::Json& dim : shape) {
      SRUNWAY_ASSIGN_OR_RETURN(int64_t extent, common::JsonInteger<int64_t>(dim, where + ": a shape dimension"));
      if (extent < 0) return common::DataLoss("{}: negative dimension {}", where, extent);
      entry.shape.push_back(extent);
      if (extent != 0 && size > UINT64_MAX / static_cast<uint64_t>(extent)) {
        return common::DataLoss("{}: the shape's byte size overflows 64 bits", where);
      }
      size *= static_cast<uint64_t>(extent);
    }
    SRUNWAY_ASSIGN_OR_RETURN(entry.begin, common::JsonInteger<uint64_t>(offsets[0], where + ": data_offsets[0]"));
    SRUNWAY_ASSIGN_OR_RETURN(entry.end, common::JsonInteger<uint64_t>(offsets[1], where + ": data_offsets[1]"));
    if (entry.begin > entry.end || entry.end - entry.begin != size) {
      return common::DataLoss("{}: data_offsets [{}, {}] do not hold {} bytes of {} {}", where, entry.begin,
                              entry.end, size, entry.dtype, shape.dump());
    }
    header.tensors.push_back(std::move(entry));
  }
  // The tensors must tile the data exactly: sorted by offset, each starts where the previous ended.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  uint64_t at = 0;
  for (const TensorEntry& entry : header.tensors) {
    if (entry.begin != at) {
      return common::DataLoss("{}: tensor '{}' starts at byte {} of the data, not {} (a hole or an overlap)", name,
                              entry.name, entry.begin, at);
    }
    at = entry.end;
  }
  if (at != file_size - header.data_start) {
    return common::DataLoss("{}: the tensors cover {} bytes of data, the file holds {}", name, at,
                            file_size - header.data_start);
  }
  return header;
}

}  // namespace srunway::trainer
