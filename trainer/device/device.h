// Where the trainer's buffers live and how work on them is ordered: the host, or one GPU through the CUDA driver
// (common/cuda_driver.h). A stream runs what it is given in order; an event marks a point in a stream that another
// stream, or the host, can wait for. On the host every call has finished when it returns, so streams and events
// cost nothing there and the same code runs on both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace srunway::trainer {

enum class DType : uint8_t { kFloat32, kBFloat16, kFloat16, kInt32 };
size_t DTypeSize(DType dtype);
std::string_view DTypeName(DType dtype);  // "fp32", "bf16", "fp16", "int32"

enum class DeviceKind { kCpu, kCuda };

// Bytes in GiB, for messages.
inline double Gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

// Handles that only the device which made them understands.
class Stream {
 public:
  virtual ~Stream() = default;
};
class Event {
 public:
  virtual ~Event() = default;
};

// What a device holds allocated: bytes now and at most (PyTorch's memory_allocated and max_memory_allocated), and
// the allocations held now.
struct AllocationStats {
  size_t bytes = 0, peak_bytes = 0, count = 0;
};

// Bytes a device has handed out, now and at most (what PyTorch calls max_memory_allocated).
class AllocationTally {
 public:
  void Add(void* data, size_t bytes);
  // The bytes `data` held; 0 for a pointer the tally does not hold.
  size_t Remove(void* data);
  size_t peak() const;
  size_t current() const;
  AllocationStats Stats() const;

 private:
  mutable std::mutex mutex_;
  std::map<void*, size_t> live_;
  size_t current_ = 0, peak_ = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  // "cpu", or the GPU's name and PCI bus id: "NVIDIA H100 80GB HBM3 (0000:04:00.0)".
  virtual const std::string& name() const = 0;

  // At least 256-byte aligned; ResourceExhausted (with the size and what is free) when the device is full.
  virtual common::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Allocate, zeroed on the main stream. The host overrides it: its large buffers are fresh zero pages, not
  // written until used, so that a model too large for the machine is refused before any of it is committed.
  virtual common::StatusOr<void*> AllocateZeroed(size_t bytes);
  virtual void Free(void* data) noexcept = 0;
  // The most memory this device's allocations have held at once, in bytes.
  virtual size_t peak_allocated() const = 0;
  virtual AllocationStats allocations() const = 0;

  // The stream that compute runs on; others (for collectives, for copies) come from NewStream.
  virtual Stream& main_stream() = 0;
  // The CUstream behind a stream of a GPU, for kernels and NCCL to be queued on; nullptr on the host.
  virtual void* native(Stream& stream) const = 0;
  virtual common::StatusOr<std::unique_ptr<Stream>> NewStream() = 0;
  // A stream made by someone else (a communicator's CUstream; nullptr on the host), used but never destroyed by
  // the device, so that its work can be ordered against the device's own streams.
  virtual std::unique_ptr<Stream> Adopt(void* native) = 0;
  virtual common::StatusOr<std::unique_ptr<Event>> NewEvent() = 0;

  // Queued on `stream`. Host memory handed to a copy must stay valid and unchanged until the stream has passed
  // the copy (Synchronize, or an event recorded after it).
  virtual common::Status CopyFromHost(void* dst, const void* host, size_t bytes, Stream& stream) = 0;
  virtual common::Status CopyToHost(void* host, const void* src, size_t bytes, Stream& stream) = 0;
  virtual common::Status Copy(void* dst, const void* src, size_t bytes, Stream& stream) = 0;
  virtual common::Status Zero(void* dst, size_t bytes, Stream& stream) = 0;

  // Marks everything `stream` has been given so far.
  virtual common::Status Record(Event& event, Stream& stream) = 0;
  // `stream` goes on past this point only once `event` has passed; the host does not wait.
  virtual common::Status Wait(Stream& stream, const Event& event) = 0;
  // Whether `event` has passed, without waiting.
  virtual common::StatusOr<bool> Passed(const Event& event) = 0;
  // The host waits until `stream` has finished everything it was given.
  virtual common::Status Synchronize(Stream& stream) = 0;
  // Opens (true) or closes the profiler's capture range once the main stream has finished what it was given: on a
  // GPU cuProfilerStart/cuProfilerStop, which `nsys profile --capture-range=cudaProfilerApi` and
  // `ncu --profile-from-start off` wait for; the CPU has none and does nothing.
  virtual common::Status Profile(bool on) = 0;
};

