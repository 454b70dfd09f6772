// Causal attention on tensor cores with FlashAttention-2's schedule, the same contract as attention.cu (which
// remains for head sizes this file is not built for, and under SRUNWAY_ATTENTION=simple). FlashAttentionForward
// and FlashAttentionBackward run flash_attention_mma.cu's kernels (mma.sync, the softmax in registers); the WMMA
// kernels below, which stage every tile's scores in shared memory, run under SRUNWAY_ATTENTION=wmma.
//
// Forward: a block takes 64 query rows of one head and walks the key tiles of 64 up to its last query; each of
// its four warps owns 16 rows: S = Q K^T (bf16 WMMA, fp32 accumulation) into shared memory, the online softmax
// by two lanes per row (running max and sum), P in bf16, O += P V, and at the end O / sum and the log-sum-exp.
// Backward: a block takes 64 keys of one head and walks the query tiles from its first key on: S and dP = dO V^T
// per warp's 16 query rows, P and dS = P (dP - D) in bf16 for the whole tile, then dV += P^T dO and
// dK += dS^T Q per warp's 16 keys (kept in registers across the walk) and dQ += dS K (added to fp32 scratch).
// D = rowsum(dO o O) comes from a first pass. Dropout applies the CPU's mask at the CPU's indices to P where it
// meets V (forward) and to dP and P^T (backward); the sums and the log-sum-exp are of the undropped P.
#include <mma.h>

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/cuda/flash_tiles.cuh"

namespace srunway::trainer::cuda {
namespace {

using nvcuda::wmma::accumulator;
using nvcuda::wmma::col_major;
using nvcuda::wmma::fill_fragment;
using nvcuda::wmma::fragment;
using nvcuda::wmma::load_matrix_sync;
using nvcuda::wmma::matrix_a;
using nvcuda::wmma::matrix_b;
using nvcuda::wmma::mem_row_major;
using nvcuda::wmma::mma_sync;
using nvcuda::wmma::row_major;
using nvcuda::wmma::store_matrix_sync;
using namespace flash;  // NOLINT: the shared tiles, shapes and dropout decision

using FragA = fragment<matrix_a, 16, 16, 16, Half, row_major>;
using FragAT = fragment<matrix_a, 16, 16, 16, Half, col_major>;  // a transposed view of a row-major tile
using FragB = fragment<matrix_b, 16, 16, 16, Half, row_major>;
using FragBT = fragment<matrix_b, 16, 16, 16, Half, col_major>;
using FragC = fragment<accumulator, 16, 16, 16, float>;

constexpr int kSLd = kTile + 4;          // fp32 score rows in shared memory (padding against bank conflicts)
constexpr int kPLd = kTile + 8;          // bf16 probability rows
template <int hd> constexpr int kOLd = hd + 4;  // fp32 output rows

// The 16 x 64 product of 16 rows of `a` (row-major, ld kLd) with the transpose of the 64 rows of `b`, into `out`.
template <int hd>
__device__ void RowsTimesTileT(float* out, const Half* a, const Half* b) {
  for (int n = 0; n < kTile / 16; ++n) {
    FragC acc;
    fill_fragment(acc, 0.0f);
    for (int k = 0; k < hd / 16; ++k) {
      FragA fa;
      FragBT fb;
      load_matrix_sync(fa, a + k * 16, kLd<hd>);
      load_matrix_sync(fb, b + n * 16 * kLd<hd> + k * 16, kLd<hd>);
      mma_sync(acc, fa, fb, acc);
    }
    store_matrix_sync(out + n * 16, acc, kSLd, mem_row_major);
  }
}

template <int hd>
constexpr size_t ForwardSharedBytes() {
  return sizeof(Half) * 3 * kTile * kLd<hd> + sizeof(float) * kWarps * 16 * kSLd + sizeof(Half) * kWarps * 16 * kPLd +
         sizeof(float) * kWarps * 16 * kOLd<hd>;
}

template <int hd>
__global__ void __launch_bounds__(kTileThreads) FlashForward(bf16* out, float* lse, const bf16* qkv, Dims d) {
  unsigned char* shared = DynamicShared<unsigned char>();
  Half* q = reinterpret_cast<Half*>(shared);
  Half* k = q + kTile * kLd<hd>;
  Half* v = k + kTile * kLd<hd>;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* s = reinterpret_cast<float*>(v + kTile * kLd<hd>) + warp * 16 * kSLd;
  Half* p = reinterpret_cast<Half*>(reinterpret_cast<float*>(v + kTile * kLd<hd>) + kWarps * 16 * kSLd) +
            warp * 16 * kPLd;
  float* o = reinterpret_cast<float*>(reinterpret_cast<Half*>(reinterpret_cast<float*>(v + kTile * kLd<hd>) +
                                                              kWarps * 16 * kSLd) + kWarps * 16 * kPLd) +
             warp * 16 * kOLd<hd>;

  const int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / d.H), h = static_cast<int>(bh % d.H), kv = h / (d.H / d.KV);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;  // the longest rows first
  const int64_t stride = int64_t{d.H + 2 * d.KV} * hd;
  const Half* base = reinterpret_cast<const Half*>(qkv) + int64_t{b} * d.T * stride;
  CopyTile<hd>(q, base + int64_t{h} * hd, stride, q0, d.T);  // lands with the first keys
  for (int i = lane; i < 16 * kOLd<hd>; i += kWarp) o[i] = 0;

