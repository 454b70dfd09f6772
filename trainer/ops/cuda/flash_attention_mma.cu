// Causal attention with FlashAttention-2's schedule on mma.sync (m16n8k16: bf16 products, fp32 accumulation),
// the softmax done in registers: the default kernels behind flash_attention.cu's FlashAttentionForward/Backward
// (the same contract as attention.cu). The tiles are flash_tiles.cuh's: 64 rows per block, four warps of 16.
//
// Fragments of mma.m16n8k16 (PTX ISA), lane = 4 g + t:
//   A, 16 x 16:  a[0] = A[g][2t, 2t+1]  a[1] = A[g+8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B, 16 x 8:   b[0] = B[2t, 2t+1][g]  b[1] = B[2t+8, 2t+9][g]
//   C, 16 x 8:   c[0], c[1] = C[g][2t], C[g][2t+1]    c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
// (two bf16 per 32-bit register, the lower column in the low half). The C fragments of two adjacent 8-column
// tiles, packed to bf16, are the A fragment of the 16 x 16 block they form, so probabilities go from one product
// into the next without leaving registers.
//
// Forward: a block takes 64 queries of one head and walks the key tiles up to its last query. Each warp keeps its
// 16 rows' Q fragments, computes S = Q K^T for the tile, the online softmax in base 2 (each row spread over the
// four lanes of a quad: running max and sum, exchanged by shuffles), and O += P V with O in registers; at the end
// O / sum and the log-sum-exp (natural log, as attention.cu's).
// Backward: a block takes 64 keys of one head and walks the query tiles from its first key on. Each warp owns 16
// keys: S^T = K Q^T and dP^T = V dO^T, P^T from the saved log-sum-exp, dS^T = P^T o (M o dP^T - D); dV += (P o
// M)^T dO and dK += dS^T Q stay in registers across the walk; dS^T goes through shared memory so that each warp
// can add its 16 queries' dQ += dS K to the fp32 scratch. Dropout (M) as flash_attention.cu's. With documents
// (Dims::starts; kernels of their own, kDocuments, so that those without keep their registers), a forward block's
// walk starts at the key tile of its first query's document, a query's scores before its document's start are
// masked as those after it are, a backward lane's keys are seen by the queries before their documents' ends only,
// and a backward block's walk stops at the first query tile that begins after its keys' documents have ended.
// The tiles the walks read come by cp.async into two stages of shared memory: the next tile's copies are issued
// as soon as the barrier at the top of a step says every warp is done with its stage, and land while the block
// works on this one (one barrier less per step than loading in place, and no load waited for in turn).
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "trainer/ops/cuda/common.cuh"
#include "trainer/ops/cuda/flash_tiles.cuh"

