// LayerNorm over rows of C, as ops/cpu/layernorm.cc: one warp per row, fp32 statistics from bf16 inputs.
#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/cuda/norm_backward.cuh"

namespace srunway::trainer::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

// kResidual: `inp` is first written with a + b (rounded to bf16, as ResidualForward writes it), then normalised:
// the residual add fused in, one pass over the row fewer.
template <bool kResidual>
__global__ void LayerNormForwardKernel(bf16* out, float* mean, float* rstd, bf16* inp, const bf16* a, const bf16* b,
                                       const bf16* weight, const bf16* bias, int N, int C, float eps) {
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp; row < N; row += gridDim.x * kRowsPerBlock) {
    const int64_t base = int64_t{row} * C;
    if constexpr (kResidual) {
      for (int c = lane; c < C; c += kWarp) Store(inp, base + c, Load(a, base + c) + Load(b, base + c));
    }
    float sum = 0;
    for (int c = lane; c < C; c += kWarp) sum += Load(inp, base + c);
    const float m = WarpSum(sum) / C;
    float var = 0;
    for (int c = lane; c < C; c += kWarp) {
      const float d = Load(inp, base + c) - m;
      var += d * d;
    }
    const float s = rsqrtf(WarpSum(var) / C + eps);
    for (int c = lane; c < C; c += kWarp) {
      Store(out, base + c, (Load(inp, base + c) - m) * s * Load(weight, c) + Load(bias, c));
    }
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = s;
    }
  }
}

// dinp += (w d - mean(w d) - norm mean(w d norm)) rstd; dweight += norm d, dbias += d (norm_backward.cuh's walk).
struct LayerNormGrads {
  static constexpr int kSums = 2;  // dweight, dbias
  struct Row {
    float mean, rstd, dnorm_mean, dnorm_norm_mean;
  };
  const float *mean, *rstd;
  float* out[kSums];

  __device__ Row Begin(int row) const { return Row{mean[row], rstd[row], 0, 0}; }
  __device__ void Accumulate(Row& r, float x, float d, float w) const {
    const float norm = (x - r.mean) * r.rstd;
    const float dnorm = w * d;
    r.dnorm_mean += dnorm;
    r.dnorm_norm_mean += dnorm * norm;
  }
  __device__ void Finish(Row& r, int C) const {
    r.dnorm_mean = WarpSum(r.dnorm_mean) / C;
    r.dnorm_norm_mean = WarpSum(r.dnorm_norm_mean) / C;
  }
  __device__ float Element(float x, float d, float w, const Row& r, float (&shares)[kSums]) const {
    const float norm = (x - r.mean) * r.rstd;
    shares[0] += norm * d;
    shares[1] += d;
    return (w * d - r.dnorm_mean - norm * r.dnorm_norm_mean) * r.rstd;
  }
};

}  // namespace

int LayerNormForward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                     int N, int C, float eps, Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  LaunchKernel(LayerNormForwardKernel<false>, blocks, kThreads, 0, AsStream(stream), out, mean, rstd,
               const_cast<bf16*>(inp), nullptr, nullptr, weight, bias, N, C, eps);
  return Launched();
}

int ResidualLayerNormForward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* weight, const bf16* bias, int N, int C, float eps, Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kRowsPerBlock - 1) / kRowsPerBlock);
  LaunchKernel(LayerNormForwardKernel<true>, blocks, kThreads, 0, AsStream(stream), out, mean, rstd, residual, a, b,
               weight, bias, N, C, eps);
  return Launched();
}

int LayerNormBackward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* mean, const float* rstd, int N, int C, Stream stream) {
  return LaunchNormBackward(LayerNormGrads{mean, rstd, {dweight, dbias}}, dinp, dout, inp, weight, N, C, stream);
}

}  // namespace srunway::trainer::cuda