// `count` elements of `dtype` on one device, freed with the buffer. The device must outlive it.
class Buffer {
 public:
  Buffer() = default;
  static common::StatusOr<Buffer> Allocate(Device& device, DType dtype, size_t count);
  static common::StatusOr<Buffer> AllocateZeroed(Device& device, DType dtype, size_t count);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  Device* device() const { return device_; }
  DType dtype() const { return dtype_; }
  size_t count() const { return count_; }
  size_t bytes() const { return count_ * DTypeSize(dtype_); }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Buffer(Device* device, DType dtype, size_t count, void* data)
      : device_(device), dtype_(dtype), count_(count), data_(data) {}
  static common::StatusOr<Buffer> Make(Device& device, DType dtype, size_t count, bool zeroed);
  Device* device_ = nullptr;
  DType dtype_ = DType::kFloat32;
  size_t count_ = 0;
  void* data_ = nullptr;
};

// Makes `buffer` hold at least `count` elements of `dtype` on `device`. A buffer too small is freed once `stream`,
// whose queued work may still use it, has finished, and a larger one takes its place (rare: buffers only grow).
common::Status Grow(Buffer& buffer, Device& device, DType dtype, size_t count, Stream& stream);

// What the constructors that take device memory (Model, AdamW, GradReducer) throw when the device is full: the
// device's own message (how much was asked for, how much is free).
class DeviceFull : public std::bad_alloc {
 public:
  explicit DeviceFull(common::Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const common::Status& status() const { return status_; }

 private:
  common::Status status_;
};

// `count` zeroed elements of `dtype` on `device` (queued on its main stream); throws DeviceFull.
Buffer ZeroedOrThrow(Device& device, DType dtype, size_t count);

// fp32 values in a device's memory as a host span: the memory itself on the host, else a host copy that Download()
// fills and Upload() writes back, each waiting for the main stream. For initialisation, checkpoints and the
// export, never inside a step.
class HostMirror {
 public:
  HostMirror(Device& device, float* data, size_t count);
  std::span<float> host() { return host_; }
  common::Status Download();
  common::Status Upload();

 private:
  Device& device_;
  float* data_;
  std::vector<float> copy_;
  std::span<float> host_;
};

enum class DeviceChoice { kAuto, kCpu, kCuda };
// "auto", "cpu" or "cuda"; anything else is InvalidArgument naming the three.
common::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text);
// The GPU path's switches in the environment (README "On a GPU"): SRUNWAY_ATTENTION one of mma, cudnn, auto, wmma,
// simple; SRUNWAY_GELU_EPILOGUE and SRUNWAY_GEMM_TUNE 0 or 1; each unset or empty. Anything else (a typo that would
// otherwise run whatever the default is) is InvalidArgument naming the variable, its value and what it takes, whatever
// the device.
common::Status CheckGpuSwitches();

// The host, shared by `local_ranks` ranks on this node: each may hold an even share of its memory (HostMemoryBudget).
std::unique_ptr<Device> NewCpuDevice(int local_ranks = 1);
// The rank's GPU (common::OpenCudaGpu): "no CUDA driver: ..." where libcuda cannot be loaded, NotFound where it
// sees no GPU, FailedPrecondition in a build without cuda.h.
common::StatusOr<std::unique_ptr<Device>> NewCudaDevice(int local_rank);

// kCpu: the host. kCuda: the rank's GPU, or why not. kAuto: the GPU where there is one, else the host, and then
// `note` (when given) receives one sentence saying why, for the program's log.
// `local_ranks`: the ranks on this node (NewCpuDevice's share).
common::StatusOr<std::unique_ptr<Device>> OpenDevice(DeviceChoice choice, int local_rank, int local_ranks = 1,
                                                     std::string* note = nullptr);

}  // namespace srunway::trainer
