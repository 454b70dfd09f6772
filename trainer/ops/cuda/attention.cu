// Causal attention with grouped-query heads, as ops/cpu/attention.cc, keeping each query row's log-sum-exp in
// place of the probabilities: flash_attention.cu's tiled kernels where they apply, else one warp per query row, each lane holding hd / 32 elements of q, the output and
// their gradients; an online softmax walks the keys 0..t once.
#include <cfloat>
#include <type_traits>

#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

struct Shape {
  int B, T, H, KV;
  float scale;  // 1 / sqrt(hd)
  float p, keep_scale;
  uint64_t key;
  int64_t first_index;
  const int32_t* starts;  // [B, T]: each query's first key; null: 0
  const bf16* sinks;      // [H]: each head's sink score; null: none
};

__device__ __forceinline__ int64_t Rows(const Shape& s) { return int64_t{s.B} * s.H * s.T; }

// Query row r = (b H + h) T + t: where its q, k/v heads, and output are.
struct QueryRow {
  int t, h, kv;
  int64_t b;
  int64_t base;    // qkv of sequence b
  int64_t q_at;    // its q head in qkv
  int64_t out_at;  // its head in out
  int64_t row_stride;
};

__device__ __forceinline__ QueryRow Locate(int64_t r, const Shape& s, int hd) {
  QueryRow q;
  q.t = static_cast<int>(r % s.T);
  q.h = static_cast<int>(r / s.T % s.H);
  q.b = r / (int64_t{s.T} * s.H);
  q.kv = q.h / (s.H / s.KV);
  q.row_stride = int64_t{s.H + 2 * s.KV} * hd;
  q.base = q.b * s.T * q.row_stride;
  q.q_at = q.base + q.t * q.row_stride + int64_t{q.h} * hd;
  q.out_at = (q.b * s.T + q.t) * int64_t{s.H} * hd + int64_t{q.h} * hd;
  return q;
}

__device__ __forceinline__ int FirstKey(const QueryRow& q, const Shape& s) {
  return s.starts != nullptr ? s.starts[q.b * s.T + q.t] : 0;
}

template <int kPer>
__global__ void AttentionForwardKernel(bf16* out, float* lse, const bf16* qkv, Shape s) {
  constexpr int hd = kPer * kWarp;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < Rows(s); r += warps) {
    const QueryRow row = Locate(r, s, hd);
    float q[kPer], o[kPer];
    for (int j = 0; j < kPer; ++j) {
      q[j] = Load(qkv, row.q_at + lane + kWarp * j);
      o[j] = 0;
    }
    float max_score = -FLT_MAX, sum = 0;
    for (int t2 = FirstKey(row, s); t2 <= row.t; ++t2) {
      const int64_t k_at = row.base + t2 * row.row_stride + int64_t{s.H + row.kv} * hd;
      const int64_t v_at = k_at + int64_t{s.KV} * hd;
      float dot = 0;
      for (int j = 0; j < kPer; ++j) dot += q[j] * Load(qkv, k_at + lane + kWarp * j);
      const float score = WarpSum(dot) * s.scale;
      const float new_max = fmaxf(max_score, score);
      const float rescale = expf(max_score - new_max), e = expf(score - new_max);
      sum = sum * rescale + e;
      float w = e;
      if (s.p > 0) w = DropoutKeeps(s.key, static_cast<uint64_t>(s.first_index + r * s.T + t2), s.p) ? e * s.keep_scale : 0;
      for (int j = 0; j < kPer; ++j) o[j] = o[j] * rescale + w * Load(qkv, v_at + lane + kWarp * j);
      max_score = new_max;
    }
    const float rescale = s.sinks != nullptr ? FoldSink<false>(Load(s.sinks, row.h), max_score, sum) : 1.0f;
    for (int j = 0; j < kPer; ++j) Store(out, row.out_at + lane + kWarp * j, o[j] * rescale / sum);
    if (lane == 0) lse[r] = max_score + logf(sum);
  }
}

