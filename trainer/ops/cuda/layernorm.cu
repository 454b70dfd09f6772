// LayerNorm over rows of C, as ops/cpu/layernorm.cc: one warp per row, fp32 statistics from bf16 inputs.
#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/cuda/norm_backward.cuh"

namespace srunway::trainer::cuda {
namespace {

// kResidual: `inp` is first written with a + b (rounded to bf16, as ResidualForward writes it), then normalised:
// the residual add fused in, one pass over the row fewer. Each lane takes 8 columns of every slab of 256
// (norm_backward.cuh's NormColumn), 16 bytes at a time where kVector.
template <bool kResidual, bool kVector>
__global__ void LayerNormForwardKernel(bf16* out, float* mean, float* rstd, bf16* inp, const bf16* a, const bf16* b,
                                       const bf16* weight, const bf16* bias, int N, int C, float eps,
                                       float weight_offset) {
  const int lane = threadIdx.x % kWarp;
  float x[kNormColumnsPerLane], y[kNormColumnsPerLane];
  for (int row = blockIdx.x * kNormForwardRows + threadIdx.x / kWarp; row < N; row += gridDim.x * kNormForwardRows) {
    const int64_t base = int64_t{row} * C;
    if constexpr (kResidual) StoreResidualRow<kVector>(inp + base, a + base, b + base, lane, C);
    float sum = 0;
    for (int slab = 0; slab < C; slab += kNormSlab) {
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);  // 0 past C
      for (int j = 0; j < kNormColumnsPerLane; ++j) sum += x[j];
    }
    const float m = WarpSum(sum) / C;
    float var = 0;
    for (int slab = 0; slab < C; slab += kNormSlab) {
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);
      for (int j = 0; j < kNormColumnsPerLane; ++j) {
        const float d = x[j] - m;
        if (NormColumn<kVector>(slab, lane, j) < C) var += d * d;
      }
    }
    const float s = rsqrtf(WarpSum(var) / C + eps);
    for (int slab = 0; slab < C; slab += kNormSlab) {
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);
      LoadNormColumns<kVector>(weight, slab, lane, C, y);
      float z[kNormColumnsPerLane];
      LoadNormColumns<kVector>(bias, slab, lane, C, z);
      for (int j = 0; j < kNormColumnsPerLane; ++j) x[j] = (x[j] - m) * s * (y[j] + weight_offset) + z[j];
      StoreNormColumns<kVector>(out + base, slab, lane, C, x);
    }
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = s;
    }
  }
}

// LayerNormForwardKernel for rows of C a multiple of 8 and at most kNormRowSlabs slabs (every preset's width):
// the lane's columns of the row stay in registers from their load to the output's store, so the row is read from
// memory once (the kernel above walks it three times, and at the 1.3B's width the later walks came from memory:
// LayerNorm's forward was 1.1% of its step on an H200). The same sums in the same order as the kernel above.
template <bool kResidual, int kSlabs>
__global__ void LayerNormRowsKernel(bf16* out, float* mean, float* rstd, bf16* inp,
                                    const bf16* a, const bf16* b, const bf16* weight, const bf16* bias, int N, int C,
                                    float eps, float weight_offset) {
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kNormForwardRows + threadIdx.x / kWarp; row < N; row += gridDim.x * kNormForwardRows) {
    Pack8 x[kSlabs];
    LoadNormRow<kResidual>(x, inp, a, b, row, lane, C);
    const float m = WarpSum(LaneSum(x, lane, C, [](float v) { return v; })) / C;
    const float var = WarpSum(LaneSum(x, lane, C, [m](float v) { return (v - m) * (v - m); })) / C;
    const float r = rsqrtf(var + eps);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      if (NormColumn<true>(s * kNormSlab, lane, 0) >= C) continue;
      float v[kPack], w[kPack], z[kPack];
      Unpack(x[s], v);
      LoadNormColumns<true>(weight, s * kNormSlab, lane, C, w);
      LoadNormColumns<true>(bias, s * kNormSlab, lane, C, z);
      for (int j = 0; j < kPack; ++j) v[j] = (v[j] - m) * r * (w[j] + weight_offset) + z[j];
      StoreNormColumns<true>(out + int64_t{row} * C, s * kNormSlab, lane, C, v);
    }
    if (lane == 0) {
      mean[row] = m;
      rstd[row] = r;
    }
  }
}

// dinp += (w d - mean(w d) - norm mean(w d norm)) rstd, w the weight plus its offset; dweight += norm d, dbias += d
// (norm_backward.cuh's walk).
struct LayerNormGrads {
  static constexpr int kSums = 2;  // dweight, dbias
  struct Row {
    float mean, rstd, dnorm_mean, dnorm_norm_mean;
  };
  const float *mean, *rstd;
  float* out[kSums];
  float weight_offset;

  __device__ Row Begin(int row) const { return Row{mean[row], rstd[row], 0, 0}; }
  __device__ void Accumulate(Row& r, float x, float d, float w) const {
    const float norm = (x - r.mean) * r.rstd;
    const float dnorm = (w + weight_offset) * d;
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
    return ((w + weight_offset) * d - r.dnorm_mean - norm * r.dnorm_norm_mean) * r.rstd;
  }
};

}  // namespace

int LayerNormForward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                     int N, int C, float eps, float weight_offset, Stream stream) {
  return ResidualLayerNormForward(const_cast<bf16*>(inp), out, mean, rstd, nullptr, nullptr, weight, bias, N, C, eps,
                                  weight_offset, stream);
}

// With a and b null, LayerNormForward: `residual` is the input, read only.
int ResidualLayerNormForward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* weight, const bf16* bias, int N, int C, float eps, float weight_offset,
                             Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kNormForwardRows - 1) / kNormForwardRows);
  const bool vector = Vectorizable(out, C) && Vectorizable(residual, C) && Vectorizable(weight, C) &&
                      Vectorizable(bias, C) && (a == nullptr || (Vectorizable(a, C) && Vectorizable(b, C)));
  auto launch = [&](auto kernel) {
    LaunchKernel(kernel, blocks, kThreads, 0, AsStream(stream), out, mean, rstd, residual, a, b, weight, bias, N, C,
                 eps, weight_offset);
    return Launched();
  };
  if (vector && C <= kNormRowSlabs * kNormSlab) {
    return WithRowSlabs(C, [&](auto slabs) {
      constexpr int kSlabs = decltype(slabs)::value;
      return a == nullptr ? launch(LayerNormRowsKernel<false, kSlabs>) : launch(LayerNormRowsKernel<true, kSlabs>);
    });
  }
  if (a == nullptr) {
    return vector ? launch(LayerNormForwardKernel<false, true>) : launch(LayerNormForwardKernel<false, false>);
  }
  return vector ? launch(LayerNormForwardKernel<true, true>) : launch(LayerNormForwardKernel<true, false>);
}

int LayerNormBackward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* mean, const float* rstd, int N, int C, float weight_offset, Stream stream) {
  return LaunchNormBackward(LayerNormGrads{mean, rstd, {dweight, dbias}, weight_offset}, dinp, dout, inp, weight, N, C,
                            stream);
}

}  // namespace srunway::trainer::cuda