namespace srunway::trainer::cuda::flash {
namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kDsLd = kTile + 8;  // bf16 dS^T rows [key][query] in shared memory

// A (16 x 16) = columns [c0, c0 + 16) of 16 rows of a row-major shared tile, by one ldmatrix: matrices 0-3 are
// rows 0-7 and 8-15 of columns c0.. and then of c0 + 8...
__device__ __forceinline__ void LoadA(uint32_t (&a)[4], const Half* rows, int ld, int c0, int lane) {
  const int matrix = lane / 8, r = lane % 8;
  LoadMatrices(a, rows + (matrix % 2 * 8 + r) * ld + c0 + matrix / 2 * 8);
}

// A (16 x 16) = M^T at rows [m0, m0 + 16), columns [k0, k0 + 16), for M row-major in shared memory (its rows
// are A's columns).
__device__ __forceinline__ void LoadATransposed(uint32_t (&a)[4], const Half* m, int ld, int m0, int k0, int lane) {
  const int matrix = lane / 8, r = lane % 8;
  LoadTransposed(a, m + (k0 + matrix / 2 * 8 + r) * ld + m0 + matrix % 2 * 8);
}

// B for the two 8-column tiles of M^T [c0, c0 + 16) x [n0, n0 + 16), B[k][n] = M[n0 + n][c0 + k], M row-major in
// shared memory, by one ldmatrix: b[0], b[1] for columns n0.. (M's rows n0..n0 + 7), b[2], b[3] for n0 + 8...
__device__ __forceinline__ void LoadB2Transposed(uint32_t (&b)[4], const Half* m, int ld, int c0, int n0, int lane) {
  const int matrix = lane / 8, r = lane % 8;
  LoadMatrices(b, m + (n0 + matrix / 2 * 8 + r) * ld + c0 + matrix % 2 * 8);
}

// B for the two 8-column tiles of M [k0, k0 + 16) x [n0, n0 + 16), M row-major in shared memory: b[0], b[1] for
// columns n0.., b[2], b[3] for n0 + 8...
__device__ __forceinline__ void LoadB2(uint32_t (&b)[4], const Half* m, int ld, int k0, int n0, int lane) {
  const int matrix = lane / 8, r = lane % 8;
  LoadTransposed(b, m + (k0 + matrix % 2 * 8 + r) * ld + n0 + matrix / 2 * 8);
}

// acc (16 x hd, hd / 8 C fragments) += a (16 x 16) times rows [k0, k0 + 16) of a tile (row-major, ld kLd) in
// shared memory: O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K.
template <int hd>
__device__ __forceinline__ void MmaTileRows(float (&acc)[hd / 8][4], const uint32_t (&a)[4], const Half* tile, int k0,
                                            int lane) {
  #pragma unroll
  for (int n = 0; n < hd / 16; ++n) {
    uint32_t b[4];
    LoadB2(b, tile, kLd<hd>, k0, n * 16, lane);
    Mma(acc[2 * n], a, b[0], b[1]);
    Mma(acc[2 * n + 1], a, b[2], b[3]);
  }
}

// The A fragment of the 16 x 16 block made of C fragments c[2i] and c[2i + 1] (each 16 x 8), in bf16.
template <int kTiles>
__device__ __forceinline__ void PackA(uint32_t (&a)[4], const float (&c)[kTiles][4], int i) {
  a[0] = Pack(c[2 * i][0], c[2 * i][1]);
  a[1] = Pack(c[2 * i][2], c[2 * i][3]);
  a[2] = Pack(c[2 * i + 1][0], c[2 * i + 1][1]);
  a[3] = Pack(c[2 * i + 1][2], c[2 * i + 1][3]);
}

// The maximum (or sum) of x over the four lanes of a quad.
__device__ __forceinline__ float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Q, and K and V twice: the tile in use and the next, on its way.
template <int hd>
constexpr size_t ForwardShared() {
  return sizeof(Half) * 5 * kTile * kLd<hd>;
}

// The end of the document that holds `key` in a sequence whose documents start at starts[0, T): the first
// position whose document starts after it (starts do not decrease; starts[key] <= key), T if none.
__device__ __forceinline__ int DocumentEnd(const int32_t* starts, int key, int T) {
  int low = key + 1, high = T;
  while (low < high) {
    const int middle = (low + high) / 2;
    if (starts[middle] > key) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  return low;
}

template <int hd, bool kDocuments>
__global__ void __launch_bounds__(kTileThreads) ForwardKernel(bf16* out, float* lse, const bf16* qkv, Dims d) {
  unsigned char* shared = DynamicShared<unsigned char>();
  Half* q = reinterpret_cast<Half*>(shared);
  Half* key_tiles = q + kTile * kLd<hd>;  // stage s: K at key_tiles + 2 s kTile kLd, V after it
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / d.H), h = static_cast<int>(bh % d.H), kv = h / (d.H / d.KV);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kTile;  // the longest rows first
  const int64_t stride = int64_t{d.H + 2 * d.KV} * hd;
  const Half* base = reinterpret_cast<const Half*>(qkv) + int64_t{b} * d.T * stride;
  const int last_key = min(d.T, q0 + kTile) - 1;
  // Starts do not decrease along a sequence: no row of the block sees a key before its first row's document.
  const int first_key = kDocuments ? d.starts[int64_t{b} * d.T + q0] / kTile * kTile : 0;
  auto copy_keys = [&](int stage, int k0) {  // K and V of keys [k0, k0 + kTile), one commit group
    Half* k = key_tiles + 2 * stage * kTile * kLd<hd>;
    CopyTile<hd>(k, base + int64_t{d.H + kv} * hd, stride, k0, d.T);
    CopyTile<hd>(k + kTile * kLd<hd>, base + int64_t{d.H + d.KV + kv} * hd, stride, k0, d.T);
    CommitCopies();
  };
  CopyTile<hd>(q, base + int64_t{h} * hd, stride, q0, d.T);
  CommitCopies();
  copy_keys(0, first_key);
  WaitCopies<1>();  // the queries; the first keys may still be on their way
  __syncthreads();
  uint32_t qa[hd / 16][4];
  #pragma unroll
  for (int c = 0; c < hd / 16; ++c) LoadA(qa[c], q + warp * 16 * kLd<hd>, kLd<hd>, c * 16, lane);

  const int rows[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};  // the two query rows this lane holds
  int row_starts[2] = {0, 0};                                         // and the first key each of them sees
  if constexpr (kDocuments) {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (rows[r] < d.T) row_starts[r] = d.starts[int64_t{b} * d.T + rows[r]];
    }
  }
  const float scale = d.scale * kLog2e;  // scores in base 2
  float o[hd / 8][4] = {};
  float max_score[2] = {-INFINITY, -INFINITY}, sum[2] = {0.0f, 0.0f};  // sum: this lane's part of the row
  for (int k0 = first_key, stage = 0; k0 <= last_key; k0 += kTile, stage ^= 1) {
    WaitCopies<0>();  // this thread's copies of the tile
    __syncthreads();  // everyone's; and every warp is done with the other stage, which the next tile fills
    if (k0 + kTile <= last_key) copy_keys(stage ^ 1, k0 + kTile);
    const Half* k = key_tiles + 2 * stage * kTile * kLd<hd>;
    const Half* v = k + kTile * kLd<hd>;
    float s[kTile / 8][4] = {};
    #pragma unroll
    for (int c = 0; c < hd / 16; ++c) {
      #pragma unroll
      for (int j = 0; j < kTile / 8; j += 2) {
        uint32_t b[4];
        LoadB2Transposed(b, k, kLd<hd>, c * 16, j * 8, lane);
        Mma(s[j], qa[c], b[0], b[1]);
        Mma(s[j + 1], qa[c], b[2], b[3]);
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
    #pragma unroll
    for (int j = 0; j < kTile / 8; ++j) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + j * 8 + 2 * t + e % 2;
        const bool seen = key <= rows[e / 2] && key < d.T && (!kDocuments || key >= row_starts[e / 2]);
        s[j][e] = seen ? s[j][e] * scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
      }
    }
    float rescale[2], offset[2];
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float new_max = fmaxf(max_score[r], QuadMax(tile_max[r]));
      offset[r] = new_max == -INFINITY ? 0.0f : new_max;
      rescale[r] = exp2f(max_score[r] - offset[r]);
      max_score[r] = new_max;
      sum[r] *= rescale[r];
    }
    #pragma unroll
    for (int j = 0; j < kTile / 8; ++j) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        float p = exp2f(s[j][e] - offset[e / 2]);
        sum[e / 2] += p;
        if (d.p > 0 && p != 0.0f) p = Keeps(d, bh, rows[e / 2], k0 + j * 8 + 2 * t + e % 2) ? p * d.keep_scale : 0.0f;
        s[j][e] = p;
      }
    }
    #pragma unroll
    for (int n = 0; n < hd / 8; ++n) {
      o[n][0] *= rescale[0];
      o[n][1] *= rescale[0];
      o[n][2] *= rescale[1];
      o[n][3] *= rescale[1];
    }
    #pragma unroll
    for (int c = 0; c < kTile / 16; ++c) {  // O += P V over the tile's keys [16 c, 16 c + 16)
      uint32_t pa[4];
      PackA(pa, s, c);
      MmaTileRows<hd>(o, pa, v, c * 16, lane);
    }
  }
  const float sink = d.sinks != nullptr ? Load(d.sinks, h) * kLog2e : 0.0f;
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    float total = QuadSum(sum[r]);
    if (rows[r] >= d.T) continue;
    const float rescale = d.sinks != nullptr ? FoldSink<true>(sink, max_score[r], total) : 1.0f;
    const float inverse = rescale / total;
    Half* dst = reinterpret_cast<Half*>(out) + (int64_t{b} * d.T + rows[r]) * d.H * hd + int64_t{h} * hd;
    #pragma unroll
    for (int n = 0; n < hd / 8; ++n) {
      *reinterpret_cast<uint32_t*>(dst + n * 8 + 2 * t) = Pack(o[n][2 * r] * inverse, o[n][2 * r + 1] * inverse);
    }
    if (t == 0) lse[bh * d.T + rows[r]] = (max_score[r] + log2f(total)) / kLog2e;
  }
}