// dq of the row directly; dk and dv, which many rows add to, into fp32 scratch [B, T, KV, hd] each; where D is not
// null, D[r] = dout . out of each row r (for SinkGradients).
template <int kPer>
__global__ void AttentionBackwardKernel(bf16* dqkv, float* dk, float* dv, float* D, const bf16* dout, const bf16* out,
                                        const bf16* qkv, const float* lse, Shape s) {
  constexpr int hd = kPer * kWarp;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < Rows(s); r += warps) {
    const QueryRow row = Locate(r, s, hd);
    float q[kPer], d[kPer], dq[kPer];
    float d_dot_out = 0;  // sum over keys of p * d(att), which is dout . out
    for (int j = 0; j < kPer; ++j) {
      q[j] = Load(qkv, row.q_at + lane + kWarp * j);
      d[j] = Load(dout, row.out_at + lane + kWarp * j);
      dq[j] = 0;
      d_dot_out += d[j] * Load(out, row.out_at + lane + kWarp * j);
    }
    d_dot_out = WarpSum(d_dot_out);
    if (D != nullptr && lane == 0) D[r] = d_dot_out;
    const float row_lse = lse[r];
    for (int t2 = FirstKey(row, s); t2 <= row.t; ++t2) {
      const int64_t k_at = row.base + t2 * row.row_stride + int64_t{s.H + row.kv} * hd;
      const int64_t v_at = k_at + int64_t{s.KV} * hd;
      float qk = 0, vd = 0;
      for (int j = 0; j < kPer; ++j) {
        qk += q[j] * Load(qkv, k_at + lane + kWarp * j);
        vd += Load(qkv, v_at + lane + kWarp * j) * d[j];
      }
      const float prob = expf(WarpSum(qk) * s.scale - row_lse);
      float mask = 1.0f;
      if (s.p > 0) mask = DropoutKeeps(s.key, static_cast<uint64_t>(s.first_index + r * s.T + t2), s.p) ? s.keep_scale : 0;
      const float datt = mask * WarpSum(vd);
      const float dscore = prob * (datt - d_dot_out) * s.scale;
      const int64_t kv_at = ((row.b * s.T + t2) * s.KV + row.kv) * int64_t{hd};
      for (int j = 0; j < kPer; ++j) {
        dq[j] += dscore * Load(qkv, k_at + lane + kWarp * j);
        atomicAdd(&dk[kv_at + lane + kWarp * j], dscore * q[j]);
        atomicAdd(&dv[kv_at + lane + kWarp * j], prob * mask * d[j]);
      }
    }
    for (int j = 0; j < kPer; ++j) {
      Store(dqkv, row.q_at + lane + kWarp * j, dq[j]);
    }
  }
}

// dsinks[h] += the sum over the rows r of head h of d(sink) = p_sink (0 - D[r]), p_sink = exp(sinks[h] - lse[r])
// (D[r] = dout . out: the keys' probabilities times d(att), summed). One block per head, in a fixed order.
__global__ void SinkGradients(float* dsinks, const bf16* sinks, const float* lse, const float* D, int B, int T, int H) {
  __shared__ double warps[kThreads / kWarp];
  const int h = static_cast<int>(blockIdx.x);
  const float sink = Load(sinks, h);
  double sum = 0;
  for (int64_t i = threadIdx.x; i < int64_t{B} * T; i += blockDim.x) {
    const int64_t r = (i / T * H + h) * T + i % T;
    sum -= static_cast<double>(expf(sink - lse[r])) * D[r];
  }
  sum = BlockSum(sum, warps);
  if (threadIdx.x == 0) dsinks[h] += static_cast<float>(sum);
}

// dqkv's k and v parts = the scratch sums.
__global__ void AddKvGradients(bf16* dqkv, const float* dk, const float* dv, int H, int KV, int hd, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t bt = i / (int64_t{KV} * hd), within = i % (int64_t{KV} * hd);
    const int64_t k_at = bt * int64_t{H + 2 * KV} * hd + int64_t{H} * hd + within;
    const int64_t v_at = k_at + int64_t{KV} * hd;
    Store(dqkv, k_at, dk[i]);
    Store(dqkv, v_at, dv[i]);
  }
}

bool Supported(int H, int KV, int hd) {
  return hd > 0 && hd % kWarp == 0 && hd <= 8 * kWarp && KV > 0 && H % KV == 0;
}

Shape MakeShape(int B, int T, int H, int KV, int hd, float p, uint64_t key, int64_t first_index,
                const int32_t* starts, const bf16* sinks = nullptr) {
  return {B,   T,   H, KV, 1.0f / sqrtf(static_cast<float>(hd)), p, p > 0 ? 1.0f / (1.0f - p) : 1.0f,
          key, first_index, starts, sinks};
}

unsigned RowWarpBlocks(int64_t rows) {
  const int64_t blocks = (rows + kThreads / kWarp - 1) / (kThreads / kWarp);
  return static_cast<unsigned>(blocks > 65535 * 16 ? 65535 * 16 : blocks);
}

