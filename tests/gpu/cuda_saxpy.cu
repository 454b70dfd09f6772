// GPU suite: builds with nvcc and the static CUDA runtime, runs a kernel and checks it against the CPU.
// Exits 77 (skip) where there is no CUDA device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kSkip = 77;

__global__ void Saxpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i];
}

bool Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "cuda_saxpy: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

}  // namespace

int main() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("cuda_saxpy: skipped, no CUDA device (%s)\n", cudaGetErrorString(error));
    return kSkip;
  }
  const int n = 1 << 20;
  const float a = 2.5f;
  std::vector<float> x(n), y(n), expected(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.001f;
    y[i] = static_cast<float>(i % 7) - 3.0f;
    expected[i] = a * x[i] + y[i];
  }
  float *dx = nullptr, *dy = nullptr;
  if (!Check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc x") ||
      !Check(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc y") ||
      !Check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy x") ||
      !Check(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy y")) {
    return EXIT_FAILURE;
  }
  Saxpy<<<256, 256>>>(n, a, dx, dy);
  if (!Check(cudaGetLastError(), "launch") || !Check(cudaDeviceSynchronize(), "kernel") ||
      !Check(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), "copy back")) {
    return EXIT_FAILURE;
  }
  cudaFree(dx);
  cudaFree(dy);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    // The device may fuse a*x+y into one FMA; allow its rounding difference and nothing more.
    if (std::fabs(y[i] - expected[i]) > 1e-6f * (1.0f + std::fabs(expected[i]))) ++wrong;
  }
  std::printf("cuda_saxpy: %d of %d elements wrong\n", wrong, n);
  return wrong == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
