// See cuda_driver.h.
#include "common/cuda_driver.h"

#include "common/env.h"

namespace srunway::common {

namespace {
constexpr int kOldestDriver = 12000;  // the versioned symbols above are those of CUDA 12
}  // namespace

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::Load() {
  SRUNWAY_ASSIGN_OR_RETURN(auto lib, DynamicLibrary::Open(GetEnvOr("SRUNWAY_CUDA_DRIVER", "libcuda.so.1")));
  auto api = std::make_unique<CudaDriver>(CudaDriver{std::move(lib)});
  SRUNWAY_LOAD_SYMBOL(api->init, api->lib, cuInit);
  SRUNWAY_LOAD_SYMBOL(api->driver_version, api->lib, cuDriverGetVersion);
  SRUNWAY_LOAD_SYMBOL(api->error_string, api->lib, cuGetErrorString);
  SRUNWAY_LOAD_SYMBOL(api->device_count, api->lib, cuDeviceGetCount);
  SRUNWAY_LOAD_SYMBOL(api->device_get, api->lib, cuDeviceGet);
  SRUNWAY_LOAD_SYMBOL(api->bus_id, api->lib, cuDeviceGetPCIBusId);
  SRUNWAY_LOAD_SYMBOL(api->device_name, api->lib, cuDeviceGetName);
  SRUNWAY_LOAD_SYMBOL(api->device_attribute, api->lib, cuDeviceGetAttribute);
  SRUNWAY_LOAD_SYMBOL(api->total_memory, api->lib, cuDeviceTotalMem);
  SRUNWAY_LOAD_SYMBOL(api->retain, api->lib, cuDevicePrimaryCtxRetain);
  SRUNWAY_LOAD_SYMBOL(api->release, api->lib, cuDevicePrimaryCtxRelease);
  SRUNWAY_LOAD_SYMBOL(api->set_current, api->lib, cuCtxSetCurrent);
  SRUNWAY_LOAD_SYMBOL(api->stream_create, api->lib, cuStreamCreate);
  SRUNWAY_LOAD_SYMBOL(api->stream_destroy, api->lib, cuStreamDestroy);
  SRUNWAY_LOAD_SYMBOL(api->stream_wait_event, api->lib, cuStreamWaitEvent);
  SRUNWAY_LOAD_SYMBOL(api->stream_synchronize, api->lib, cuStreamSynchronize);
  SRUNWAY_LOAD_SYMBOL(api->event_create, api->lib, cuEventCreate);
  SRUNWAY_LOAD_SYMBOL(api->event_record, api->lib, cuEventRecord);
  SRUNWAY_LOAD_SYMBOL(api->event_query, api->lib, cuEventQuery);
  SRUNWAY_LOAD_SYMBOL(api->event_synchronize, api->lib, cuEventSynchronize);
  SRUNWAY_LOAD_SYMBOL(api->event_destroy, api->lib, cuEventDestroy);
  SRUNWAY_LOAD_SYMBOL(api->mem_alloc, api->lib, cuMemAlloc);
  SRUNWAY_LOAD_SYMBOL(api->mem_free, api->lib, cuMemFree);
  SRUNWAY_LOAD_SYMBOL(api->mem_info, api->lib, cuMemGetInfo);
  SRUNWAY_LOAD_SYMBOL(api->memset, api->lib, cuMemsetD8);
  SRUNWAY_LOAD_SYMBOL(api->memset_async, api->lib, cuMemsetD8Async);
  SRUNWAY_LOAD_SYMBOL(api->to_device, api->lib, cuMemcpyHtoD);
  SRUNWAY_LOAD_SYMBOL(api->to_host, api->lib, cuMemcpyDtoH);
  SRUNWAY_LOAD_SYMBOL(api->to_device_async, api->lib, cuMemcpyHtoDAsync);
  SRUNWAY_LOAD_SYMBOL(api->to_host_async, api->lib, cuMemcpyDtoHAsync);
  SRUNWAY_LOAD_SYMBOL(api->copy_async, api->lib, cuMemcpyDtoDAsync);
  SRUNWAY_LOAD_SYMBOL(api->profiler_start, api->lib, cuProfilerStart);
  SRUNWAY_LOAD_SYMBOL(api->profiler_stop, api->lib, cuProfilerStop);
  SRUNWAY_RETURN_IF_ERROR(api->Check(api->driver_version(&api->version), "cuDriverGetVersion"));
  if (api->version < kOldestDriver) {
    return FailedPrecondition("{} is the driver of CUDA {}.{}; srunway needs CUDA 12.0 or later", api->lib.path(),
                              api->version / 1000, api->version % 1000 / 10);
  }
  return api;
}

Status CudaDriver::Check(CUresult rc, std::string_view what) const {
  if (rc == CUDA_SUCCESS) return Status::Ok();
  const char* text = nullptr;
  error_string(rc, &text);
  return Unavailable("{} failed: {}", what, text != nullptr ? text : "unknown CUDA error");
}

CudaGpu::~CudaGpu() {
  if (context != nullptr && driver != nullptr) driver->release(device);
}

StatusOr<std::unique_ptr<CudaGpu>> OpenCudaGpu(int local_rank) {
  auto gpu = std::make_unique<CudaGpu>();
  auto driver = CudaDriver::Load();
  if (!driver.ok()) return driver.status().WithContext("no CUDA driver");
  gpu->driver = std::move(*driver);
  const CudaDriver& api = *gpu->driver;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.init(0), "cuInit"));
  int count = 0;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.device_count(&count), "cuDeviceGetCount"));
  if (count == 0) return NotFound("no GPU visible (CUDA_VISIBLE_DEVICES='{}')", GetEnvOr("CUDA_VISIBLE_DEVICES", ""));
  gpu->ordinal = local_rank % count;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.device_get(&gpu->device, gpu->ordinal), "cuDeviceGet"));
  char bus_id[32] = {};
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.bus_id(bus_id, sizeof bus_id, gpu->device), "cuDeviceGetPCIBusId"));
  gpu->bus_id = bus_id;
  char name[256] = {};
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.device_name(name, sizeof name, gpu->device), "cuDeviceGetName"));
  gpu->name = name;
  SRUNWAY_RETURN_IF_ERROR(api.Check(api.retain(&gpu->context, gpu->device), "cuDevicePrimaryCtxRetain"));
  SRUNWAY_RETURN_IF_ERROR(gpu->MakeCurrent());
  return gpu;
}

}  // namespace srunway::common
