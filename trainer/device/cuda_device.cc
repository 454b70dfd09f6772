// One GPU as a Device, through the CUDA driver table that the launcher's NCCL backend shares
// (common/cuda_driver.h). Every call makes the GPU's primary context current on the calling thread first, so any
// thread may use the device. Kernels compiled by nvcc launch on these streams too: a CUstream is a cudaStream_t.
#include <fmt/format.h>

#include "common/cuda_driver.h"
#include "trainer/device/device.h"

namespace srunway::trainer {
namespace {

using common::Status;
using common::StatusOr;

class CudaStream : public Stream {
 public:
  CudaStream(const common::CudaDriver& driver, CUstream stream, bool owned = true)
      : driver_(driver), stream_(stream), owned_(owned) {}
  ~CudaStream() override {
    if (owned_) driver_.stream_destroy(stream_);
  }
  CUstream get() const { return stream_; }

 private:
  const common::CudaDriver& driver_;
  CUstream stream_;
  bool owned_;
};

class CudaEvent : public Event {
 public:
  CudaEvent(const common::CudaDriver& driver, CUevent event) : driver_(driver), event_(event) {}
  ~CudaEvent() override { driver_.event_destroy(event_); }
  CUevent get() const { return event_; }

 private:
  const common::CudaDriver& driver_;
  CUevent event_;
};

class CudaDevice : public Device {
 public:
  CudaDevice(std::unique_ptr<common::CudaGpu> gpu, std::unique_ptr<CudaStream>* main)
      : gpu_(std::move(gpu)), api_(*gpu_->driver), name_(fmt::format("{} ({})", gpu_->name, gpu_->bus_id)),
        main_(std::move(*main)) {}
  ~CudaDevice() override {
    (void)gpu_->MakeCurrent();
    main_.reset();
  }

  static StatusOr<std::unique_ptr<Device>> Open(int local_rank) {
    SRUNWAY_ASSIGN_OR_RETURN(auto gpu, common::OpenCudaGpu(local_rank));
    SRUNWAY_ASSIGN_OR_RETURN(auto main, MakeStream(*gpu->driver));
    return std::unique_ptr<Device>(new CudaDevice(std::move(gpu), &main));
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  const std::string& name() const override { return name_; }

  StatusOr<void*> Allocate(size_t bytes) override {
    SRUNWAY_RETURN_IF_ERROR(gpu_->MakeCurrent());
    CUdeviceptr data = 0;
    CUresult rc = api_.mem_alloc(&data, bytes == 0 ? 1 : bytes);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
      size_t free = 0, total = 0;
      api_.mem_info(&free, &total);
      return common::ResourceExhausted("cannot allocate {:.2f} GiB on {}: {:.2f} of {:.2f} GiB free", Gib(bytes),
                                       name_, Gib(free), Gib(total));
    }
    SRUNWAY_RETURN_IF_ERROR(api_.Check(rc, "cuMemAlloc"));
    tally_.Add(reinterpret_cast<void*>(data), bytes);
    return reinterpret_cast<void*>(data);
  }
  void Free(void* data) noexcept override {
    tally_.Remove(data);
    if (gpu_->MakeCurrent().ok()) api_.mem_free(reinterpret_cast<CUdeviceptr>(data));
  }
  size_t peak_allocated() const override { return tally_.peak(); }
  AllocationStats allocations() const override { return tally_.Stats(); }