  const int row = lane / 2, half = lane % 2;  // lanes 2r and 2r + 1 hold row r of the warp's 16
  const int query = q0 + warp * 16 + row;
  float max_score = -FLT_MAX, sum = 0;
  const int last_key = min(d.T, q0 + kTile) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += kTile) {
    __syncthreads();  // every warp is done with the last tile's k and v
    CopyTile<hd>(k, base + int64_t{d.H + kv} * hd, stride, k0, d.T);
    CopyTile<hd>(v, base + int64_t{d.H + d.KV + kv} * hd, stride, k0, d.T);
    LandCopies();
    __syncthreads();
    RowsTimesTileT<hd>(s, q + warp * 16 * kLd<hd>, k);
    __syncwarp();
    float scores[kTile / 2];
    float tile_max = -FLT_MAX;
    for (int j = 0; j < kTile / 2; ++j) {
      const int c = half * (kTile / 2) + j, key = k0 + c;
      scores[j] = key <= query && key < d.T ? s[row * kSLd + c] * d.scale : -FLT_MAX;
      tile_max = fmaxf(tile_max, scores[j]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float new_max = fmaxf(max_score, tile_max);
    const float rescale = expf(max_score - new_max);
    float tile_sum = 0;
    for (int j = 0; j < kTile / 2; ++j) {
      const int c = half * (kTile / 2) + j;
      float e = scores[j] == -FLT_MAX ? 0.0f : expf(scores[j] - new_max);
      tile_sum += e;
      if (d.p > 0 && e != 0) e = Keeps(d, bh, query, k0 + c) ? e * d.keep_scale : 0.0f;
      p[row * kPLd + c] = __float2bfloat16(e);
    }
    sum = sum * rescale + tile_sum + __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    max_score = new_max;
    for (int c = half * (hd / 2); c < (half + 1) * (hd / 2); ++c) o[row * kOLd<hd> + c] *= rescale;
    __syncwarp();
    for (int n = 0; n < hd / 16; ++n) {  // O += P V
      FragC acc;
      load_matrix_sync(acc, o + n * 16, kOLd<hd>, mem_row_major);
      for (int j = 0; j < kTile / 16; ++j) {
        FragA fp;
        FragB fv;
        load_matrix_sync(fp, p + j * 16, kPLd);
        load_matrix_sync(fv, v + j * 16 * kLd<hd> + n * 16, kLd<hd>);
        mma_sync(acc, fp, fv, acc);
      }
      store_matrix_sync(o + n * 16, acc, kOLd<hd>, mem_row_major);
    }
    __syncwarp();
  }
  if (query < d.T) {
    Half* dst = reinterpret_cast<Half*>(out) + (int64_t{b} * d.T + query) * d.H * hd + int64_t{h} * hd;
    const float rescale = d.sinks != nullptr ? FoldSink<false>(Load(d.sinks, h), max_score, sum) : 1.0f;
    const float inverse = rescale / sum;
    for (int c = half * (hd / 2); c < (half + 1) * (hd / 2); ++c) {
      dst[c] = __float2bfloat16(o[row * kOLd<hd> + c] * inverse);
    }
    if (half == 0) lse[bh * d.T + query] = max_score + logf(sum);
  }
}

// D[r] = dout_r . out_r for each query row r = (b H + h) T + t, one warp per row.
__global__ void RowDots(float* D, const bf16* dout, const bf16* out, int B, int T, int H, int hd) {
  const int lane = threadIdx.x % kWarp;
  const int64_t rows = int64_t{B} * H * T, warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < rows; r += warps) {
    const int64_t t = r % T, h = r / T % H, b = r / (int64_t{T} * H);
    const int64_t at = (b * T + t) * H * hd + h * hd;
    float dot = 0;
    for (int c = lane; c < hd; c += kWarp) dot += Load(dout, at + c) * Load(out, at + c);
    dot = WarpSum(dot);
    if (lane == 0) D[r] = dot;
  }
}

template <int hd>
constexpr size_t BackwardSharedBytes() {
  return sizeof(Half) * 4 * kTile * kLd<hd> + sizeof(float) * kWarps * 2 * 16 * kSLd + sizeof(Half) * 2 * kTile * kPLd;
}

// Adds a warp's 16 x hd accumulators (in `stage`, ld kOLd) times `scale` to rows of an fp32 [rows][ld] array.
template <int hd>
__device__ void AddRows(float* dst, int64_t row_stride, const float* stage, int first, int T, float scale) {
  const int lane = threadIdx.x % kWarp;
  for (int i = lane; i < 16 * hd; i += kWarp) {
    const int r = i / hd, c = i % hd;
    if (first + r < T) atomicAdd(dst + (first + r) * row_stride + c, stage[r * kOLd<hd> + c] * scale);
  }
}

template <int hd>
__global__ void __launch_bounds__(kTileThreads)
    FlashBackward(float* dq, float* dk, float* dv, const bf16* dout, const bf16* qkv, const float* lse, const float* D,
                  Dims d) {
  static_assert(16 * kOLd<hd> <= 2 * 16 * kSLd, "a warp's accumulators are staged in its score rows");
  unsigned char* shared = DynamicShared<unsigned char>();
  Half* k = reinterpret_cast<Half*>(shared);
  Half* v = k + kTile * kLd<hd>;
  Half* q = v + kTile * kLd<hd>;
  Half* g = q + kTile * kLd<hd>;  // dout
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* s = reinterpret_cast<float*>(g + kTile * kLd<hd>) + warp * 2 * 16 * kSLd;
  float* dp = s + 16 * kSLd;
  Half* pm = reinterpret_cast<Half*>(reinterpret_cast<float*>(g + kTile * kLd<hd>) + kWarps * 2 * 16 * kSLd);
  Half* ds = pm + kTile * kPLd;

  const int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / d.H), h = static_cast<int>(bh % d.H), kv = h / (d.H / d.KV);
  const int k0 = blockIdx.y * kTile;
  const int64_t stride = int64_t{d.H + 2 * d.KV} * hd, out_stride = int64_t{d.H} * hd;
  const Half* base = reinterpret_cast<const Half*>(qkv) + int64_t{b} * d.T * stride;
  const Half* dout_base = reinterpret_cast<const Half*>(dout) + int64_t{b} * d.T * out_stride + int64_t{h} * hd;
  CopyTile<hd>(k, base + int64_t{d.H + kv} * hd, stride, k0, d.T);  // land with the first queries
  CopyTile<hd>(v, base + int64_t{d.H + d.KV + kv} * hd, stride, k0, d.T);
  FragC dk_acc[hd / 16], dv_acc[hd / 16];
  for (int n = 0; n < hd / 16; ++n) {
    fill_fragment(dk_acc[n], 0.0f);
    fill_fragment(dv_acc[n], 0.0f);
  }
  const int row = lane / 2, half = lane % 2;
  for (int q0 = k0; q0 < d.T; q0 += kTile) {
    __syncthreads();  // every warp is done with the last tile's q, dout, P and dS
    CopyTile<hd>(q, base + int64_t{h} * hd, stride, q0, d.T);
    CopyTile<hd>(g, dout_base, out_stride, q0, d.T);
    LandCopies();
    __syncthreads();
    RowsTimesTileT<hd>(s, q + warp * 16 * kLd<hd>, k);   // S for the warp's 16 queries
    RowsTimesTileT<hd>(dp, g + warp * 16 * kLd<hd>, v);  // dP = dO V^T
    __syncwarp();
    const int query = q0 + warp * 16 + row;
    const bool valid = query < d.T;
    const float row_lse = valid ? lse[bh * d.T + query] : 0.0f, row_d = valid ? D[bh * d.T + query] : 0.0f;
    for (int j = 0; j < kTile / 2; ++j) {
      const int c = half * (kTile / 2) + j, key = k0 + c;
      const float prob = valid && key <= query && key < d.T ? expf(s[row * kSLd + c] * d.scale - row_lse) : 0.0f;
      float mask = 1.0f;
      if (d.p > 0 && prob != 0) mask = Keeps(d, bh, query, key) ? d.keep_scale : 0.0f;
      pm[(warp * 16 + row) * kPLd + c] = __float2bfloat16(prob * mask);
      ds[(warp * 16 + row) * kPLd + c] = __float2bfloat16(prob * (dp[row * kSLd + c] * mask - row_d));
    }
    __syncthreads();
    for (int n = 0; n < hd / 16; ++n) {  // the warp's 16 keys: dV += (P o M)^T dO, dK += dS^T Q
      for (int j = 0; j < kTile / 16; ++j) {
        FragAT fa;
        FragB fb;
        load_matrix_sync(fa, pm + j * 16 * kPLd + warp * 16, kPLd);
        load_matrix_sync(fb, g + j * 16 * kLd<hd> + n * 16, kLd<hd>);
        mma_sync(dv_acc[n], fa, fb, dv_acc[n]);
        load_matrix_sync(fa, ds + j * 16 * kPLd + warp * 16, kPLd);
        load_matrix_sync(fb, q + j * 16 * kLd<hd> + n * 16, kLd<hd>);
        mma_sync(dk_acc[n], fa, fb, dk_acc[n]);
      }
    }
    for (int n = 0; n < hd / 16; ++n) {  // the warp's 16 queries: dQ += dS K, staged over its score rows
      FragC acc;
      fill_fragment(acc, 0.0f);
      for (int j = 0; j < kTile / 16; ++j) {
        FragA fa;
        FragB fb;
        load_matrix_sync(fa, ds + warp * 16 * kPLd + j * 16, kPLd);
        load_matrix_sync(fb, k + j * 16 * kLd<hd> + n * 16, kLd<hd>);
        mma_sync(acc, fa, fb, acc);
      }
      store_matrix_sync(s + n * 16, acc, kOLd<hd>, mem_row_major);
    }
    __syncwarp();
    AddRows<hd>(dq + (int64_t{b} * d.T * d.H + h) * hd, int64_t{d.H} * hd, s, q0 + warp * 16, d.T, d.scale);
    __syncwarp();
  }
  // The block's keys: several query heads share a k/v head, so they add into fp32 [B, T, KV, hd].
  const int64_t kv_stride = int64_t{d.KV} * hd;
  float* dk_rows = dk + (int64_t{b} * d.T * d.KV + kv) * hd;
  float* dv_rows = dv + (int64_t{b} * d.T * d.KV + kv) * hd;
  for (int n = 0; n < hd / 16; ++n) store_matrix_sync(s + n * 16, dk_acc[n], kOLd<hd>, mem_row_major);
  __syncwarp();
  AddRows<hd>(dk_rows, kv_stride, s, k0 + warp * 16, d.T, d.scale);
  __syncwarp();
  for (int n = 0; n < hd / 16; ++n) store_matrix_sync(s + n * 16, dv_acc[n], kOLd<hd>, mem_row_major);
  __syncwarp();
  AddRows<hd>(dv_rows, kv_stride, s, k0 + warp * 16, d.T, 1.0f);
}