// K, V, dS^T, and twice the query tiles (Q, dO and the queries' log-sum-exp and D): the tile in use and the
// next, on its way.
template <int hd>
constexpr size_t BackwardShared() {
  return sizeof(Half) * (6 * kTile * kLd<hd> + kTile * kDsLd) + sizeof(float) * 4 * kTile;
}
// Two blocks, as many as the registers allow, fit in a multiprocessor's 228 KiB (1 KiB reserved for each).
static_assert(2 * (BackwardShared<128>() + 1024) <= 228 * 1024, "two backward blocks per multiprocessor");

// kOwnKeys (one k/v head per query head): the block is the only one to sum its keys' dK and dV, which it stores
// into dqkv's k and v columns in bf16 itself; otherwise it adds them into the fp32 sums dk and dv.
template <int hd, bool kOwnKeys, bool kDocuments>
__global__ void __launch_bounds__(kTileThreads)
    BackwardKernel(float* dq, float* dk, float* dv, bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                   const float* D, Dims d) {
  static_assert(kTileThreads == 2 * kTile, "a thread copies one query's log-sum-exp or D");
  unsigned char* shared = DynamicShared<unsigned char>();
  Half* k = reinterpret_cast<Half*>(shared);
  Half* v = k + kTile * kLd<hd>;
  Half* query_tiles = v + kTile * kLd<hd>;       // stage s: Q at query_tiles + 2 s kTile kLd, dO after it
  Half* ds = query_tiles + 4 * kTile * kLd<hd>;  // dS^T [key][query]
  float* stats = reinterpret_cast<float*>(ds + kTile * kDsLd);  // stage s: log-sum-exp at stats + 2 s kTile, D after
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
  const int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / d.H), h = static_cast<int>(bh % d.H), kv = h / (d.H / d.KV);
  const int k0 = blockIdx.y * kTile;  // the longest walks first
  const int64_t stride = int64_t{d.H + 2 * d.KV} * hd, out_stride = int64_t{d.H} * hd;
  const Half* base = reinterpret_cast<const Half*>(qkv) + int64_t{b} * d.T * stride;
  const Half* dout_base = reinterpret_cast<const Half*>(dout) + int64_t{b} * d.T * out_stride + int64_t{h} * hd;
  auto copy_queries = [&](int stage, int q0) {  // Q, dO, log-sum-exp and D of queries [q0, q0 + kTile)
    Half* q = query_tiles + 2 * stage * kTile * kLd<hd>;
    CopyTile<hd>(q, base + int64_t{h} * hd, stride, q0, d.T);
    CopyTile<hd>(q + kTile * kLd<hd>, dout_base, out_stride, q0, d.T);
    const int i = static_cast<int>(threadIdx.x) % kTile;
    const bool valid = q0 + i < d.T;
    CopyAsync<4>(stats + 2 * stage * kTile + threadIdx.x,
                 (threadIdx.x < kTile ? lse : D) + bh * d.T + (valid ? q0 + i : 0), valid);
    CommitCopies();
  };
  CopyTile<hd>(k, base + int64_t{d.H + kv} * hd, stride, k0, d.T);  // in the first query tile's commit group
  CopyTile<hd>(v, base + int64_t{d.H + d.KV + kv} * hd, stride, k0, d.T);
  copy_queries(0, k0);
  const Half* my_k = k + warp * 16 * kLd<hd>;
  const Half* my_v = v + warp * 16 * kLd<hd>;
  Half* my_ds = ds + warp * 16 * kDsLd;
  const int keys[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};  // the two key rows this lane holds
  const float scale = d.scale * kLog2e;
  float dk_acc[hd / 8][4] = {}, dv_acc[hd / 8][4] = {};
  const int32_t* starts = kDocuments ? d.starts + int64_t{b} * d.T : nullptr;
  // The queries that see this lane's two keys end where the keys' documents do; the query tiles that see any of
  // the block's keys, up to the first whose first query's document starts after them (the keys' own tile does).
  int key_ends[2] = {d.T, d.T};
  if constexpr (kDocuments) {
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (keys[r] < d.T) key_ends[r] = DocumentEnd(starts, keys[r], d.T);
    }
  }
  auto sees_keys = [&](int q0) { return q0 < d.T && (!kDocuments || starts[q0] < k0 + kTile); };
  for (int q0 = k0, stage = 0; sees_keys(q0); q0 += kTile, stage ^= 1) {
    WaitCopies<0>();  // this thread's copies of the tile
    __syncthreads();  // everyone's; and every warp is done with the other stage, which the next tile fills, and dS^T
    if (sees_keys(q0 + kTile)) copy_queries(stage ^ 1, q0 + kTile);
    const Half* q = query_tiles + 2 * stage * kTile * kLd<hd>;
    const Half* go = q + kTile * kLd<hd>;               // dO
    const float* tile_lse = stats + 2 * stage * kTile;  // natural log
    const float* tile_d = tile_lse + kTile;
    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys and the tile's 64 queries.
    float st[kTile / 8][4] = {}, dpt[kTile / 8][4] = {};
    #pragma unroll
    for (int c = 0; c < hd / 16; ++c) {
      uint32_t ka[4], va[4];
      LoadA(ka, my_k, kLd<hd>, c * 16, lane);
      LoadA(va, my_v, kLd<hd>, c * 16, lane);
#pragma unroll
      for (int j = 0; j < kTile / 8; j += 2) {
        uint32_t b[4];
        LoadB2Transposed(b, q, kLd<hd>, c * 16, j * 8, lane);
        Mma(st[j], ka, b[0], b[1]);
        Mma(st[j + 1], ka, b[2], b[3]);
        LoadB2Transposed(b, go, kLd<hd>, c * 16, j * 8, lane);
        Mma(dpt[j], va, b[0], b[1]);
        Mma(dpt[j + 1], va, b[2], b[3]);
      }
    }
    // P^T o M in st; dS^T = P^T o (M o dP^T - D), in bf16, to shared memory.
    #pragma unroll
    for (int j = 0; j < kTile / 8; ++j) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = j * 8 + 2 * t + e % 2, query = q0 + i, key = keys[e / 2];
        const bool seen = query >= key && query < d.T && key < d.T && (!kDocuments || query < key_ends[e / 2]);
        const float p = seen ? exp2f(st[j][e] * scale - tile_lse[i] * kLog2e) : 0.0f;
        float mask = 1.0f;
        if (d.p > 0 && p != 0.0f) mask = Keeps(d, bh, query, key) ? d.keep_scale : 0.0f;
        st[j][e] = p * mask;
        dpt[j][e] = p * (dpt[j][e] * mask - tile_d[i]);
      }
      *reinterpret_cast<uint32_t*>(my_ds + g * kDsLd + j * 8 + 2 * t) = Pack(dpt[j][0], dpt[j][1]);
      *reinterpret_cast<uint32_t*>(my_ds + (g + 8) * kDsLd + j * 8 + 2 * t) = Pack(dpt[j][2], dpt[j][3]);
    }
    __syncwarp();
    // dV += (P o M)^T dO and dK += dS^T Q over the tile's queries [16 c, 16 c + 16).
    #pragma unroll
    for (int c = 0; c < kTile / 16; ++c) {
      uint32_t pa[4], dsa[4];
      PackA(pa, st, c);
      LoadA(dsa, my_ds, kDsLd, c * 16, lane);
      MmaTileRows<hd>(dv_acc, pa, go, c * 16, lane);
      MmaTileRows<hd>(dk_acc, dsa, q, c * 16, lane);
    }
    __syncthreads();  // every warp's dS^T rows are in shared memory
    // dQ += dS K for the warp's 16 queries of the tile, over the block's 64 keys.
    float dq_acc[hd / 8][4] = {};
    #pragma unroll
    for (int c = 0; c < kTile / 16; ++c) {
      uint32_t a[4];
      LoadATransposed(a, ds, kDsLd, warp * 16, c * 16, lane);
      MmaTileRows<hd>(dq_acc, a, k, c * 16, lane);
    }
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int query = q0 + warp * 16 + g + 8 * r;
      if (query >= d.T) continue;
      float* row = dq + ((int64_t{b} * d.T + query) * d.H + h) * hd;
      #pragma unroll
      for (int n = 0; n < hd / 8; ++n) {
        atomicAdd(row + n * 8 + 2 * t, dq_acc[n][2 * r] * d.scale);
        atomicAdd(row + n * 8 + 2 * t + 1, dq_acc[n][2 * r + 1] * d.scale);
      }
    }
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= d.T) continue;
    if constexpr (kOwnKeys) {
      // The warp's keys in dqkv, a bf16 pair per store.
      Half* row = reinterpret_cast<Half*>(dqkv) + (int64_t{b} * d.T + keys[r]) * stride + int64_t{d.H + kv} * hd;
      #pragma unroll
      for (int n = 0; n < hd / 8; ++n) {
        *reinterpret_cast<uint32_t*>(row + n * 8 + 2 * t) =
            Pack(dk_acc[n][2 * r] * d.scale, dk_acc[n][2 * r + 1] * d.scale);
        *reinterpret_cast<uint32_t*>(row + int64_t{d.KV} * hd + n * 8 + 2 * t) =
            Pack(dv_acc[n][2 * r], dv_acc[n][2 * r + 1]);
      }
    } else {
      // The warp's keys: several query heads share a k/v head, so they add into [B, T, KV, hd].
      const int64_t at = ((int64_t{b} * d.T + keys[r]) * d.KV + kv) * hd;
      #pragma unroll
      for (int n = 0; n < hd / 8; ++n) {
        #pragma unroll
        for (int e = 0; e < 2; ++e) {
          atomicAdd(dk + at + n * 8 + 2 * t + e, dk_acc[n][2 * r + e] * d.scale);
          atomicAdd(dv + at + n * 8 + 2 * t + e, dv_acc[n][2 * r + e]);
        }
      }
    }
  }
}

}  // namespace

