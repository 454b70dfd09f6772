// The CUDA driver (libcuda), opened at run time: the one table of driver calls that the launcher's NCCL backend and
// the trainer's CUDA device share, and the GPU a rank uses. Only cuda.h's types are compiled in, so a program built
// with it still runs where there is no driver; what is missing comes back as a Status that names it.
#pragma once

#include <cuda.h>
#include <cudaProfiler.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/dynlib.h"
#include "common/status.h"

namespace srunway::common {

struct CudaDriver {
  DynamicLibrary lib;
  int version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0
  decltype(::cuInit)* init = nullptr;
  decltype(::cuDriverGetVersion)* driver_version = nullptr;
  decltype(::cuGetErrorString)* error_string = nullptr;
  decltype(::cuDeviceGetCount)* device_count = nullptr;
  decltype(::cuDeviceGet)* device_get = nullptr;
  decltype(::cuDeviceGetPCIBusId)* bus_id = nullptr;
  decltype(::cuDeviceGetName)* device_name = nullptr;
  decltype(::cuDeviceGetAttribute)* device_attribute = nullptr;
  decltype(::cuDeviceTotalMem)* total_memory = nullptr;
  decltype(::cuDevicePrimaryCtxRetain)* retain = nullptr;
  decltype(::cuDevicePrimaryCtxRelease)* release = nullptr;
  decltype(::cuCtxSetCurrent)* set_current = nullptr;
  decltype(::cuStreamCreate)* stream_create = nullptr;
  decltype(::cuStreamDestroy)* stream_destroy = nullptr;
  decltype(::cuStreamWaitEvent)* stream_wait_event = nullptr;
  decltype(::cuStreamSynchronize)* stream_synchronize = nullptr;
  decltype(::cuEventCreate)* event_create = nullptr;
  decltype(::cuEventRecord)* event_record = nullptr;
  decltype(::cuEventQuery)* event_query = nullptr;
  decltype(::cuEventSynchronize)* event_synchronize = nullptr;
  decltype(::cuEventDestroy)* event_destroy = nullptr;
  decltype(::cuMemAlloc)* mem_alloc = nullptr;
  decltype(::cuMemFree)* mem_free = nullptr;
  decltype(::cuMemGetInfo)* mem_info = nullptr;
  decltype(::cuMemsetD8)* memset = nullptr;
  decltype(::cuMemsetD8Async)* memset_async = nullptr;
  decltype(::cuMemcpyHtoD)* to_device = nullptr;
  decltype(::cuMemcpyDtoH)* to_host = nullptr;
  decltype(::cuMemcpyHtoDAsync)* to_device_async = nullptr;
  decltype(::cuMemcpyDtoHAsync)* to_host_async = nullptr;
  decltype(::cuMemcpyDtoDAsync)* copy_async = nullptr;
  decltype(::cuProfilerStart)* profiler_start = nullptr;  // the capture range of nsys and ncu
  decltype(::cuProfilerStop)* profiler_stop = nullptr;

  // SRUNWAY_CUDA_DRIVER names the file; otherwise libcuda.so.1 through the dynamic linker's search path (the
  // driver installs it there; it never comes with a program). Needs a driver for CUDA 12.0 or later.
  static StatusOr<std::unique_ptr<CudaDriver>> Load();

  // Ok, or the call's name with the driver's text for `rc`.
  Status Check(CUresult rc, std::string_view what) const;
};

// The GPU of one rank, with the driver's primary context current on the calling thread.
struct CudaGpu {
  std::unique_ptr<CudaDriver> driver;
  int ordinal = 0;  // among the visible devices
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::string bus_id;  // "0000:04:00.0"
  std::string name;    // "NVIDIA H100 80GB HBM3"

  CudaGpu() = default;
  CudaGpu(CudaGpu&&) = default;
  CudaGpu& operator=(CudaGpu&&) = delete;
  ~CudaGpu();  // releases the primary context

  Status MakeCurrent() const { return driver->Check(driver->set_current(context), "cuCtxSetCurrent"); }
};

// Loads the driver and opens the GPU of a rank: the one visible device when Slurm or the SPANK plugin gave each
// task its own, else the local rank's among those visible. "no CUDA driver: ..." where libcuda cannot be loaded,
// NotFound where the driver sees no device.
StatusOr<std::unique_ptr<CudaGpu>> OpenCudaGpu(int local_rank);

}  // namespace srunway::common