// dqkv = the fp32 sums (q [B, T, H, hd], k and v [B, T, KV, hd]) of each token's first `summed_heads` heads (H:
// q only, or H + 2 KV: all), 8 columns per thread: hd is a multiple of 8, so no 8 straddle q, k and v. Two
// 16-byte loads and a 16-byte store, where one column per thread took 8 of each and a 64-bit division per column
// (4.2% of GPT-2's step on the H200 that way).
__global__ void StoreQkvGradients(bf16* dqkv, const float* dq, const float* dk, const float* dv, int H, int KV, int hd,
                                  int summed_heads, int64_t tokens) {
  const int chunks = summed_heads * hd / 8, row_chunks = (H + 2 * KV) * hd / 8;  // per token
  const int64_t n = tokens * chunks;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t token = i / chunks;
    const int c = static_cast<int>(i - token * chunks) * 8;
    const float* src = c < H * hd          ? dq + token * H * hd + c
                       : c < (H + KV) * hd ? dk + token * KV * hd + (c - H * hd)
                                           : dv + token * KV * hd + (c - (H + KV) * hd);
    const float4 low = *reinterpret_cast<const float4*>(src), high = *reinterpret_cast<const float4*>(src + 4);
    *reinterpret_cast<uint4*>(reinterpret_cast<Half*>(dqkv) + token * row_chunks * 8 + c) =
        make_uint4(Pack(low.x, low.y), Pack(low.z, low.w), Pack(high.x, high.y), Pack(high.z, high.w));
  }
}