int MmaForward(bf16* out, float* lse, const bf16* qkv, const Dims& d, int hd, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(d.B * d.H), static_cast<unsigned>((d.T + kTile - 1) / kTile));
  return ForTiledHeadSize(hd, [&](auto size) {
    constexpr int kHd = decltype(size)::value;
    constexpr size_t bytes = ForwardShared<kHd>();
    auto kernel = d.starts != nullptr ? ForwardKernel<kHd, true> : ForwardKernel<kHd, false>;
    if (int rc = AllowSharedMemory(kernel, bytes); rc != 0) return rc;
    LaunchKernel(kernel, grid, kTileThreads, bytes, stream, out, lse, qkv, d);
    return Launched();
  });
}

int MmaBackward(float* dq, float* dk, float* dv, bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                const float* D, const Dims& d, int hd, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(d.B * d.H), static_cast<unsigned>((d.T + kTile - 1) / kTile));
  return ForTiledHeadSize(hd, [&](auto size) {
    constexpr int kHd = decltype(size)::value;
    constexpr size_t bytes = BackwardShared<kHd>();
    auto kernel = d.starts != nullptr ? (dqkv != nullptr ? BackwardKernel<kHd, true, true> : BackwardKernel<kHd, false, true>)
                                      : (dqkv != nullptr ? BackwardKernel<kHd, true, false> : BackwardKernel<kHd, false, false>);
    if (int rc = AllowSharedMemory(kernel, bytes); rc != 0) return rc;
    LaunchKernel(kernel, grid, kTileThreads, bytes, stream, dq, dk, dv, dqkv, dout, qkv, lse, D, d);
    return Launched();
  });
}

}  // namespace srunway::trainer::cuda::flash