// Calls launch(std::integral_constant<int, hd / 32>) for the head sizes the kernels are built for.
template <typename Launch>
int ForHeadSize(int hd, Launch launch) {
  switch (hd / kWarp) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 3: launch(std::integral_constant<int, 3>{}); break;
    case 4: launch(std::integral_constant<int, 4>{}); break;
    case 5: launch(std::integral_constant<int, 5>{}); break;
    case 6: launch(std::integral_constant<int, 6>{}); break;
    case 7: launch(std::integral_constant<int, 7>{}); break;
    case 8: launch(std::integral_constant<int, 8>{}); break;
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
  return Launched();
}

}  // namespace

const char* AttentionKernelName(int hd, bool documents) {
  alignas(16) static const char kAligned[16] = {};
  if (FlashAttentionSupported(hd, kAligned, kAligned, kAligned, kAligned)) return FlashAttentionKernelName(documents);
  return Supported(1, 1, hd) ? "one warp per query row" : nullptr;
}

int AttentionForward(bf16* out, float* lse, const bf16* qkv, int B, int T, int H, int KV, int hd, float dropout_p,
                     uint64_t dropout_key, int64_t dropout_first_index, const int32_t* starts, const bf16* sinks,
                     Stream stream) {
  if (FlashAttentionSupported(hd, qkv, out, nullptr, nullptr)) {
    return FlashAttentionForward(out, lse, qkv, B, T, H, KV, hd, dropout_p, dropout_key, dropout_first_index, starts,
                                 sinks, stream);
  }
  if (!Supported(H, KV, hd)) return static_cast<int>(cudaErrorInvalidValue);
  const Shape s = MakeShape(B, T, H, KV, hd, dropout_p, dropout_key, dropout_first_index, starts, sinks);
  const int64_t rows = int64_t{B} * H * T;
  if (rows <= 0) return 0;
  return ForHeadSize(hd, [&](auto per) {
    LaunchKernel(AttentionForwardKernel<decltype(per)::value>, RowWarpBlocks(rows), kThreads, 0, AsStream(stream), out,
                 lse, qkv, s);
  });
}

// The sinks' gradients from the row dots D the backward left at the end of its scratch.
int AddSinkGradients(float* dsinks, const bf16* sinks, const float* lse, const float* D, int B, int T, int H,
                     Stream stream) {
  LaunchKernel(SinkGradients, static_cast<unsigned>(H), kThreads, 0, AsStream(stream), dsinks, sinks, lse, D, B, T, H);
  return Launched();
}

int AttentionBackward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* out, const bf16* qkv, const float* lse,
                      int B, int T, int H, int KV, int hd, float dropout_p, uint64_t dropout_key,
                      int64_t dropout_first_index, const int32_t* starts, const bf16* sinks, float* dsinks,
                      Stream stream) {
  const int64_t rows = int64_t{B} * H * T, kv_elements = int64_t{B} * T * KV * hd;
  float* D = AttentionBackwardRowDots(scratch, B, T, H, KV, hd);  // where both paths leave the rows' dots
  const bool learned = dsinks != nullptr && sinks != nullptr && rows > 0;
  if (FlashAttentionSupported(hd, qkv, out, dout, dqkv)) {
    const int rc = FlashAttentionBackward(dqkv, scratch, dout, out, qkv, lse, B, T, H, KV, hd, dropout_p, dropout_key,
                                          dropout_first_index, starts, stream);
    return rc != 0 || !learned ? rc : AddSinkGradients(dsinks, sinks, lse, D, B, T, H, stream);
  }
  if (!Supported(H, KV, hd)) return static_cast<int>(cudaErrorInvalidValue);
  const Shape s = MakeShape(B, T, H, KV, hd, dropout_p, dropout_key, dropout_first_index, starts);
  if (rows <= 0) return 0;
  float* dk = scratch;
  float* dv = scratch + kv_elements;
  if (cudaError_t rc = cudaMemsetAsync(scratch, 0, sizeof(float) * 2 * static_cast<size_t>(kv_elements),
                                       AsStream(stream));
      rc != cudaSuccess) {
    return static_cast<int>(rc);
  }
  if (int rc = ForHeadSize(hd, [&](auto per) {
        LaunchKernel(AttentionBackwardKernel<decltype(per)::value>, RowWarpBlocks(rows), kThreads, 0,
                     AsStream(stream), dqkv, dk, dv, learned ? D : nullptr, dout, out, qkv, lse, s);
      });
      rc != 0) {
    return rc;
  }
  LaunchKernel(AddKvGradients, Blocks(kv_elements), kThreads, 0, AsStream(stream), dqkv, dk, dv, H, KV, hd,
               kv_elements);
  if (int rc = Launched(); rc != 0 || !learned) return rc;
  return AddSinkGradients(dsinks, sinks, lse, D, B, T, H, stream);
}

}  // namespace srunway::trainer::cuda
