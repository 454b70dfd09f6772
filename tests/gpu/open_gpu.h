// The gpu suite's programs open this machine's GPU as the trainer does, and skip (exit 77) where there is none.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "trainer/device/device.h"

namespace srunway::gpu_tests {

constexpr int kSkip = 77;

// The trainer's CUDA device for local rank 0. No driver or no GPU: prints "TEST: skipped, why" and exits 77; any
// other failure: prints it and exits 1.
inline std::unique_ptr<trainer::Device> OpenGpuOrSkip(const char* test) {
  auto opened = trainer::OpenDevice(trainer::DeviceChoice::kCuda, 0);
  if (opened.ok()) return std::move(*opened);
  const std::string& why = opened.status().message();
  if (why.starts_with("no CUDA driver") || opened.status().code() == common::StatusCode::kNotFound) {
    std::printf("%s: skipped, %s\n", test, why.c_str());
    std::exit(kSkip);
  }
  std::fprintf(stderr, "%s: cannot open the GPU: %s\n", test, opened.status().ToString().c_str());
  std::exit(EXIT_FAILURE);
}

}  // namespace srunway::gpu_tests