bool Aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

// The mma.sync kernels run a call unless SRUNWAY_ATTENTION=wmma; the WMMA ones take no documents.
bool OnMma(bool documents) { return !AttentionIs("wmma") || documents; }

}  // namespace

bool AttentionIs(const char* name) {
  static const char* const choice = [] {
    const char* value = std::getenv("SRUNWAY_ATTENTION");
    return value == nullptr ? "" : value;
  }();
  return std::strcmp(choice, name) == 0;
}

bool FlashAttentionSupported(int hd, const void* qkv, const void* out, const void* dout, const void* dqkv) {
  const bool tiled = ForTiledHeadSize(hd, [](auto) { return 0; }) == 0;  // the sizes the kernels are built for
  return !AttentionIs("simple") && tiled && Aligned(qkv) && Aligned(out) && (dout == nullptr || Aligned(dout)) &&
         (dqkv == nullptr || Aligned(dqkv));
}

const char* FlashAttentionKernelName(bool documents) {
  return OnMma(documents) ? "mma.sync tiles" : "WMMA tiles";
}

int64_t AttentionBackwardScratch(int B, int T, int H, int KV, int hd) {
  return int64_t{B} * T * (H + 2 * KV) * hd + int64_t{B} * H * T;
}

float* AttentionBackwardRowDots(float* scratch, int B, int T, int H, int KV, int hd) {
  return scratch + int64_t{B} * T * (H + 2 * KV) * hd;
}

