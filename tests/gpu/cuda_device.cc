// GPU suite: the trainer's CUDA device on this machine's GPU (trainer/device/device.h). 256 MiB go host -> GPU on
// a side stream, the main stream waits on an event and copies them on, and they come back intact; a zeroed buffer
// reads zero; an event recorded before Synchronize has passed after it; an allocation of
// 1 TiB fails with the GPU's free memory in the message. Exits 77 (skip) where there is no driver or no GPU.
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "tests/gpu/open_gpu.h"
#include "trainer/device/device.h"

namespace {

using srunway::trainer::Buffer;
using srunway::trainer::DType;

int Fail(const char* what, const srunway::common::Status& status) {
  std::fprintf(stderr, "cuda_device: %s: %s\n", what, status.ToString().c_str());
  return EXIT_FAILURE;
}

}  // namespace

int main() {
  auto opened = srunway::gpu_tests::OpenGpuOrSkip("cuda_device");
  auto& device = *opened;
  std::printf("cuda_device: %s\n", device.name().c_str());

  const size_t count = size_t{64} << 20;  // 256 MiB of fp32
  std::vector<float> host(count);
  std::iota(host.begin(), host.end(), 0.0f);
  auto a = Buffer::Allocate(device, DType::kFloat32, count);
  auto b = Buffer::Allocate(device, DType::kFloat32, count);
  if (!a.ok()) return Fail("Allocate", a.status());
  if (!b.ok()) return Fail("Allocate", b.status());
  auto side = device.NewStream();
  auto copied = device.NewEvent();
  auto done = device.NewEvent();
  if (!side.ok() || !copied.ok() || !done.ok()) return Fail("NewStream/NewEvent", side.status());
  if (auto s = device.CopyFromHost(a->data(), host.data(), a->bytes(), **side); !s.ok()) return Fail("CopyFromHost", s);
  if (auto s = device.Record(**copied, **side); !s.ok()) return Fail("Record", s);
  if (auto s = device.Wait(device.main_stream(), **copied); !s.ok()) return Fail("Wait", s);
  if (auto s = device.Copy(b->data(), a->data(), a->bytes(), device.main_stream()); !s.ok()) return Fail("Copy", s);
  std::vector<float> back(count, -1.0f);
  if (auto s = device.CopyToHost(back.data(), b->data(), b->bytes(), device.main_stream()); !s.ok()) {
    return Fail("CopyToHost", s);
  }
  if (auto s = device.Record(**done, device.main_stream()); !s.ok()) return Fail("Record", s);
  if (auto s = device.Synchronize(device.main_stream()); !s.ok()) return Fail("Synchronize", s);
  auto passed = device.Passed(**done);
  if (!passed.ok() || !*passed) {
    std::fprintf(stderr, "cuda_device: an event recorded before Synchronize has not passed after it\n");
    return EXIT_FAILURE;
  }
  if (back != host) {
    std::fprintf(stderr, "cuda_device: the round trip through two streams changed the data\n");
    return EXIT_FAILURE;
  }
  if (auto s = device.Zero(b->data(), b->bytes(), device.main_stream()); !s.ok()) return Fail("Zero", s);
  if (auto s = device.CopyToHost(back.data(), b->data(), b->bytes(), device.main_stream()); !s.ok()) {
    return Fail("CopyToHost", s);
  }
  if (auto s = device.Synchronize(device.main_stream()); !s.ok()) return Fail("Synchronize", s);
  for (float x : back) {
    if (x != 0.0f) {
      std::fprintf(stderr, "cuda_device: Zero left %g\n", static_cast<double>(x));
      return EXIT_FAILURE;
    }
  }
  auto huge = device.Allocate(size_t{1} << 40);
  if (huge.ok() || huge.status().code() != srunway::common::StatusCode::kResourceExhausted ||
      huge.status().message().find(" GiB free") == std::string::npos) {
    std::fprintf(stderr, "cuda_device: a 1 TiB allocation gave '%s'\n",
                 huge.ok() ? "success" : huge.status().ToString().c_str());
    return EXIT_FAILURE;
  }
  std::printf("cuda_device: 256 MiB round trip over two streams, zero, events, out-of-memory message: ok (%s)\n",
              huge.status().message().c_str());
  return EXIT_SUCCESS;
}
