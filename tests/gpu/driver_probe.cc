// GPU suite: loads the CUDA driver through common::DynamicLibrary and checks what it reports for every device.
// Exits 77 (skip) where there is no driver or no device.
#include <cstdio>
#include <cstdlib>

#include "common/dynlib.h"

namespace {

using CuResult = int;
using CuDevice = int;
constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorNoDevice = 100;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kSkip = 77;

int Fail(const char* what, CuResult result) {
  std::fprintf(stderr, "driver_probe: %s failed with CUDA error %d\n", what, result);
  return EXIT_FAILURE;
}

}  // namespace

int main() {
  using srunway::common::DynamicLibrary;
  auto cuda = DynamicLibrary::Open("libcuda.so.1");
  if (!cuda.ok()) {
    std::printf("driver_probe: skipped, no CUDA driver: %s\n", cuda.status().ToString().c_str());
    return kSkip;
  }
  auto init = cuda->Symbol<CuResult(unsigned)>("cuInit");
  auto driver_version = cuda->Symbol<CuResult(int*)>("cuDriverGetVersion");
  auto device_count = cuda->Symbol<CuResult(int*)>("cuDeviceGetCount");
  auto device_get = cuda->Symbol<CuResult(CuDevice*, int)>("cuDeviceGet");
  auto device_name = cuda->Symbol<CuResult(char*, int, CuDevice)>("cuDeviceGetName");
  auto device_attribute = cuda->Symbol<CuResult(int*, int, CuDevice)>("cuDeviceGetAttribute");
  auto device_memory = cuda->Symbol<CuResult(size_t*, CuDevice)>("cuDeviceTotalMem_v2");
  if (!init.ok() || !driver_version.ok() || !device_count.ok() || !device_get.ok() || !device_name.ok() ||
      !device_attribute.ok() || !device_memory.ok()) {
    std::fprintf(stderr, "driver_probe: %s lacks a driver entry point\n", cuda->path().c_str());
    return EXIT_FAILURE;
  }

  CuResult result = (*init)(0);
  if (result == kCudaErrorNoDevice) {
    std::printf("driver_probe: skipped, the driver at %s sees no device\n", cuda->path().c_str());
    return kSkip;
  }
  if (result != kCudaSuccess) return Fail("cuInit", result);
  int version = 0;
  if ((result = (*driver_version)(&version)) != kCudaSuccess) return Fail("cuDriverGetVersion", result);
  int count = 0;
  if ((result = (*device_count)(&count)) != kCudaSuccess) return Fail("cuDeviceGetCount", result);
  if (count == 0) {
    std::printf("driver_probe: skipped, no CUDA device\n");
    return kSkip;
  }
  std::printf("driver_probe: %s, driver API %d.%d, %d device(s)\n", cuda->path().c_str(), version / 1000,
              (version % 1000) / 10, count);
  for (int i = 0; i < count; ++i) {
    CuDevice device = 0;
    char name[256] = {};
    int major = 0, minor = 0;
    size_t bytes = 0;
    if ((result = (*device_get)(&device, i)) != kCudaSuccess) return Fail("cuDeviceGet", result);
    if ((result = (*device_name)(name, sizeof name, device)) != kCudaSuccess) return Fail("cuDeviceGetName", result);
    if ((result = (*device_attribute)(&major, kAttrComputeCapabilityMajor, device)) != kCudaSuccess ||
        (result = (*device_attribute)(&minor, kAttrComputeCapabilityMinor, device)) != kCudaSuccess) {
      return Fail("cuDeviceGetAttribute", result);
    }
    if ((result = (*device_memory)(&bytes, device)) != kCudaSuccess) return Fail("cuDeviceTotalMem", result);
    std::printf("  device %d: %s, compute capability %d.%d, %.1f GiB\n", i, name, major, minor,
                static_cast<double>(bytes) / (1 << 30));
    if (name[0] == '\0' || major < 5 || bytes == 0) {
      std::fprintf(stderr, "driver_probe: device %d reports implausible properties\n", i);
      return EXIT_FAILURE;
    }
  }
  return EXIT_SUCCESS;
}