int FlashAttentionForward(bf16* out, float* lse, const bf16* qkv, int B, int T, int H, int KV, int hd,
                          float dropout_p, uint64_t dropout_key, int64_t dropout_first_index, const int32_t* starts,
                          const bf16* sinks, Stream stream) {
  if (KV <= 0 || H % KV != 0) return static_cast<int>(cudaErrorInvalidValue);
  if (int64_t{B} * H * T == 0) return 0;
  const Dims d = MakeDims(B, T, H, KV, hd, dropout_p, dropout_key, dropout_first_index, starts, sinks);
  if (OnMma(starts != nullptr)) return MmaForward(out, lse, qkv, d, hd, AsStream(stream));
  const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((T + kTile - 1) / kTile));
  return ForTiledHeadSize(hd, [&](auto size) {
    constexpr int kHd = decltype(size)::value;
    constexpr size_t bytes = ForwardSharedBytes<kHd>();
    if (int rc = AllowSharedMemory(FlashForward<kHd>, bytes); rc != 0) return rc;
    LaunchKernel(FlashForward<kHd>, grid, kTileThreads, bytes, AsStream(stream), out, lse, qkv, d);
    return Launched();
  });
}

int FlashAttentionBackward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* out, const bf16* qkv,
                           const float* lse, int B, int T, int H, int KV, int hd, float dropout_p, uint64_t dropout_key,
                           int64_t dropout_first_index, const int32_t* starts, Stream stream) {
  if (KV <= 0 || H % KV != 0) return static_cast<int>(cudaErrorInvalidValue);
  const int64_t tokens = int64_t{B} * T;
  if (tokens * H == 0) return 0;
  const Dims d = MakeDims(B, T, H, KV, hd, dropout_p, dropout_key, dropout_first_index, starts);
  float* dq = scratch;
  float* dk = dq + tokens * H * hd;
  float* dv = dk + tokens * KV * hd;
  float* D = AttentionBackwardRowDots(scratch, B, T, H, KV, hd);
  // With a k/v head per query head the mma.sync kernel's blocks each own their keys and store dK and dV in dqkv
  // themselves: only dQ, which every block of a head adds to, goes through the fp32 sums (a third of the zeroing
  // and of the final store).
  const bool own_keys = KV == H && OnMma(starts != nullptr);
  const int summed_heads = own_keys ? H : H + 2 * KV;
  if (cudaError_t rc = cudaMemsetAsync(scratch, 0, sizeof(float) * static_cast<size_t>(tokens * summed_heads * hd),
                                       AsStream(stream));
      rc != cudaSuccess) {
    return static_cast<int>(rc);
  }
  const int64_t rows = tokens * H;
  LaunchKernel(RowDots,
               static_cast<unsigned>(std::min<int64_t>((rows + kThreads / kWarp - 1) / (kThreads / kWarp), 65535 * 16)),
               kThreads, 0, AsStream(stream), D, dout, out, B, T, H, hd);
  if (int rc = Launched(); rc != 0) return rc;
  const dim3 grid(static_cast<unsigned>(B * H), static_cast<unsigned>((T + kTile - 1) / kTile));
  if (OnMma(starts != nullptr)) {
    if (int rc = MmaBackward(dq, dk, dv, own_keys ? dqkv : nullptr, dout, qkv, lse, D, d, hd, AsStream(stream));
        rc != 0) {
      return rc;
    }
  } else if (int rc = ForTiledHeadSize(hd, [&](auto size) {
        constexpr int kHd = decltype(size)::value;
        constexpr size_t bytes = BackwardSharedBytes<kHd>();
        if (int allowed = AllowSharedMemory(FlashBackward<kHd>, bytes); allowed != 0) return allowed;
        LaunchKernel(FlashBackward<kHd>, grid, kTileThreads, bytes, AsStream(stream), dq, dk, dv, dout, qkv, lse, D, d);
        return Launched();
      });
      rc != 0) {
    return rc;
  }
  LaunchKernel(StoreQkvGradients, Blocks(tokens * summed_heads * hd / 8), kThreads, 0, AsStream(stream), dqkv, dq, dk,
               dv, H, KV, hd, summed_heads, tokens);
  return Launched();
}

}  // namespace srunway::trainer::cuda
