// safetensors files (https://github.com/huggingface/safetensors): a little-endian u64 header length, a JSON
// header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the raw tensors. PyTorch users load
// them with safetensors.torch.load_file or by hand; the trainer exports weights this way.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace srunway::trainer {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // F32, shape.product() values
};

// Written atomically; tensors keep the given order in the file.
common::Status WriteSafetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                                const std::map<std::string, std::string>& metadata = {});

}  // namespace srunway::trainer
