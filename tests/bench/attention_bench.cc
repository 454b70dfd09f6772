// Benchmark helper: times the trainer's causal attention (trainer/ops/cuda's AttentionForward and
// AttentionBackward, with the kernels SRUNWAY_ATTENTION selects, or under SRUNWAY_ATTENTION=cudnn cuDNN's fused
// attention as cudnn_attention.cc builds it, which must have an engine for the shape) at one shape on this machine's
// GPU, from random bf16 inputs, after three warm-up calls, and prints one line: forward_ms=F backward_ms=B (the mean of
// each). Usage: attention_bench B T H KV HEAD_DIM [ITERATIONS [DOCUMENT]]: with DOCUMENT, each sequence holds
// documents of that many tokens (--reset-attention-mask), each token attending within its own (on the kernels,
// which alone take documents). Exits 77 where there is no GPU, 2 on a bad argument.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "tests/gpu/gpu_buffers.h"
#include "trainer/ops/cuda/cudnn_attention.h"
#include "trainer/ops/cuda/kernels.h"

namespace {

namespace cuda = srunway::trainer::cuda;

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& x : values) x = normal(rng);
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || argc > 8) {
    std::fprintf(stderr, "usage: attention_bench B T H KV HEAD_DIM [ITERATIONS [DOCUMENT]]\n");
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
  const int iterations = argc >= 7 ? std::atoi(argv[6]) : 20;
  const int document = argc == 8 ? std::atoi(argv[7]) : 0;
  if (iterations <= 0 || H % KV != 0 || (argc == 8 && document <= 0)) {
    std::fprintf(stderr, "attention_bench: ITERATIONS and DOCUMENT must be positive and KV divide H\n");
    return 2;
  }
  if (document > 0 && cuda::AttentionIs("cudnn")) {
    std::fprintf(stderr, "attention_bench: cuDNN's graphs take no documents\n");
    return 2;
  }
  srunway::gpu_tests::Gpu gpu("attention_bench");
  std::mt19937 rng(7);
  const size_t tokens = static_cast<size_t>(B) * T;
  const size_t qkv_count = tokens * (H + 2 * KV) * hd, out_count = tokens * H * hd;
  auto qkv = gpu.Bf16(Random(qkv_count, rng)), dout = gpu.Bf16(Random(out_count, rng));
  auto out = gpu.Bf16(std::vector<float>(out_count)), dqkv = gpu.Bf16(std::vector<float>(qkv_count));
  auto lse = gpu.F32(std::vector<float>(static_cast<size_t>(B) * H * T));
  auto scratch = gpu.F32(std::vector<float>(static_cast<size_t>(cuda::AttentionBackwardScratch(B, T, H, KV, hd))));
  std::vector<int32_t> document_starts(tokens);
  for (size_t i = 0; i < tokens; ++i) {
    const int t = static_cast<int>(i % static_cast<size_t>(T));
    document_starts[i] = document > 0 ? t - t % document : 0;
  }
  auto starts_buffer = gpu.I32(document_starts);
  const int32_t* starts = document > 0 ? starts_buffer.as<int32_t>() : nullptr;
  std::unique_ptr<cuda::CudnnAttention> cudnn;
  if (cuda::AttentionIs("cudnn")) {
    auto opened = cuda::CudnnAttention::Open(gpu.device());
    gpu.Check(opened.status(), "cuDNN");
    cudnn = std::move(*opened);
  }
  srunway::trainer::Stream& stream = gpu.device().main_stream();
  auto forward = [&] {
    if (cudnn != nullptr) {
      gpu.Check(cudnn->Forward(out.data(), lse.as<float>(), qkv.data(), {B, T, H, KV, hd}, stream), "cuDNN forward");
      return;
    }
    gpu.Launched(cuda::AttentionForward(out.as<uint16_t>(), lse.as<float>(), qkv.as<uint16_t>(), B, T, H, KV, hd,
                                        0.0f, 0, 0, starts, nullptr, gpu.stream()), "AttentionForward");
  };
  auto backward = [&] {
    if (cudnn != nullptr) {
      gpu.Check(
          cudnn->Backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.as<float>(), {B, T, H, KV, hd}, stream),
          "cuDNN backward");
      return;
    }
    gpu.Launched(cuda::AttentionBackward(dqkv.as<uint16_t>(), scratch.as<float>(), dout.as<uint16_t>(),
                                         out.as<uint16_t>(), qkv.as<uint16_t>(), lse.as<float>(), B, T, H, KV, hd, 0.0f,
                                         0, 0, starts, nullptr, nullptr, gpu.stream()), "AttentionBackward");
  };
  // Mean milliseconds of `iterations` calls of fn, the device drained before and after.
  srunway::trainer::Device& device = gpu.device();
  auto time = [&](auto fn) {
    gpu.Check(device.Synchronize(device.main_stream()), "synchronize");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) fn();
    gpu.Check(device.Synchronize(device.main_stream()), "synchronize");
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
