// RMSNorm (Llama) over rows of C, as ops/cpu/rmsnorm.cc: one warp per row, fp32 statistics from bf16 inputs.
#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/cuda/norm_backward.cuh"

namespace srunway::trainer::cuda {
namespace {

// kResidual: `inp` is first written with a + b (rounded to bf16, as ResidualForward writes it), then normalised.
// Each lane takes 8 columns of every slab of 256 (norm_backward.cuh's NormColumn), 16 bytes at a time where kVector.
template <bool kResidual, bool kVector>
__global__ void RmsNormForwardKernel(bf16* out, float* rstd, bf16* inp, const bf16* a, const bf16* b,
                                     const bf16* weight, int N, int C, float eps, float weight_offset) {
  const int lane = threadIdx.x % kWarp;
  float x[kNormColumnsPerLane], y[kNormColumnsPerLane];
  for (int row = blockIdx.x * kNormForwardRows + threadIdx.x / kWarp; row < N; row += gridDim.x * kNormForwardRows) {
    const int64_t base = int64_t{row} * C;
    if constexpr (kResidual) StoreResidualRow<kVector>(inp + base, a + base, b + base, lane, C);
    float sum_sq = 0;
    for (int slab = 0; slab < C; slab += kNormSlab) {
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);  // 0 past C
      for (int j = 0; j < kNormColumnsPerLane; ++j) sum_sq += x[j] * x[j];
    }
    const float s = rsqrtf(WarpSum(sum_sq) / C + eps);
    for (int slab = 0; slab < C; slab += kNormSlab) {
      LoadNormColumns<kVector>(inp + base, slab, lane, C, x);
      LoadNormColumns<kVector>(weight, slab, lane, C, y);
      for (int j = 0; j < kNormColumnsPerLane; ++j) x[j] = x[j] * s * (y[j] + weight_offset);
      StoreNormColumns<kVector>(out + base, slab, lane, C, x);
    }
    if (lane == 0) rstd[row] = s;
  }
}

// RmsNormForwardKernel for rows of C a multiple of 8 and at most kNormRowSlabs slabs, the row held in registers
// from its load to the output's store (layernorm.cu's LayerNormRowsKernel): read from memory once, not twice.
template <bool kResidual, int kSlabs>
__global__ void RmsNormRowsKernel(bf16* out, float* rstd, bf16* inp, const bf16* a,
                                  const bf16* b, const bf16* weight, int N, int C, float eps, float weight_offset) {
  const int lane = threadIdx.x % kWarp;
  for (int row = blockIdx.x * kNormForwardRows + threadIdx.x / kWarp; row < N; row += gridDim.x * kNormForwardRows) {
    Pack8 x[kSlabs];
    LoadNormRow<kResidual>(x, inp, a, b, row, lane, C);
    const float r = rsqrtf(WarpSum(LaneSum(x, lane, C, [](float v) { return v * v; })) / C + eps);
#pragma unroll
    for (int s = 0; s < kSlabs; ++s) {
      if (NormColumn<true>(s * kNormSlab, lane, 0) >= C) continue;
      float v[kPack], w[kPack];
      Unpack(x[s], v);
      LoadNormColumns<true>(weight, s * kNormSlab, lane, C, w);
      for (int j = 0; j < kPack; ++j) v[j] = v[j] * r * (w[j] + weight_offset);
      StoreNormColumns<true>(out + int64_t{row} * C, s * kNormSlab, lane, C, v);
    }
    if (lane == 0) rstd[row] = r;
  }
}

// dx = s (w d) - x s^3 mean(w d x), w the weight plus its offset; dweight += x s d (norm_backward.cuh's walk).
struct RmsNormGrads {
  static constexpr int kSums = 1;  // dweight
  struct Row {
    float rstd, dot;
  };
  const float* rstd;
  float* out[kSums];
  float weight_offset;

  __device__ Row Begin(int row) const { return Row{rstd[row], 0}; }
  __device__ void Accumulate(Row& r, float x, float d, float w) const { r.dot += (w + weight_offset) * d * x; }
  __device__ void Finish(Row& r, int C) const { r.dot = WarpSum(r.dot) / C; }
  __device__ float Element(float x, float d, float w, const Row& r, float (&shares)[kSums]) const {
    const float s = r.rstd;
    shares[0] += x * s * d;
    return s * (w + weight_offset) * d - x * s * s * s * r.dot;
  }
};

}  // namespace

int RmsNormForward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int N, int C, float eps,
                   float weight_offset, Stream stream) {
  return ResidualRmsNormForward(const_cast<bf16*>(inp), out, rstd, nullptr, nullptr, weight, N, C, eps, weight_offset,
                                stream);
}

// With a and b null, RmsNormForward: `residual` is the input, read only.
int ResidualRmsNormForward(bf16* residual, bf16* out, float* rstd, const bf16* a, const bf16* b, const bf16* weight,
                           int N, int C, float eps, float weight_offset, Stream stream) {
  if (N <= 0) return 0;
  const unsigned blocks = static_cast<unsigned>((N + kNormForwardRows - 1) / kNormForwardRows);
  const bool vector = Vectorizable(out, C) && Vectorizable(residual, C) && Vectorizable(weight, C) &&
                      (a == nullptr || (Vectorizable(a, C) && Vectorizable(b, C)));
  auto launch = [&](auto kernel) {
    LaunchKernel(kernel, blocks, kThreads, 0, AsStream(stream), out, rstd, residual, a, b, weight, N, C, eps,
                 weight_offset);
    return Launched();
  };
  if (vector && C <= kNormRowSlabs * kNormSlab) {
    return WithRowSlabs(C, [&](auto slabs) {
      constexpr int kSlabs = decltype(slabs)::value;
      return a == nullptr ? launch(RmsNormRowsKernel<false, kSlabs>) : launch(RmsNormRowsKernel<true, kSlabs>);
    });
  }
  if (a == nullptr) {
    return vector ? launch(RmsNormForwardKernel<false, true>) : launch(RmsNormForwardKernel<false, false>);
  }
  return vector ? launch(RmsNormForwardKernel<true, true>) : launch(RmsNormForwardKernel<true, false>);
}

int RmsNormBackward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                    const float* rstd, int N, int C, float weight_offset, Stream stream) {
  return LaunchNormBackward(RmsNormGrads{rstd, {dweight}, weight_offset}, dinp, dout, inp, weight, N, C, stream);
}

}  // namespace srunway::trainer::cuda
