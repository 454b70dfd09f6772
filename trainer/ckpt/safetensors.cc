// safetensors writer (F32 tensors).
#include "trainer/ckpt/safetensors.h"

#include <bit>

#include "common/fs.h"
#include "common/json.h"

namespace srunway::trainer {

common::Status WriteSafetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                                const std::map<std::string, std::string>& metadata) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  common::Json header = common::Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const NamedTensor& tensor : tensors) {
    uint64_t numel = 1;
    for (int64_t dim : tensor.shape) numel *= static_cast<uint64_t>(dim);
    header[tensor.name] = {{"dtype", "F32"}, {"shape", tensor.shape}, {"data_offsets", {offset, offset + 4 * numel}}};
    offset += 4 * numel;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format pads the header with spaces to 8 bytes
  const uint64_t length = text.size();

  SRUNWAY_ASSIGN_OR_RETURN(common::AtomicFile file, common::AtomicFile::Create(path));
  SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(&length), sizeof length}));
  SRUNWAY_RETURN_IF_ERROR(file.Write(text));
  for (const NamedTensor& tensor : tensors) {
    uint64_t numel = 1;
    for (int64_t dim : tensor.shape) numel *= static_cast<uint64_t>(dim);
    SRUNWAY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(tensor.data), 4 * numel}));
  }
  return file.Commit();
}

}  // namespace srunway::trainer
