// What the GPU programs of the tests share: the GPU opened as the trainer opens it (or a skip, exit 77), buffers
// uploaded from host vectors and read back as floats, and for any failure to set them up or to launch a kernel
// one line naming the program and what failed, then exit 1.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "common/half.h"
#include "tests/gpu/open_gpu.h"
#include "trainer/device/device.h"
#include "trainer/ops/cuda/kernels.h"

namespace srunway::gpu_tests {

class Gpu {
 public:
  // `program` opens every failure line.
  explicit Gpu(const char* program) : program_(program), device_(OpenGpuOrSkip(program)) {}
  trainer::Device& device() { return *device_; }
  void* stream() { return device_->native(device_->main_stream()); }

  trainer::Buffer Bf16(const std::vector<float>& values) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = common::FloatToBFloat16(values[i]);
    return Upload(trainer::DType::kBFloat16, bits.data(), bits.size());
  }
  trainer::Buffer F32(const std::vector<float>& values) {
    return Upload(trainer::DType::kFloat32, values.data(), values.size());
  }
  trainer::Buffer I32(const std::vector<int32_t>& values) {
    return Upload(trainer::DType::kInt32, values.data(), values.size());
  }

  std::vector<float> Read(const trainer::Buffer& buffer) {
    std::vector<float> out(buffer.count());
    if (buffer.dtype() == trainer::DType::kFloat32) {
      Check(device_->CopyToHost(out.data(), buffer.data(), buffer.bytes(), device_->main_stream()), "CopyToHost");
      Check(device_->Synchronize(device_->main_stream()), "Synchronize");
      return out;
    }
    std::vector<uint16_t> bits(buffer.count());
    Check(device_->CopyToHost(bits.data(), buffer.data(), buffer.bytes(), device_->main_stream()), "CopyToHost");
    Check(device_->Synchronize(device_->main_stream()), "Synchronize");
    for (size_t i = 0; i < bits.size(); ++i) out[i] = common::BFloat16ToFloat(bits[i]);
    return out;
  }

  void Check(const common::Status& status, const char* what) const {
    if (status.ok()) return;
    std::fprintf(stderr, "%s: %s: %s\n", program_, what, status.ToString().c_str());
    std::exit(EXIT_FAILURE);
  }
  // rc: what a trainer/ops/cuda call returned.
  void Launched(int rc, const char* op) const {
    if (rc == 0) return;
    std::fprintf(stderr, "%s: %s failed to launch: %s\n", program_, op, trainer::cuda::ErrorText(rc));
    std::exit(EXIT_FAILURE);
  }

 private:
  trainer::Buffer Upload(trainer::DType dtype, const void* data, size_t count) {
    auto buffer = trainer::Buffer::Allocate(*device_, dtype, count);
    Check(buffer.status(), "Allocate");
    Check(device_->CopyFromHost(buffer->data(), data, buffer->bytes(), device_->main_stream()), "CopyFromHost");
    Check(device_->Synchronize(device_->main_stream()), "Synchronize");
    return std::move(*buffer);
  }

  const char* program_;
  std::unique_ptr<trainer::Device> device_;
};

}  // namespace srunway::gpu_tests
