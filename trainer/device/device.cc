// See device.h: dtypes, Buffer, choosing a device.
#include "trainer/device/device.h"

#include <utility>

namespace srunway::trainer {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kBFloat16:
    case DType::kFloat16: return 2;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat16: return "fp16";
    case DType::kInt32: return "int32";
  }
  return "?";
}

common::StatusOr<Buffer> Buffer::Allocate(Device& device, DType dtype, size_t count) {
  if (count == 0) return Buffer(&device, dtype, 0, nullptr);
  if (count > SIZE_MAX / DTypeSize(dtype)) {
    return common::InvalidArgument("a buffer of {} {} elements does not fit in memory", count, DTypeName(dtype));
  }
  SRUNWAY_ASSIGN_OR_RETURN(void* data, device.Allocate(count * DTypeSize(dtype)));
  return Buffer(&device, dtype, count, data);
}

Buffer::Buffer(Buffer&& other) noexcept
    : device_(other.device_), dtype_(other.dtype_), count_(std::exchange(other.count_, 0)),
      data_(std::exchange(other.data_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) device_->Free(data_);
    device_ = other.device_;
    dtype_ = other.dtype_;
    count_ = std::exchange(other.count_, 0);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}

Buffer::~Buffer() {
  if (data_ != nullptr) device_->Free(data_);
}

common::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text) {
  if (text == "auto") return DeviceChoice::kAuto;
  if (text == "cpu") return DeviceChoice::kCpu;
  if (text == "cuda") return DeviceChoice::kCuda;
  return common::InvalidArgument("device '{}': use auto, cpu or cuda", text);
}

common::StatusOr<std::unique_ptr<Device>> OpenDevice(DeviceChoice choice, int local_rank, std::string* note) {
  if (choice == DeviceChoice::kCpu) return NewCpuDevice();
  auto gpu = NewCudaDevice(local_rank);
  if (gpu.ok() || choice == DeviceChoice::kCuda) return gpu;
  if (note != nullptr) *note = fmt::format("training on the CPU: {}", gpu.status().message());
  return NewCpuDevice();
}

}  // namespace srunway::trainer
