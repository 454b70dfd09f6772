// See device.h: dtypes, Buffer, choosing a device.
#include "trainer/device/device.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "common/env.h"

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

common::StatusOr<void*> Device::AllocateZeroed(size_t bytes) {
  SRUNWAY_ASSIGN_OR_RETURN(void* data, Allocate(bytes));
  if (common::Status zeroed = Zero(data, bytes, main_stream()); !zeroed.ok()) {
    Free(data);
    return zeroed;
  }
  return data;
}

common::StatusOr<Buffer> Buffer::Make(Device& device, DType dtype, size_t count, bool zeroed) {
  if (count == 0) return Buffer(&device, dtype, 0, nullptr);
  if (count > SIZE_MAX / DTypeSize(dtype)) {
    return common::InvalidArgument("a buffer of {} {} elements does not fit in memory", count, DTypeName(dtype));
  }
  const size_t bytes = count * DTypeSize(dtype);
  SRUNWAY_ASSIGN_OR_RETURN(void* data, zeroed ? device.AllocateZeroed(bytes) : device.Allocate(bytes));
  return Buffer(&device, dtype, count, data);
}

common::StatusOr<Buffer> Buffer::Allocate(Device& device, DType dtype, size_t count) {
  return Make(device, dtype, count, false);
}

common::StatusOr<Buffer> Buffer::AllocateZeroed(Device& device, DType dtype, size_t count) {
  return Make(device, dtype, count, true);
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

void AllocationTally::Add(void* data, size_t bytes) {
  std::lock_guard lock(mutex_);
  live_[data] = bytes;
  current_ += bytes;
  peak_ = std::max(peak_, current_);
}

size_t AllocationTally::Remove(void* data) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(data);
  if (it == live_.end()) return 0;
  const size_t bytes = it->second;
  current_ -= bytes;
  live_.erase(it);
  return bytes;
}

size_t AllocationTally::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

size_t AllocationTally::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

AllocationStats AllocationTally::Stats() const {
  std::lock_guard lock(mutex_);
  return {current_, peak_, live_.size()};
}

common::Status Grow(Buffer& buffer, Device& device, DType dtype, size_t count, Stream& stream) {
  if (buffer.dtype() == dtype && buffer.count() >= count) return common::Status::Ok();
  if (buffer.data() != nullptr) {
    SRUNWAY_RETURN_IF_ERROR(device.Synchronize(stream));
    buffer = Buffer();
  }
  SRUNWAY_ASSIGN_OR_RETURN(buffer, Buffer::Allocate(device, dtype, count));
  return common::Status::Ok();
}

Buffer ZeroedOrThrow(Device& device, DType dtype, size_t count) {
  auto buffer = Buffer::AllocateZeroed(device, dtype, count);
  if (!buffer.ok()) throw DeviceFull(buffer.status());
  return std::move(*buffer);
}

HostMirror::HostMirror(Device& device, float* data, size_t count) : device_(device), data_(data) {
  if (device.kind() == DeviceKind::kCpu) {
    host_ = {data, count};
  } else {
    copy_.resize(count);
    host_ = copy_;
  }
}

common::Status HostMirror::Download() {
  if (copy_.empty()) return common::Status::Ok();
  SRUNWAY_RETURN_IF_ERROR(device_.CopyToHost(copy_.data(), data_, copy_.size() * sizeof(float), device_.main_stream()));
  return device_.Synchronize(device_.main_stream());
}

common::Status HostMirror::Upload() {
  if (copy_.empty()) return common::Status::Ok();
  SRUNWAY_RETURN_IF_ERROR(device_.CopyFromHost(data_, copy_.data(), copy_.size() * sizeof(float), device_.main_stream()));
  return device_.Synchronize(device_.main_stream());
}

common::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text) {
  if (text == "auto") return DeviceChoice::kAuto;
  if (text == "cpu") return DeviceChoice::kCpu;
  if (text == "cuda") return DeviceChoice::kCuda;
  return common::InvalidArgument("device '{}': use auto, cpu or cuda", text);
}

common::Status CheckGpuSwitches() {
  const auto check = [](std::string_view name, std::initializer_list<std::string_view> values) {
    const std::string value = common::GetEnvOr(name, "");
    if (value.empty() || std::find(values.begin(), values.end(), value) != values.end()) return common::Status::Ok();
    return common::InvalidArgument("{}={}: not one of {} (or unset)", name, value, fmt::join(values, ", "));
  };
  SRUNWAY_RETURN_IF_ERROR(check("SRUNWAY_ATTENTION", {"mma", "cudnn", "auto", "wmma", "simple"}));
  SRUNWAY_RETURN_IF_ERROR(check("SRUNWAY_GELU_EPILOGUE", {"0", "1"}));
  SRUNWAY_RETURN_IF_ERROR(check("SRUNWAY_BGRADB", {"0", "1"}));
  return check("SRUNWAY_GEMM_TUNE", {"0", "1"});
}

common::StatusOr<std::unique_ptr<Device>> OpenDevice(DeviceChoice choice, int local_rank, int local_ranks,
                                                     std::string* note) {
  if (choice == DeviceChoice::kCpu) return NewCpuDevice(local_ranks);
  auto gpu = NewCudaDevice(local_rank);
  if (gpu.ok() || choice == DeviceChoice::kCuda) return gpu;
  if (note != nullptr) *note = fmt::format("training on the CPU: {}", gpu.status().message());
  return NewCpuDevice(local_ranks);
}

}  // namespace srunway::trainer
