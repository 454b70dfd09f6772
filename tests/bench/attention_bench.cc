// Benchmark helper: times the trainer's causal attention (trainer/ops/cuda's AttentionForward and
// AttentionBackward, with the kernels SRUNWAY_ATTENTION selects) at one shape on this machine's GPU, from random
// bf16 inputs, after three warm-up calls, and prints one line: forward_ms=F backward_ms=B (the mean of each).
// Usage: attention_bench B T H KV HEAD_DIM [ITERATIONS]. Exits 77 where there is no GPU, 2 on a bad argument.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "tests/gpu/open_gpu.h"
#include "trainer/device/device.h"
#include "trainer/ops/cuda/kernels.h"

namespace {

using srunway::trainer::Buffer;
using srunway::trainer::Device;
using srunway::trainer::DType;
namespace cuda = srunway::trainer::cuda;

template <typename T>
T Check(srunway::common::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "attention_bench: %s: %s\n", what, value.status().ToString().c_str());
    std::exit(EXIT_FAILURE);
  }
  return std::move(*value);
}

void Check(const srunway::common::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "attention_bench: %s: %s\n", what, status.ToString().c_str());
    std::exit(EXIT_FAILURE);
  }
}

void Launched(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "attention_bench: %s: %s\n", what, cuda::ErrorText(rc));
    std::exit(EXIT_FAILURE);
  }
}

Buffer RandomBf16(Device& device, size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> bits(n);
  for (uint16_t& x : bits) x = srunway::common::FloatToBFloat16(normal(rng));
  Buffer buffer = Check(Buffer::Allocate(device, DType::kBFloat16, n), "allocate");
  Check(device.CopyFromHost(buffer.data(), bits.data(), n * sizeof(uint16_t), device.main_stream()), "copy");
  Check(device.Synchronize(device.main_stream()), "synchronize");  // before `bits` goes
  return buffer;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 7) {
    std::fprintf(stderr, "usage: attention_bench B T H KV HEAD_DIM [ITERATIONS]\n");
    return 2;
  }
  int shape[5];
  for (int i = 0; i < 5; ++i) {
    shape[i] = std::atoi(argv[i + 1]);
    if (shape[i] <= 0) {
      std::fprintf(stderr, "attention_bench: argument %d ('%s') is not a positive integer\n", i + 1, argv[i + 1]);
      return 2;
    }
  }
  const auto [B, T, H, KV, hd] = shape;
  const int iterations = argc == 7 ? std::atoi(argv[6]) : 20;
  if (iterations <= 0 || H % KV != 0) {
    std::fprintf(stderr, "attention_bench: ITERATIONS must be positive and KV divide H\n");
    return 2;
  }
  std::unique_ptr<Device> device = srunway::gpu_tests::OpenGpuOrSkip("attention_bench");
  void* stream = device->native(device->main_stream());
  std::mt19937 rng(7);
  const size_t tokens = static_cast<size_t>(B) * T;
  Buffer qkv = RandomBf16(*device, tokens * (H + 2 * KV) * hd, rng);
  Buffer dout = RandomBf16(*device, tokens * H * hd, rng);
  Buffer out = Check(Buffer::Allocate(*device, DType::kBFloat16, tokens * H * hd), "allocate");
  Buffer dqkv = Check(Buffer::Allocate(*device, DType::kBFloat16, tokens * (H + 2 * KV) * hd), "allocate");
  Buffer lse = Check(Buffer::Allocate(*device, DType::kFloat32, static_cast<size_t>(B) * H * T), "allocate");
  Buffer scratch = Check(Buffer::Allocate(*device, DType::kFloat32,
                                          static_cast<size_t>(cuda::AttentionBackwardScratch(B, T, H, KV, hd))),
                         "allocate");
  auto forward = [&] {
    Launched(cuda::AttentionForward(out.as<uint16_t>(), lse.as<float>(), qkv.as<uint16_t>(), B, T, H, KV, hd, 0.0f,
                                    0, 0, stream), "AttentionForward");
  };
  auto backward = [&] {
    Launched(cuda::AttentionBackward(dqkv.as<uint16_t>(), scratch.as<float>(), dout.as<uint16_t>(),
                                     out.as<uint16_t>(), qkv.as<uint16_t>(), lse.as<float>(), B, T, H, KV, hd, 0.0f, 0,
                                     0, stream), "AttentionBackward");
  };
  // Mean milliseconds of `iterations` calls of fn, the device drained before and after.
  auto time = [&](auto fn) {
    Check(device->Synchronize(device->main_stream()), "synchronize");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) fn();
    Check(device->Synchronize(device->main_stream()), "synchronize");
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / iterations;
  };
  for (int i = 0; i < 3; ++i) {
    forward();
    backward();
  }
  const double forward_ms = time(forward);
  const double backward_ms = time(backward);
  std::printf("forward_ms=%.4f backward_ms=%.4f\n", forward_ms, backward_ms);
  return 0;
}