  Stream& main_stream() override { return *main_; }
  void* native(Stream& stream) const override {
    auto* own = dynamic_cast<CudaStream*>(&stream);
    return own != nullptr ? own->get() : nullptr;
  }
  StatusOr<std::unique_ptr<Stream>> NewStream() override {
    SRUNWAY_RETURN_IF_ERROR(gpu_->MakeCurrent());
    SRUNWAY_ASSIGN_OR_RETURN(auto stream, MakeStream(api_));
    return std::unique_ptr<Stream>(std::move(stream));
  }
  std::unique_ptr<Stream> Adopt(void* native) override {
    return std::make_unique<CudaStream>(api_, static_cast<CUstream>(native), false);
  }
  StatusOr<std::unique_ptr<Event>> NewEvent() override {
    SRUNWAY_RETURN_IF_ERROR(gpu_->MakeCurrent());
    CUevent event = nullptr;
    SRUNWAY_RETURN_IF_ERROR(api_.Check(api_.event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    return std::unique_ptr<Event>(std::make_unique<CudaEvent>(api_, event));
  }

  Status CopyFromHost(void* dst, const void* host, size_t bytes, Stream& stream) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    return api_.Check(api_.to_device_async(Ptr(dst), host, bytes, s), "cuMemcpyHtoDAsync");
  }
  Status CopyToHost(void* host, const void* src, size_t bytes, Stream& stream) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    return api_.Check(api_.to_host_async(host, Ptr(src), bytes, s), "cuMemcpyDtoHAsync");
  }
  Status Copy(void* dst, const void* src, size_t bytes, Stream& stream) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    return api_.Check(api_.copy_async(Ptr(dst), Ptr(src), bytes, s), "cuMemcpyDtoDAsync");
  }
  Status Zero(void* dst, size_t bytes, Stream& stream) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    return api_.Check(api_.memset_async(Ptr(dst), 0, bytes, s), "cuMemsetD8Async");
  }

  Status Record(Event& event, Stream& stream) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    SRUNWAY_ASSIGN_OR_RETURN(CUevent e, Of(event));
    return api_.Check(api_.event_record(e, s), "cuEventRecord");
  }
  Status Wait(Stream& stream, const Event& event) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    SRUNWAY_ASSIGN_OR_RETURN(CUevent e, Of(event));
    return api_.Check(api_.stream_wait_event(s, e, 0), "cuStreamWaitEvent");
  }
  StatusOr<bool> Passed(const Event& event) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUevent e, Of(event));
    CUresult rc = api_.event_query(e);
    if (rc == CUDA_ERROR_NOT_READY) return false;
    SRUNWAY_RETURN_IF_ERROR(api_.Check(rc, "cuEventQuery"));
    return true;
  }
  Status Synchronize(Stream& stream) override {
    SRUNWAY_ASSIGN_OR_RETURN(CUstream s, Of(stream));
    return api_.Check(api_.stream_synchronize(s), "cuStreamSynchronize");
  }
  Status Profile(bool on) override {
    SRUNWAY_RETURN_IF_ERROR(Synchronize(main_stream()));
    return on ? api_.Check(api_.profiler_start(), "cuProfilerStart")
              : api_.Check(api_.profiler_stop(), "cuProfilerStop");
  }

 private:
  static StatusOr<std::unique_ptr<CudaStream>> MakeStream(const common::CudaDriver& api) {
    CUstream stream = nullptr;
    SRUNWAY_RETURN_IF_ERROR(api.Check(api.stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    return std::make_unique<CudaStream>(api, stream);
  }
  static CUdeviceptr Ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

  // The handle behind a stream or event of this device, with the context current for the call that follows.
  StatusOr<CUstream> Of(Stream& stream) const {
    auto* own = dynamic_cast<CudaStream*>(&stream);
    if (own == nullptr) return common::InvalidArgument("a stream of another device was used on {}", name_);
    SRUNWAY_RETURN_IF_ERROR(gpu_->MakeCurrent());
    return own->get();
  }
  StatusOr<CUevent> Of(const Event& event) const {
    const auto* own = dynamic_cast<const CudaEvent*>(&event);
    if (own == nullptr) return common::InvalidArgument("an event of another device was used on {}", name_);
    SRUNWAY_RETURN_IF_ERROR(gpu_->MakeCurrent());
    return own->get();
  }

  std::unique_ptr<common::CudaGpu> gpu_;
  const common::CudaDriver& api_;
  std::string name_;
  std::unique_ptr<CudaStream> main_;
  AllocationTally tally_;
};

}  // namespace

common::StatusOr<std::unique_ptr<Device>> NewCudaDevice(int local_rank) { return CudaDevice::Open(local_rank); }

}  // namespace srunway::trainer
