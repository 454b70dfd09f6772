// GPU suite: every CUDA operation of trainer/ops/cuda against its CPU twin (ops/cpu, optim/adamw.cc) on the same
// inputs, and the Linear layers through cuBLASLt (matmul.h) against OpenBLAS. bf16 inputs are rounded to bf16
// first and the CPU twin gets the rounded values in fp32, so what differs is the GPU's own arithmetic and the
// rounding of bf16 outputs. Tolerances, |gpu - cpu| <= atol + rtol |cpu|: bf16 outputs rtol 2^-7 (two bf16
// roundings) with atol 1e-3 (GELU, LayerNorm: 8e-3, their fp32 internals round too; matmul, sums of hundreds of
// products: 1e-2); fp32 outputs that sum in another order (embedding, LayerNorm and matmul weight gradients,
// LayerNorm statistics) rtol 1e-4 with atol 1e-4 (matmul: 1e-3); AdamW rtol 1e-5, atol 1e-7 (nvcc fuses
// multiply-adds). Prints the worst element of each comparison. Exits 77 (skip) where there is no driver or GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/half.h"
#include "tests/gpu/gpu_buffers.h"
#include "trainer/device/device.h"
#include "trainer/model/config.h"
#include "trainer/model/params.h"
#include "trainer/ops/cpu/ops.h"
#include "trainer/ops/cuda/cudnn_attention.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/cuda/matmul.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/schedule.h"

namespace {

using srunway::gpu_tests::Gpu;
using srunway::trainer::Buffer;
using srunway::trainer::Device;
using srunway::trainer::DType;
using srunway::trainer::RopeFrequencies;
namespace cpu = srunway::trainer::cpu;
namespace cuda = srunway::trainer::cuda;

constexpr float kBf16Rtol = 1.0f / 128;

int g_failures = 0;
std::mt19937 g_rng(1234);
// `cuda_ops race` (main: the race check's cases), which runs attention and RoPE over one sequence, whose blocks take
// the paths a batch's would.
bool g_race = false;

std::vector<float> Random(size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> out(n);
  for (float& x : out) x = normal(g_rng);
  return out;
}

// Values as bf16 would hold them.
std::vector<float> Rounded(std::vector<float> values) {
  for (float& x : values) x = srunway::common::BFloat16ToFloat(srunway::common::FloatToBFloat16(x));
  return values;
}

void Compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, float rtol,
             float atol) {
  size_t worst = 0;
  double worst_excess = -1;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double allowed = atol + rtol * std::fabs(want[i]);
    if (!(error <= allowed)) ++bad;
    if (error - allowed > worst_excess) {
      worst_excess = error - allowed;
      worst = i;
    }
  }
  std::printf("  %-34s %s  worst [%zu]: gpu %.8g cpu %.8g\n", what.c_str(), bad == 0 ? "ok  " : "FAIL", worst,
              static_cast<double>(got[worst]), static_cast<double>(want[worst]));
  if (bad > 0) {
    std::printf("    %zu of %zu elements outside %.3g + %.3g |cpu|\n", bad, want.size(), static_cast<double>(atol),
                static_cast<double>(rtol));
    ++g_failures;
  }
}

// Several documents in each of B sequences (--reset-attention-mask), of 1 to 90 tokens: some within a 64-row tile,
// some across one or two. starts[b, t]: where t's document begins.
std::vector<int32_t> RandomDocumentStarts(int B, int T) {
  std::uniform_int_distribution<int> length(1, 90);
  std::vector<int32_t> starts(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b) {
    for (int t = 0, start = 0, end = length(g_rng); t < T; ++t) {
      if (t == end) {
        start = t;
        end = t + length(g_rng);
      }
      starts[static_cast<size_t>(b) * T + t] = start;
    }
  }
  return starts;
}

// Each token's position in its document (--reset-position-ids).
std::vector<int32_t> PositionsIn(const std::vector<int32_t>& starts, int T) {
  std::vector<int32_t> positions(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) positions[i] = static_cast<int32_t>(i % T) - starts[i];
  return positions;
}

void Residual(Gpu& gpu) {
  const size_t n = 100003;
  auto a = Rounded(Random(n)), b = Rounded(Random(n)), dout = Rounded(Random(n));
  auto da = Rounded(Random(n)), db = Rounded(Random(n));
  Buffer ga = gpu.Bf16(a), gb = gpu.Bf16(b), gout = gpu.Bf16(std::vector<float>(n)), gdout = gpu.Bf16(dout);
  Buffer gda = gpu.Bf16(da), gdb = gpu.Bf16(db);
  gpu.Launched(cuda::ResidualForward(gout.as<uint16_t>(), ga.as<uint16_t>(), gb.as<uint16_t>(), n, gpu.stream()),
           "ResidualForward");
  gpu.Launched(cuda::ResidualBackward(gda.as<uint16_t>(), gdb.as<uint16_t>(), gdout.as<uint16_t>(), n, gpu.stream()),
           "ResidualBackward");
  std::vector<float> out(n);
  cpu::ResidualForward(out.data(), a.data(), b.data(), n);
  cpu::ResidualBackward(da.data(), db.data(), dout.data(), n);
  Compare("residual forward", gpu.Read(gout), out, kBf16Rtol, 1e-3f);
  Compare("residual backward da", gpu.Read(gda), da, kBf16Rtol, 1e-3f);
  Compare("residual backward db", gpu.Read(gdb), db, kBf16Rtol, 1e-3f);
}

// The q and k heads out of qkv rows into rows of their own and back (--qk-layernorm): a copy, so exact.
void CopyRows(Gpu& gpu) {
  const int64_t rows = 1000, cols = 96, src_ld = 160, dst_ld = 100;
  auto src = Rounded(Random(static_cast<size_t>(rows * src_ld)));
  auto dst = Rounded(Random(static_cast<size_t>(rows * dst_ld)));
  Buffer gsrc = gpu.Bf16(src), gdst = gpu.Bf16(dst);
  gpu.Launched(cuda::CopyRows(gdst.as<uint16_t>(), dst_ld, gsrc.as<uint16_t>(), src_ld, rows, cols, gpu.stream()),
               "CopyRows");
  cpu::CopyRows(dst.data(), dst_ld, src.data(), src_ld, rows, cols);
  Compare("copy rows", gpu.Read(gdst), dst, 0.0f, 0.0f);
}

// An elementwise activation (GELU, squared ReLU) and its backward, kernels against their CPU twins.
using GpuActivation = int (*)(uint16_t*, const uint16_t*, int64_t, cuda::Stream);
using GpuActivationBackward = int (*)(uint16_t*, const uint16_t*, const uint16_t*, int64_t, cuda::Stream);
void Activation(Gpu& gpu, const std::string& name, GpuActivation gpu_forward, GpuActivationBackward gpu_backward,
                void (*cpu_forward)(float*, const float*, int64_t),
                void (*cpu_backward)(float*, const float*, const float*, int64_t)) {
  const size_t n = 100003;
  auto x = Rounded(Random(n, 2.0f)), dout = Rounded(Random(n)), dinp = Rounded(Random(n));
  Buffer gx = gpu.Bf16(x), gout = gpu.Bf16(std::vector<float>(n)), gdout = gpu.Bf16(dout), gdinp = gpu.Bf16(dinp);
  gpu.Launched(gpu_forward(gout.as<uint16_t>(), gx.as<uint16_t>(), n, gpu.stream()), (name + " forward").c_str());
  gpu.Launched(gpu_backward(gdinp.as<uint16_t>(), gx.as<uint16_t>(), gdout.as<uint16_t>(), n, gpu.stream()),
               (name + " backward").c_str());
  std::vector<float> out(n);
  cpu_forward(out.data(), x.data(), n);
  cpu_backward(dinp.data(), x.data(), dout.data(), n);
  Compare(name + " forward", gpu.Read(gout), out, kBf16Rtol, 8e-3f);
  Compare(name + " backward", gpu.Read(gdinp), dinp, kBf16Rtol, 8e-3f);
}

// With `documents`, each token's learned position embedding is that of its place in its document, whose rows of
// dwpe collect adds from every document; `scale` multiplies the token embedding (--embedding-multiplier).
void Embedding(Gpu& gpu, bool documents, float scale = 1.0f) {
  const int B = 4, T = 64, C = 256, V = 512;
  std::uniform_int_distribution<int32_t> token(0, 31);  // few tokens, so rows of dwte collect many adds
  std::vector<int32_t> tokens(B * T);
  for (int32_t& t : tokens) t = token(g_rng) * (V / 32);
  auto wte = Rounded(Random(size_t{V} * C)), wpe = Rounded(Random(size_t{T} * C));
  auto dout = Rounded(Random(size_t{B} * T * C));
  auto dwte = Random(size_t{V} * C), dwpe = Random(size_t{T} * C);
  Buffer gtokens = gpu.I32(tokens), gwte = gpu.Bf16(wte), gwpe = gpu.Bf16(wpe), gdout = gpu.Bf16(dout);
  Buffer gout = gpu.Bf16(std::vector<float>(size_t{B} * T * C)), gdwte = gpu.F32(dwte), gdwpe = gpu.F32(dwpe);
  const std::vector<int32_t> positions = PositionsIn(RandomDocumentStarts(B, T), T);
  Buffer gpositions = gpu.I32(positions);
  const int32_t* gpu_positions = documents ? gpositions.as<int32_t>() : nullptr;
  gpu.Launched(cuda::EmbeddingForward(gout.as<uint16_t>(), gtokens.as<int32_t>(), gpu_positions, gwte.as<uint16_t>(),
                                      gwpe.as<uint16_t>(), B, T, C, scale, gpu.stream()),
               "EmbeddingForward");
  gpu.Launched(cuda::EmbeddingBackward(gdwte.as<float>(), gdwpe.as<float>(), gdout.as<uint16_t>(), gtokens.as<int32_t>(),
                                       gpu_positions, B, T, C, scale, gpu.stream()),
               "EmbeddingBackward");
  std::vector<float> out(size_t{B} * T * C);
  const cpu::Documents docs{documents ? positions.data() : nullptr, nullptr};
  cpu::EmbeddingForward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, scale, docs);
  cpu::EmbeddingBackward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, scale, docs);
  const std::string which = std::string(documents ? " (documents)" : "") + (scale != 1.0f ? " (scaled)" : "");
  Compare("embedding forward" + which, gpu.Read(gout), out, kBf16Rtol, 1e-3f);
  Compare("embedding backward dwte" + which, gpu.Read(gdwte), dwte, 1e-4f, 1e-4f);
  Compare("embedding backward dwpe" + which, gpu.Read(gdwpe), dwpe, 1e-4f, 1e-4f);
}

// With `offset` 1 the weights are stored as their difference from 1 (--apply-layernorm-1p): the kernels against the
// CPU's norm of weights 1 + w, which the CPU's own offset must equal bit for bit.
std::vector<float> PlusOffset(std::vector<float> w, float offset) {
  for (float& x : w) x += offset;
  return w;
}

// C = 8192 needs 64 KiB of shared memory in the backward, above the default 48 KiB.
void LayerNorm(Gpu& gpu, int N, int C, float offset = 0) {
  const size_t rows = static_cast<size_t>(N), cols = static_cast<size_t>(C), n = rows * cols;
  auto x = Rounded(Random(n, 3.0f)), w = Rounded(Random(cols)), b = Rounded(Random(cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] += static_cast<float>(i % 7);  // rows with a mean
  x = Rounded(x);
  auto dout = Rounded(Random(n)), dinp = Rounded(Random(n));
  auto dw = Random(cols), db = Random(cols);
  std::vector<float> out(n), mean(rows), rstd(rows), own(n);
  const std::vector<float> whole = PlusOffset(w, offset);
  cpu::LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), whole.data(), b.data(), N, C, 1e-5f);
  cpu::LayerNormForward(own.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f, offset);
  if (offset != 0) Compare("layernorm forward, the CPU's offset", own, out, 0, 0);
  Buffer gx = gpu.Bf16(x), gw = gpu.Bf16(w), gb = gpu.Bf16(b), gout = gpu.Bf16(std::vector<float>(out.size()));
  Buffer gmean = gpu.F32(std::vector<float>(rows)), grstd = gpu.F32(std::vector<float>(rows));
  gpu.Launched(cuda::LayerNormForward(gout.as<uint16_t>(), gmean.as<float>(), grstd.as<float>(), gx.as<uint16_t>(),
                                  gw.as<uint16_t>(), gb.as<uint16_t>(), N, C, 1e-5f, offset, gpu.stream()),
               "LayerNormForward");
  const std::string shape =
      "N " + std::to_string(N) + " C " + std::to_string(C) + (offset != 0 ? " weight offset 1" : "");
  Compare("layernorm forward " + shape, gpu.Read(gout), out, kBf16Rtol, 8e-3f);
  Compare("layernorm mean " + shape, gpu.Read(gmean), mean, 1e-4f, 1e-4f);
  Compare("layernorm rstd " + shape, gpu.Read(grstd), rstd, 1e-4f, 1e-4f);
  // The backward from the CPU's statistics, so that it is compared alone.
  Buffer gcmean = gpu.F32(mean), gcrstd = gpu.F32(rstd), gdout = gpu.Bf16(dout), gdinp = gpu.Bf16(dinp);
  Buffer gdw = gpu.F32(dw), gdb = gpu.F32(db);
  gpu.Launched(cuda::LayerNormBackward(gdinp.as<uint16_t>(), gdw.as<float>(), gdb.as<float>(), gdout.as<uint16_t>(),
                                   gx.as<uint16_t>(), gw.as<uint16_t>(), gcmean.as<float>(), gcrstd.as<float>(), N, C,
                                   offset, gpu.stream()), "LayerNormBackward");
  std::vector<float> own_dinp = dinp, own_dw = dw, own_db = db;
  cpu::LayerNormBackward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), whole.data(), mean.data(),
                         rstd.data(), N, C);
  cpu::LayerNormBackward(own_dinp.data(), own_dw.data(), own_db.data(), dout.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C, offset);
  if (offset != 0) {
    Compare("layernorm backward dinp, the CPU's offset", own_dinp, dinp, 0, 0);
    Compare("layernorm backward dweight, the CPU's offset", own_dw, dw, 0, 0);
  }
  Compare("layernorm backward dinp " + shape, gpu.Read(gdinp), dinp, kBf16Rtol, 8e-3f);
  Compare("layernorm backward dweight " + shape, gpu.Read(gdw), dw, 1e-4f, 1e-3f);
  Compare("layernorm backward dbias " + shape, gpu.Read(gdb), db, 1e-4f, 1e-3f);
}

void RmsNorm(Gpu& gpu, int N, int C, float offset = 0) {
  const size_t rows = static_cast<size_t>(N), cols = static_cast<size_t>(C), n = rows * cols;
  auto x = Rounded(Random(n, 2.0f)), w = Rounded(Random(cols)), dout = Rounded(Random(n)), dinp = Rounded(Random(n));
  auto dw = Random(cols);
  std::vector<float> out(n), rstd(rows), own(n);
  const std::vector<float> whole = PlusOffset(w, offset);
  cpu::RmsNormForward(out.data(), rstd.data(), x.data(), whole.data(), N, C, 1e-5f);
  cpu::RmsNormForward(own.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f, offset);
  if (offset != 0) Compare("rmsnorm forward, the CPU's offset", own, out, 0, 0);
  Buffer gx = gpu.Bf16(x), gw = gpu.Bf16(w), gout = gpu.Bf16(std::vector<float>(n)), grstd = gpu.F32(std::vector<float>(rows));
  gpu.Launched(cuda::RmsNormForward(gout.as<uint16_t>(), grstd.as<float>(), gx.as<uint16_t>(), gw.as<uint16_t>(), N, C,
                                1e-5f, offset, gpu.stream()), "RmsNormForward");
  const std::string shape =
      "N " + std::to_string(N) + " C " + std::to_string(C) + (offset != 0 ? " weight offset 1" : "");
  Compare("rmsnorm forward " + shape, gpu.Read(gout), out, kBf16Rtol, 8e-3f);
  Compare("rmsnorm rstd " + shape, gpu.Read(grstd), rstd, 1e-4f, 1e-6f);
  Buffer gcrstd = gpu.F32(rstd), gdout = gpu.Bf16(dout), gdinp = gpu.Bf16(dinp), gdw = gpu.F32(dw);
  gpu.Launched(cuda::RmsNormBackward(gdinp.as<uint16_t>(), gdw.as<float>(), gdout.as<uint16_t>(), gx.as<uint16_t>(),
                                 gw.as<uint16_t>(), gcrstd.as<float>(), N, C, offset, gpu.stream()),
               "RmsNormBackward");
  std::vector<float> own_dinp = dinp, own_dw = dw;
  cpu::RmsNormBackward(dinp.data(), dw.data(), dout.data(), x.data(), whole.data(), rstd.data(), N, C);
  cpu::RmsNormBackward(own_dinp.data(), own_dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C, offset);
  if (offset != 0) {
    Compare("rmsnorm backward dinp, the CPU's offset", own_dinp, dinp, 0, 0);
    Compare("rmsnorm backward dweight, the CPU's offset", own_dw, dw, 0, 0);
  }
  Compare("rmsnorm backward dinp " + shape, gpu.Read(gdinp), dinp, kBf16Rtol, 8e-3f);
  Compare("rmsnorm backward dweight " + shape, gpu.Read(gdw), dw, 1e-4f, 1e-3f);
}

// The residual add fused into LayerNorm and RMSNorm against the two kernels one after the other: the same bits
// (the fused kernel rounds the sum to bf16 as ResidualForward does and normalises that).
void ResidualNorm(Gpu& gpu, int N, int C, float offset = 0) {
  const size_t n = static_cast<size_t>(N) * C;
  auto a = Rounded(Random(n, 2.0f)), b = Rounded(Random(n)), w = Rounded(Random(static_cast<size_t>(C)));
  auto bias = Rounded(Random(static_cast<size_t>(C)));
  Buffer ga = gpu.Bf16(a), gb = gpu.Bf16(b), gw = gpu.Bf16(w), gbias = gpu.Bf16(bias);
  const std::vector<float> zeros(n), row_zeros(static_cast<size_t>(N));
  Buffer fused_sum = gpu.Bf16(zeros), fused_out = gpu.Bf16(zeros), fused_mean = gpu.F32(row_zeros);
  Buffer fused_rstd = gpu.F32(row_zeros), sum = gpu.Bf16(zeros), out = gpu.Bf16(zeros), mean = gpu.F32(row_zeros);
  Buffer rstd = gpu.F32(row_zeros);
  const std::string shape =
      "N " + std::to_string(N) + " C " + std::to_string(C) + (offset != 0 ? " weight offset 1" : "");
  gpu.Launched(cuda::ResidualLayerNormForward(fused_sum.as<uint16_t>(), fused_out.as<uint16_t>(), fused_mean.as<float>(),
                                          fused_rstd.as<float>(), ga.as<uint16_t>(), gb.as<uint16_t>(),
                                          gw.as<uint16_t>(), gbias.as<uint16_t>(), N, C, 1e-5f, offset,
                                          gpu.stream()),
           "ResidualLayerNormForward");
  gpu.Launched(cuda::ResidualForward(sum.as<uint16_t>(), ga.as<uint16_t>(), gb.as<uint16_t>(), static_cast<int64_t>(n),
                                 gpu.stream()), "ResidualForward");
  gpu.Launched(cuda::LayerNormForward(out.as<uint16_t>(), mean.as<float>(), rstd.as<float>(), sum.as<uint16_t>(),
                                  gw.as<uint16_t>(), gbias.as<uint16_t>(), N, C, 1e-5f, offset, gpu.stream()),
           "LayerNormForward");
  Compare("residual+layernorm sum " + shape, gpu.Read(fused_sum), gpu.Read(sum), 0, 0);
  Compare("residual+layernorm out " + shape, gpu.Read(fused_out), gpu.Read(out), 0, 0);
  Compare("residual+layernorm rstd " + shape, gpu.Read(fused_rstd), gpu.Read(rstd), 0, 0);
  gpu.Launched(cuda::ResidualRmsNormForward(fused_sum.as<uint16_t>(), fused_out.as<uint16_t>(), fused_rstd.as<float>(),
                                        ga.as<uint16_t>(), gb.as<uint16_t>(), gw.as<uint16_t>(), N, C, 1e-5f,
                                        offset, gpu.stream()), "ResidualRmsNormForward");
  gpu.Launched(cuda::RmsNormForward(out.as<uint16_t>(), rstd.as<float>(), sum.as<uint16_t>(), gw.as<uint16_t>(), N, C,
                                1e-5f, offset, gpu.stream()), "RmsNormForward");
  Compare("residual+rmsnorm out " + shape, gpu.Read(fused_out), gpu.Read(out), 0, 0);
  Compare("residual+rmsnorm rstd " + shape, gpu.Read(fused_rstd), gpu.Read(rstd), 0, 0);
}

// SwiGLU, or with `glu` another gated activation (--quick-geglu, --glu-linear-offset, --activation-func-clamp-value,
// --geglu).
void Swiglu(Gpu& gpu, const srunway::trainer::Glu& glu = {}) {
  const int N = 300, F = 688;
  const size_t n = static_cast<size_t>(N) * F;
  auto x = Rounded(Random(2 * n, 2.0f)), dout = Rounded(Random(n)), dinp = Rounded(Random(2 * n));
  Buffer gx = gpu.Bf16(x), gout = gpu.Bf16(std::vector<float>(n)), gdout = gpu.Bf16(dout), gdinp = gpu.Bf16(dinp);
  gpu.Launched(cuda::SwigluForward(gout.as<uint16_t>(), gx.as<uint16_t>(), N, F, glu, gpu.stream()), "SwigluForward");
  gpu.Launched(cuda::SwigluBackward(gdinp.as<uint16_t>(), gx.as<uint16_t>(), gdout.as<uint16_t>(), N, F, glu,
                                    gpu.stream()),
               "SwigluBackward");
  std::vector<float> out(n);
  cpu::SwigluForward(out.data(), x.data(), N, F, glu);
  cpu::SwigluBackward(dinp.data(), x.data(), dout.data(), N, F, glu);
  const std::string what = glu.gelu                                                         ? "geglu"
                           : glu.alpha != 1.0f || glu.offset != 0.0f || glu.clamp != 0.0f ? "quick geglu"
                                                                                          : "swiglu";
  Compare(what + " forward", gpu.Read(gout), out, kBf16Rtol, 8e-3f);
  Compare(what + " backward", gpu.Read(gdinp), dinp, kBf16Rtol, 8e-3f);
}

// Llama-style grouped heads (H 8, KV 2, head dim 64) over positions up to 511 (with `documents`, each token's
// place in its document); forward then backward (the backward of a rotation turns gradients back). `rope`: its
// frequencies (scaled as Llama 3.1's, linearly, by YaRN or LongRoPE), how many of each head's dimensions turn, and
// in which pairs.
void Rope(Gpu& gpu, bool documents, const RopeFrequencies& rope = {}) {
  const int B = g_race ? 1 : 2, T = 512, H = 8, KV = 2, hd = 64;
  const size_t n = static_cast<size_t>(B) * T * (H + 2 * KV) * hd;
  auto qkv = Rounded(Random(n)), dqkv = Rounded(Random(n));
  Buffer gqkv = gpu.Bf16(qkv), gdqkv = gpu.Bf16(dqkv);
  const std::vector<int32_t> positions = PositionsIn(RandomDocumentStarts(B, T), T);
  Buffer gpositions = gpu.I32(positions);
  const int32_t* gpu_positions = documents ? gpositions.as<int32_t>() : nullptr;
  gpu.Launched(cuda::RopeForward(gqkv.as<uint16_t>(), gpu_positions, B, T, H, KV, hd, rope, gpu.stream()),
               "RopeForward");
  gpu.Launched(cuda::RopeBackward(gdqkv.as<uint16_t>(), gpu_positions, B, T, H, KV, hd, rope, gpu.stream()),
               "RopeBackward");
  const cpu::Documents docs{documents ? positions.data() : nullptr, nullptr};
  cpu::RopeForward(qkv.data(), B, T, H, KV, hd, rope, docs);
  cpu::RopeBackward(dqkv.data(), B, T, H, KV, hd, rope, docs);
  const std::string which =
      std::string(documents ? " (documents)" : "") + (rope.scaling_factor > 0 ? " (scaled)" : "") +
      (rope.linear_factor != 1.0f ? " (linear)" : "") +
      (rope.rotary_dim > 0 && rope.rotary_dim < hd ? " (partial)" : "") +
      (rope.interleaved ? " (interleaved)" : "") + (rope.yarn_factor > 0 ? " (yarn)" : "") +
      (rope.pair_factors > 0 ? " (longrope)" : "");
  Compare("rope forward" + which, gpu.Read(gqkv), qkv, kBf16Rtol, 8e-3f);
  Compare("rope backward" + which, gpu.Read(gdqkv), dqkv, kBf16Rtol, 8e-3f);
}

// The same elements dropped as on the CPU (`n` of them), from a site in the middle of a global batch.
void Dropout(Gpu& gpu, size_t n) {
  const cpu::DropoutSite site{0.1f, cpu::DropoutKey(1234, 7, 3), 5000000};
  auto x = Rounded(Random(n));
  Buffer gx = gpu.Bf16(x);
  gpu.Launched(cuda::Dropout(gx.as<uint16_t>(), static_cast<int64_t>(n), site.p, site.key, site.first_index, gpu.stream()),
           "Dropout");
  cpu::DropoutForward(x.data(), static_cast<int64_t>(n), site);
  const std::vector<float> got = gpu.Read(gx);
  size_t mask_differs = 0, dropped = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((got[i] == 0.0f) != (x[i] == 0.0f)) ++mask_differs;
    if (x[i] == 0.0f) ++dropped;
  }
  std::printf("  %-34s %s  %zu of %zu dropped, %zu differ\n", "dropout mask", mask_differs == 0 ? "ok  " : "FAIL",
              dropped, n, mask_differs);
  if (mask_differs != 0) ++g_failures;
  Compare("dropout values", got, x, kBf16Rtol, 0.0f);
}

// GPT-2's vocabulary (50257: the one-value-at-a-time kernels), a small one, and the padded 50304 (16 bytes at a time);
// the two kernels, and the one that does both. Every fifth row has no loss (a negative target): 0, and no gradient.
void Classifier(Gpu& gpu, int N, int V) {
  const size_t n = static_cast<size_t>(N) * static_cast<size_t>(V);
  auto logits = Rounded(Random(n, 3.0f));
  std::uniform_int_distribution<int32_t> target(0, V - 1);
  std::vector<int32_t> targets(static_cast<size_t>(N));
  for (int32_t& t : targets) t = target(g_rng);
  for (size_t i = 0; i < targets.size(); i += 5) targets[i] = -1;  // rows without loss (--eod-mask-loss)
  const float dloss = 1.0f / static_cast<float>(N);
  Buffer glogits = gpu.Bf16(logits), glosses = gpu.F32(std::vector<float>(static_cast<size_t>(N)));
  Buffer glse = gpu.F32(std::vector<float>(static_cast<size_t>(N)));
  Buffer gtargets = gpu.I32(targets);
  // And both in one kernel, on a copy, as training runs them.
  Buffer gfused = gpu.Bf16(logits), gfused_losses = gpu.F32(std::vector<float>(static_cast<size_t>(N)));
  Buffer gfused_lse = gpu.F32(std::vector<float>(static_cast<size_t>(N)));
  gpu.Launched(
      cuda::ClassifierLossesAndGradients(gfused_losses.as<float>(), gfused_lse.as<float>(), gfused.as<uint16_t>(),
                                         gtargets.as<int32_t>(), N, V, dloss, gpu.stream()),
      "ClassifierLossesAndGradients");
  // The losses (the logits must stay as they are), then the gradients from the kept log-sum-exp.
  gpu.Launched(cuda::ClassifierLosses(glosses.as<float>(), glse.as<float>(), glogits.as<uint16_t>(),
                                  gtargets.as<int32_t>(), N, V, gpu.stream()), "ClassifierLosses");
  Compare("classifier logits kept " + std::to_string(V), gpu.Read(glogits), logits, 0.0f, 0.0f);
  gpu.Launched(cuda::ClassifierGradients(glogits.as<uint16_t>(), glse.as<float>(), gtargets.as<int32_t>(), N, V, dloss,
                                     gpu.stream()), "ClassifierGradients");
  std::vector<float> losses(static_cast<size_t>(N));
  cpu::SoftmaxCrossEntropyForward(logits.data(), losses.data(), targets.data(), N, V);
  cpu::SoftmaxCrossEntropyBackward(logits.data(), targets.data(), N, V, dloss);
  const std::string shape = "N " + std::to_string(N) + " V " + std::to_string(V);
  Compare("classifier losses " + shape, gpu.Read(glosses), losses, 1e-4f, 1e-5f);
  Compare("classifier dlogits " + shape, gpu.Read(glogits), logits, kBf16Rtol, 1e-4f * dloss);
  Compare("classifier fused losses " + shape, gpu.Read(gfused_losses), losses, 1e-4f, 1e-5f);
  Compare("classifier fused lse " + shape, gpu.Read(gfused_lse), gpu.Read(glse), 0.0f, 0.0f);
  Compare("classifier fused dlogits " + shape, gpu.Read(gfused), logits, kBf16Rtol, 1e-4f * dloss);
}

// Causal attention against ops/cpu/attention.cc: grouped-query heads with and without attention dropout, plain
// multi-head attention with head dim 128, and head dims 16 (gpt-tiny's and llama-tiny's), 32 and 96 at lengths that
// end mid-tile. The CPU keeps the probabilities, the GPU their log-sum-exp.
// With `cudnn`, its fused attention instead of the kernels (which must not fall back to them). With `documents`,
// several in each sequence (RandomDocumentStarts), each query attending to its own document's keys alone; with a
// `window` (--window-size window,0), to itself and the `window` keys before it alone (within its document). With
// `sinks` (--softmax-type learnable), a sink score per head drawn N(0, 1), whose gradients are added to values there.
void Attention(Gpu& gpu, int B, int T, int H, int KV, int hd, float p, cuda::CudnnAttention* cudnn = nullptr,
               bool documents = false, int window = -1, bool sinks = false) {
  if (cudnn == nullptr &&
      cuda::AttentionKernelName(hd) == nullptr) {  // SRUNWAY_ATTENTION=simple takes multiples of 32 only
    const char* choice = std::getenv("SRUNWAY_ATTENTION");
    std::printf("cuda_ops: attention hd%d skipped: no kernel takes it under SRUNWAY_ATTENTION=%s\n", hd,
                choice != nullptr ? choice : "");
    return;
  }
  if (g_race) B = 1;
  const size_t n_qkv = static_cast<size_t>(B) * T * (H + 2 * KV) * hd, n_out = static_cast<size_t>(B) * T * H * hd;
  const cpu::DropoutSite dropout{p, cpu::DropoutKey(99, 3, 2), 12345};
  const auto qkv = Rounded(Random(n_qkv)), dout = Rounded(Random(n_out)), dqkv_start = Rounded(Random(n_qkv));
  Buffer gqkv = gpu.Bf16(qkv), gout = gpu.Bf16(std::vector<float>(n_out)), gdout = gpu.Bf16(dout);
  Buffer glse = gpu.F32(std::vector<float>(static_cast<size_t>(B) * H * T)), gdqkv = gpu.Bf16(dqkv_start);
  Buffer scratch = gpu.F32(std::vector<float>(static_cast<size_t>(cuda::AttentionBackwardScratch(B, T, H, KV, hd))));
  std::vector<int32_t> starts = RandomDocumentStarts(B, T);
  for (size_t i = 0; i < starts.size(); ++i) {
    if (!documents) starts[i] = 0;
    if (window >= 0) starts[i] = std::max(starts[i], static_cast<int32_t>(i % T) - window);
  }
  const bool bounded = documents || window >= 0;
  const auto sink_scores = Rounded(Random(static_cast<size_t>(H)));
  const std::vector<float> dsinks_start = Random(static_cast<size_t>(H));
  std::vector<float> dsinks = dsinks_start;
  Buffer gsinks = gpu.Bf16(sink_scores), gdsinks = gpu.F32(dsinks);
  const uint16_t* gpu_sinks = sinks ? gsinks.as<uint16_t>() : nullptr;
  float* gpu_dsinks = sinks ? gdsinks.as<float>() : nullptr;
  Buffer gstarts = gpu.I32(starts);
  const int32_t* gpu_starts = bounded ? gstarts.as<int32_t>() : nullptr;
  if (cudnn != nullptr) {
    srunway::trainer::Stream& stream = gpu.device().main_stream();
    gpu.Check(cudnn->Forward(gout.data(), glse.as<float>(), gqkv.data(), {B, T, H, KV, hd}, stream),
              "cuDNN attention forward");
    gpu.Check(cudnn->Backward(gdqkv.data(), gdout.data(), gout.data(), gqkv.data(), glse.as<float>(), {B, T, H, KV, hd},
                              stream),
              "cuDNN attention backward");
  } else {
    gpu.Launched(cuda::AttentionForward(gout.as<uint16_t>(), glse.as<float>(), gqkv.as<uint16_t>(), B, T, H, KV, hd, p,
                                        dropout.key, dropout.first_index, gpu_starts, gpu_sinks, gpu.stream()),
                 "AttentionForward");
    gpu.Launched(cuda::AttentionBackward(gdqkv.as<uint16_t>(), scratch.as<float>(), gdout.as<uint16_t>(),
                                         gout.as<uint16_t>(), gqkv.as<uint16_t>(), glse.as<float>(), B, T, H, KV, hd, p,
                                         dropout.key, dropout.first_index, gpu_starts, gpu_sinks, gpu_dsinks,
                                         gpu.stream()),
                 "AttentionBackward");
  }
  std::vector<float> out(n_out), att(static_cast<size_t>(B) * H * T * T), dqkv = dqkv_start;
  const cpu::Documents docs{nullptr, bounded ? starts.data() : nullptr};
  cpu::AttentionForward(out.data(), att.data(), qkv.data(), B, T, H, KV, hd, dropout, docs,
                        sinks ? sink_scores.data() : nullptr);
  cpu::AttentionBackward(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, H, KV, hd, dropout, docs,
                         sinks ? dsinks.data() : nullptr);
  const std::string shape = "B" + std::to_string(B) + " T" + std::to_string(T) + " H" + std::to_string(H) + " KV" +
                            std::to_string(KV) + " hd" + std::to_string(hd) + (p > 0 ? " dropout" : "") +
                            (cudnn != nullptr ? " cuDNN" : "") + (documents ? " documents" : "") +
                            (window >= 0 ? " window " + std::to_string(window) : "") + (sinks ? " sinks" : "");
  Compare("attention forward " + shape, gpu.Read(gout), out, kBf16Rtol, 1e-2f);
  if (sinks) {
    // The sinks' gradients, -sum over each head's B T rows of p_sink (dO . O), against the same sums in double of
    // the GPU's own output and log-sum-exp: the CPU's, from its fp32 output, differ by the bf16 roundings of the
    // probabilities and the output, which the sums of signed terms leave up to 4% of the total (the emulated GPU's
    // WMMA kernels at hd 64 with dropout), where the output and the backward are within their own tolerances.
    const std::vector<float> gpu_out = gpu.Read(gout), lse = gpu.Read(glse);
    std::vector<float> sums = dsinks_start;
    for (int h = 0; h < H; ++h) {
      double sum = 0;
      for (int64_t bt = 0; bt < int64_t{B} * T; ++bt) {
        const int64_t b = bt / T, t = bt % T, at = bt * H * hd + int64_t{h} * hd;
        double dot = 0;
        for (size_t i = static_cast<size_t>(at); i < static_cast<size_t>(at + hd); ++i) {
          dot += double{dout[i]} * gpu_out[i];
        }
        const double row_lse = lse[static_cast<size_t>((b * H + h) * T + t)];
        sum -= std::exp(double{sink_scores[static_cast<size_t>(h)]} - row_lse) * dot;
      }
      sums[static_cast<size_t>(h)] += static_cast<float>(sum);
    }
    Compare("attention sink gradients " + shape, gpu.Read(gdsinks), sums, 1e-4f, 1e-5f);
    Compare("attention sink gradients against the CPU's " + shape, gpu.Read(gdsinks), dsinks, 0.0f, 5e-2f);
  }
  // The first keys' gradients sum hundreds of terms made of bf16 probabilities and of D = rowsum(dO o O) from the
  // bf16 output; the emulated GPU's WMMA kernels were 0.029 off at hd 96 with dropout (tests/emulated_gpu).
  Compare("attention backward " + shape, gpu.Read(gdqkv), dqkv, kBf16Rtol, 4e-2f);
}

// Linear layers through cuBLASLt against ops/cpu/matmul.cc (OpenBLAS), with and without bias; the backward writes
// dinp over stale values and adds into weight and bias gradients that already hold values. The bias gradient
// comes from the weight gradient's BGRADB epilogue where `epilogues` and cuBLASLt has it, else from the kernel.
void Matmul(Gpu& gpu, cuda::Matmul& blas, int N, int C, int OC, bool with_bias, bool epilogues = true) {
  const size_t rows = static_cast<size_t>(N), in = static_cast<size_t>(C), out_cols = static_cast<size_t>(OC);
  auto x = Rounded(Random(rows * in)), w = Rounded(Random(out_cols * in, 0.05f)), b = Rounded(Random(out_cols));
  auto dout = Rounded(Random(rows * out_cols)), dx = Rounded(Random(rows * in));
  auto dw = Random(out_cols * in), db = Random(out_cols);
  Buffer gx = gpu.Bf16(x), gw = gpu.Bf16(w), gb = gpu.Bf16(b), gout = gpu.Bf16(std::vector<float>(rows * out_cols));
  Buffer gdout = gpu.Bf16(dout), gdx = gpu.Bf16(dx), gdw = gpu.F32(dw), gdb = gpu.F32(db);
  const std::string shape = std::to_string(N) + "x" + std::to_string(C) + "->" + std::to_string(OC) +
                            (with_bias ? " bias" : "");
  blas.set_epilogues(epilogues);
  const int64_t bgradb_sums = blas.bgradb_sums();
  gpu.Check(blas.Forward(gout.as<uint16_t>(), gx.as<uint16_t>(), gw.as<uint16_t>(),
                          with_bias ? gb.as<uint16_t>() : nullptr, N, C, OC, gpu.stream()), "Matmul::Forward");
  gpu.Check(blas.Backward(gdx.as<uint16_t>(), gdw.as<float>(), with_bias ? gdb.as<float>() : nullptr,
                           gdout.as<uint16_t>(), gx.as<uint16_t>(), gw.as<uint16_t>(), N, C, OC, gpu.stream()),
             "Matmul::Backward");
  blas.set_epilogues(true);
  const bool by_bgradb = blas.bgradb_sums() != bgradb_sums;
  const char* bias_by = !with_bias                     ? ""
                        : by_bgradb                    ? " (BGRADB)"
                        : !epilogues || !blas.bgradb() ? " (kernel)"
                                                       : " (kernel: cuBLASLt had no BGRADB)";
  if (by_bgradb && !blas.bgradb()) {
    std::printf("FAIL matmul %s: the bias gradient came from BGRADB, which SRUNWAY_BGRADB=0 turns off\n",
                shape.c_str());
    ++g_failures;
  }
  std::vector<float> out(rows * out_cols);
  cpu::MatmulForward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, C, OC);
  cpu::MatmulBackward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(), N, C, OC);
  Compare("matmul forward " + shape, gpu.Read(gout), out, kBf16Rtol, 1e-2f);
  Compare("matmul backward dinp " + shape, gpu.Read(gdx), dx, kBf16Rtol, 1e-2f);
  Compare("matmul backward dweight " + shape, gpu.Read(gdw), dw, 1e-4f, 1e-3f);
  Compare("matmul backward dbias" + std::string(bias_by) + " " + shape, gpu.Read(gdb), db, 1e-4f, 1e-3f);
  // A residual added by the product itself (its C, beta 1), left as it was.
  const auto residual = Rounded(Random(rows * out_cols));
  Buffer gresidual = gpu.Bf16(residual), gsum = gpu.Bf16(std::vector<float>(rows * out_cols));
  gpu.Check(blas.Forward(gsum.as<uint16_t>(), gx.as<uint16_t>(), gw.as<uint16_t>(),
                         with_bias ? gb.as<uint16_t>() : nullptr, N, C, OC, gpu.stream(), gresidual.as<uint16_t>()),
            "Matmul::Forward with a residual");
  for (size_t i = 0; i < out.size(); ++i) out[i] += residual[i];
  Compare("matmul forward + residual " + shape, gpu.Read(gsum), out, kBf16Rtol, 1e-2f);
  Compare("matmul residual unchanged " + shape, gpu.Read(gresidual), residual, 0, 0);
  // The weight gradient written over what it holds (the first backward after Model::ZeroGrad: the product's beta
  // 0), the bias gradient still added.
  gpu.Check(blas.Backward(nullptr, gdw.as<float>(), with_bias ? gdb.as<float>() : nullptr, gdout.as<uint16_t>(),
                          gx.as<uint16_t>(), gw.as<uint16_t>(), N, C, OC, gpu.stream(), /*write_dweight=*/true),
            "Matmul::Backward writing dweight");
  std::vector<float> written(out_cols * in);
  cpu::MatmulBackward(dx.data(), written.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(), N,
                      C, OC, /*write_dweight=*/true);
  Compare("matmul backward dweight written " + shape, gpu.Read(gdw), written, 1e-4f, 1e-3f);
  Compare("matmul backward dbias, again " + shape, gpu.Read(gdb), db, 1e-4f, 1e-3f);
}

// A Linear layer with GELU, [N, C] -> [N, F], and the backward of the next Linear layer, [N, F] -> [N, C], into
// d(pre-GELU) and the first layer's bias gradient, through cuBLASLt's GELU epilogues (`epilogues`; F not a
// multiple of 8 falls back to the GEMM and the GELU kernels) or without them, against ops/cpu. The CPU's backward
// reads the GPU's pre and act (bf16), so each direction is compared alone. `must_fuse`: the epilogues must be the
// path taken (GPT-2's shape); at odd shapes cuBLASLt may decline them, and the GEMM and GELU kernels stand in.
// The bias gradient of d(pre) is summed by DGELU_BGRAD from its fp32 values, compared with the CPU's fp32 d(pre)'s
// sums (to bf16's precision where cuBLASLt had only bf16 sums), or by the kernel from the bf16 d(pre) written,
// compared with the sums of that d(pre) as read back. `must_sum_bf16`: DGELU_BGRAD's bf16 sums must be the path
// taken (the emulated GPU told to decline its fp32 ones).
void MatmulGelu(Gpu& gpu, cuda::Matmul& blas, int N, int C, int F, bool epilogues, bool must_fuse = false,
                bool must_sum_bf16 = false) {
  const size_t rows = static_cast<size_t>(N), in = static_cast<size_t>(C), hidden = static_cast<size_t>(F);
  auto x = Rounded(Random(rows * in)), w1 = Rounded(Random(hidden * in, 0.05f)), b1 = Rounded(Random(hidden));
  auto w2 = Rounded(Random(in * hidden, 0.05f)), dout = Rounded(Random(rows * in));
  auto dpre = Rounded(Random(rows * hidden));  // stale: the backward writes it
  auto dw2 = Random(in * hidden), db2 = Random(in), db1 = Random(hidden);
  Buffer gx = gpu.Bf16(x), gw1 = gpu.Bf16(w1), gb1 = gpu.Bf16(b1), gw2 = gpu.Bf16(w2), gdout = gpu.Bf16(dout);
  Buffer gpre = gpu.Bf16(std::vector<float>(rows * hidden)), gact = gpu.Bf16(std::vector<float>(rows * hidden));
  Buffer gdpre = gpu.Bf16(dpre), gdw2 = gpu.F32(dw2), gdb2 = gpu.F32(db2), gdb1 = gpu.F32(db1);
  const std::string shape = std::to_string(N) + "x" + std::to_string(C) + "->" + std::to_string(F) +
                            (epilogues ? " epilogues" : " kernels");
  blas.set_epilogues(epilogues);
  const int64_t fallbacks = blas.gelu_fallbacks(), bias_fallbacks = blas.bias_gradient_fallbacks();
  const int64_t bf16_sums = blas.bf16_bias_sums();
  gpu.Check(blas.ForwardGelu(gact.as<uint16_t>(), gpre.as<uint16_t>(), gx.as<uint16_t>(), gw1.as<uint16_t>(),
                              gb1.as<uint16_t>(), N, C, F, gpu.stream()), "Matmul::ForwardGelu");
  gpu.Check(blas.BackwardGelu(gdpre.as<uint16_t>(), gdb1.as<float>(), gdw2.as<float>(), gdb2.as<float>(),
                              gdout.as<uint16_t>(), gact.as<uint16_t>(), gpre.as<uint16_t>(), gw2.as<uint16_t>(), N, F,
                              C, gpu.stream()),
            "Matmul::BackwardGelu");
  const bool bias_by_epilogue = epilogues && F % 8 == 0 && blas.bias_gradient_fallbacks() == bias_fallbacks;
  const bool summed_bf16 = blas.bf16_bias_sums() != bf16_sums;
  if (epilogues && F % 8 == 0 && !bias_by_epilogue) {
    std::printf("  matmul+gelu %s: cuBLASLt had no DGELU_BGRAD with an fp32 or bf16 bias gradient; the kernel "
                "summed it\n", shape.c_str());
  } else if (summed_bf16) {
    std::printf("  matmul+gelu %s: cuBLASLt had DGELU_BGRAD with a bf16 bias gradient only\n", shape.c_str());
  }
  if (must_sum_bf16 && !(bias_by_epilogue && summed_bf16)) {
    std::printf("FAIL matmul+gelu %s: the bias gradient was not DGELU_BGRAD's bf16 sums\n", shape.c_str());
    ++g_failures;
  }
  blas.set_epilogues(true);
  if (blas.gelu_fallbacks() != fallbacks) {
    std::printf("  matmul+gelu %s: %lld call(s) without the epilogue\n", shape.c_str(),
                static_cast<long long>(blas.gelu_fallbacks() - fallbacks));
  }
  if (must_fuse && blas.gelu_fallbacks() != fallbacks) {
    std::printf("FAIL matmul+gelu %s: cuBLASLt had no algorithm for a GELU epilogue (%lld fallbacks)\n",
                shape.c_str(), static_cast<long long>(blas.gelu_fallbacks() - fallbacks));
    ++g_failures;
  }
  std::vector<float> pre(rows * hidden), act(rows * hidden);
  cpu::MatmulForward(pre.data(), x.data(), w1.data(), b1.data(), N, C, F);
  cpu::GeluForward(act.data(), pre.data(), static_cast<int64_t>(rows * hidden));
  Compare("matmul+gelu forward pre " + shape, gpu.Read(gpre), pre, kBf16Rtol, 1e-2f);
  Compare("matmul+gelu forward act " + shape, gpu.Read(gact), act, kBf16Rtol, 1e-2f);
  const std::vector<float> gpu_pre = gpu.Read(gpre), gpu_act = gpu.Read(gact);
  cpu::MatmulBackward(dpre.data(), dw2.data(), db2.data(), dout.data(), gpu_act.data(), w2.data(), N, F, C);
  cpu::GeluBackward(dpre.data(), gpu_pre.data(), dpre.data(), static_cast<int64_t>(rows * hidden));
  Compare("matmul+gelu backward dpre " + shape, gpu.Read(gdpre), dpre, kBf16Rtol, 1e-2f);
  const std::vector<float> db1_before = db1;
  cpu::BiasBackward(db1.data(), bias_by_epilogue ? dpre.data() : gpu.Read(gdpre).data(), N, F);
  // bf16 sums are each within half a unit in the last place of the largest: 2^-8 of it.
  float largest_sum = 0;
  for (size_t i = 0; i < hidden; ++i) largest_sum = std::max(largest_sum, std::fabs(db1[i] - db1_before[i]));
  Compare(std::string("matmul+gelu backward dpre bias ") +
              (bias_by_epilogue ? (summed_bf16 ? "(DGELU_BGRAD, bf16) " : "(DGELU_BGRAD) ") : "(kernel) ") + shape,
          gpu.Read(gdb1), db1, 1e-4f, 1e-3f + (summed_bf16 ? largest_sum / 256 : 0.0f));
  Compare("matmul+gelu backward dweight " + shape, gpu.Read(gdw2), dw2, 1e-4f, 1e-3f);
  Compare("matmul+gelu backward dbias " + shape, gpu.Read(gdb2), db2, 1e-4f, 1e-3f);
  // The weight gradient written over what it holds (the first backward after Model::ZeroGrad).
  blas.set_epilogues(epilogues);
  gpu.Check(blas.BackwardGelu(gdpre.as<uint16_t>(), nullptr, gdw2.as<float>(), nullptr, gdout.as<uint16_t>(),
                              gact.as<uint16_t>(), gpre.as<uint16_t>(), gw2.as<uint16_t>(), N, F, C, gpu.stream(),
                              /*write_dweight=*/true),
            "Matmul::BackwardGelu writing dweight");
  blas.set_epilogues(true);
  std::vector<float> written(in * hidden), scratch(rows * hidden);
  cpu::MatmulBackward(scratch.data(), written.data(), nullptr, dout.data(), gpu_act.data(), w2.data(), N, F, C,
                      /*write_dweight=*/true);
  Compare("matmul+gelu backward dweight written " + shape, gpu.Read(gdw2), written, 1e-4f, 1e-3f);
}

// Matmul's plans (cuBLASLt's choice of algorithm, kept per product, or its answer that it has none): the same
// GELU layer run again with other bias and pre-GELU buffers, both alive, asks the heuristic nothing new and reads
// and writes the new ones; an output two bytes past an aligned address is another product for cuBLASLt (its
// algorithms may assume 16 bytes), so that asks anew, and its result is right; the GELU backward likewise.
void MatmulPlans(Gpu& gpu, cuda::Matmul& blas) {
  const int N = 64, C = 64, OC = 48;
  const size_t rows = N, in = C, out_cols = OC;
  auto x = Rounded(Random(rows * in)), w = Rounded(Random(out_cols * in, 0.05f));
  Buffer gx = gpu.Bf16(x), gw = gpu.Bf16(w);
  std::vector<std::vector<float>> biases;
  std::vector<Buffer> gbias, gpre, gact;
  std::vector<int64_t> searches = {blas.algorithm_searches()};
  for (int i = 0; i < 2; ++i) {
    biases.push_back(Rounded(Random(out_cols)));
    gbias.push_back(gpu.Bf16(biases.back()));
    gpre.push_back(gpu.Bf16(std::vector<float>(rows * out_cols)));
    gact.push_back(gpu.Bf16(std::vector<float>(rows * out_cols)));
    gpu.Check(blas.ForwardGelu(gact[i].as<uint16_t>(), gpre[i].as<uint16_t>(), gx.as<uint16_t>(), gw.as<uint16_t>(),
                               gbias[i].as<uint16_t>(), N, C, OC, gpu.stream()),
              "Matmul::ForwardGelu");
    searches.push_back(blas.algorithm_searches());
  }
  for (int i = 0; i < 2; ++i) {
    std::vector<float> pre(rows * out_cols), act(rows * out_cols);
    cpu::MatmulForward(pre.data(), x.data(), w.data(), biases[i].data(), N, C, OC);
    cpu::GeluForward(act.data(), pre.data(), static_cast<int64_t>(rows * out_cols));
    Compare("matmul plans: gelu pre, buffers " + std::to_string(i), gpu.Read(gpre[i]), pre, kBf16Rtol, 1e-2f);
    Compare("matmul plans: gelu act, buffers " + std::to_string(i), gpu.Read(gact[i]), act, kBf16Rtol, 1e-2f);
  }
  Buffer gshifted = gpu.Bf16(std::vector<float>(rows * out_cols + 1));
  gpu.Check(blas.Forward(gshifted.as<uint16_t>() + 1, gx.as<uint16_t>(), gw.as<uint16_t>(), gbias[0].as<uint16_t>(), N,
                         C, OC, gpu.stream()),
            "Matmul::Forward (output at 2 bytes)");
  searches.push_back(blas.algorithm_searches());
  std::vector<float> shifted = gpu.Read(gshifted), out(rows * out_cols);
  cpu::MatmulForward(out.data(), x.data(), w.data(), biases[0].data(), N, C, OC);
  Compare("matmul plans: output at 2 bytes", std::vector<float>(shifted.begin() + 1, shifted.end()), out, kBf16Rtol,
          1e-2f);
  // The next layer's backward into d(pre) and its bias gradient, twice from the same inputs into buffers that
  // start different: the second (whatever epilogue this cuBLASLt took, or declined, the first time) asks nothing
  // and writes what the first wrote.
  const int next = 40;
  Buffer gw2 = gpu.Bf16(Rounded(Random(size_t{next} * out_cols, 0.05f))), gdout = gpu.Bf16(Rounded(Random(rows * next)));
  std::vector<Buffer> gdpre, gdbias;
  for (int i = 0; i < 2; ++i) {
    gdpre.push_back(gpu.Bf16(Random(rows * out_cols)));
    gdbias.push_back(gpu.F32(std::vector<float>(out_cols)));
    gpu.Check(blas.BackwardGelu(gdpre[i].as<uint16_t>(), gdbias[i].as<float>(), nullptr, nullptr, gdout.as<uint16_t>(),
                                gact[0].as<uint16_t>(), gpre[0].as<uint16_t>(), gw2.as<uint16_t>(), N, OC, next,
                                gpu.stream()),
              "Matmul::BackwardGelu");
    searches.push_back(blas.algorithm_searches());
  }
  Compare("matmul plans: dgelu again, dpre", gpu.Read(gdpre[1]), gpu.Read(gdpre[0]), 0.0f, 0.0f);
  Compare("matmul plans: dgelu again, dpre bias", gpu.Read(gdbias[1]), gpu.Read(gdbias[0]), 0.0f, 0.0f);
  const bool first_searched = searches[1] > searches[0], again_none = searches[2] == searches[1],
             shifted_searched = searches[3] > searches[2], backward_again_none = searches[5] == searches[4];
  const bool ok = first_searched && again_none && shifted_searched && backward_again_none;
  std::printf("  %-34s %s  heuristic asked %lld, %lld, %lld; backward %lld, %lld time(s)\n", "matmul plans",
              ok ? "ok  " : "FAIL", static_cast<long long>(searches[1] - searches[0]),
              static_cast<long long>(searches[2] - searches[1]), static_cast<long long>(searches[3] - searches[2]),
              static_cast<long long>(searches[4] - searches[3]), static_cast<long long>(searches[5] - searches[4]));
  if (!ok) ++g_failures;
}

// With timing on (the default; off with SRUNWAY_GEMM_TUNE=0) every product above ran with the algorithm its timing
// chose, and matched the CPU (a weight gradient, which adds into its output, gained its product once, not once per
// timed run). On the emulated GPU told to slow one algorithm down (FAKE_CUBLASLT_SLOW_ALGORITHM=0, the heuristic's
// first), every timed product must have kept another.
void MatmulTuning(cuda::Matmul& blas) {
  const char* slow = std::getenv("FAKE_CUBLASLT_SLOW_ALGORITHM");
  const bool avoided_slow = slow == nullptr || std::string_view(slow) != "0" ||
                            (blas.tuned_products() > 0 && blas.tuned_changes() == blas.tuned_products());
  std::printf("  %-34s %s  %lld products timed, %lld kept another algorithm than the heuristic's first\n",
              "matmul tuning", avoided_slow ? "ok  " : "FAIL", static_cast<long long>(blas.tuned_products()),
              static_cast<long long>(blas.tuned_changes()));
  if (!avoided_slow) ++g_failures;
}

// What tuning chose is kept (as a checkpoint keeps it) and given to another Matmul, whose same products take those
// choices instead of being timed: Choices() names them, the second Matmul times none of them and its choices are
// the first's; choices made on another GPU, or malformed, are refused and taken for none.
void MatmulChoices(Gpu& gpu, cuda::Matmul& blas) {
  const srunway::common::Json first = blas.Choices();
  auto again = cuda::Matmul::Open(gpu.device());
  gpu.Check(again.status(), "cuBLASLt");
  cuda::Matmul& second = **again;
  srunway::common::Json elsewhere = first, malformed = first, mistyped = first;
  bool refused = false;
  if (first.is_object()) {
    elsewhere["gpu"] = "another GPU";
    malformed["products"].begin().value() = {5, 2};
    mistyped["gpu"] = 7;
    refused = second.KeepChoices(elsewhere).code() == srunway::common::StatusCode::kFailedPrecondition &&
              second.KeepChoices(malformed).code() == srunway::common::StatusCode::kDataLoss &&
              second.KeepChoices(mistyped).code() == srunway::common::StatusCode::kDataLoss;
  }
  const bool kept = first.is_object() && second.KeepChoices(first).ok();
  Matmul(gpu, second, 256, 768, 2304, true);
  Matmul(gpu, second, 100, 96, 40, false);
  const srunway::common::Json now = second.Choices();
  bool same = now.is_object() && first.is_object();
  if (same) {
    for (const auto& [key, choice] : now["products"].items()) {
      same = same && first["products"].contains(key) && first["products"][key] == choice;
    }
  }
  const bool ok = refused && kept && same && second.kept_products() > 0 && second.tuned_products() == 0;
  std::printf("  %-34s %s  %zu kept, %lld products took them, %lld timed\n", "matmul choices kept",
              ok ? "ok  " : "FAIL", first.is_object() ? first["products"].size() : size_t{0},
              static_cast<long long>(second.kept_products()), static_cast<long long>(second.tuned_products()));
  if (!ok) ++g_failures;
}

// --disable-bf16-reduced-precision-matmul (Matmul::set_fp32_split_k_sums): a long product (k 4096, where cuBLASLt
// may split k) whose bf16 outputs, the forward's and dinp's, then round once, from fp32 sums: within 2^-8 of
// OpenBLAS's, atol 1e-4 (the fp32 sums' order). The default Matmul's are printed beside; on the emulated GPU told to
// add split-K halves in bf16 (FAKE_CUBLASLT_SPLIT_K=1) they must leave that bound, or the check above proves nothing.
// Choices made one way are refused by a Matmul of the other (FailedPrecondition: timed anew).
void MatmulSplitKSums(Gpu& gpu) {
  constexpr int N = 64, C = 4096, OC = 128;
  const auto x = Rounded(Random(static_cast<size_t>(N) * C)), w = Rounded(Random(static_cast<size_t>(OC) * C, 0.05f));
  const auto dout = Rounded(Random(static_cast<size_t>(N) * OC));
  std::vector<float> out(static_cast<size_t>(N) * OC), dx(static_cast<size_t>(N) * C), dw(static_cast<size_t>(OC) * C);
  cpu::MatmulForward(out.data(), x.data(), w.data(), nullptr, N, C, OC);
  cpu::MatmulBackward(dx.data(), dw.data(), nullptr, dout.data(), x.data(), w.data(), N, C, OC);
  Buffer gx = gpu.Bf16(x), gw = gpu.Bf16(w), gdout = gpu.Bf16(dout);
  // How many of a Matmul's forward and dinp elements are outside one rounding of OpenBLAS's (Compare's bound).
  auto outside = [](const std::vector<float>& got, const std::vector<float>& want) {
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += std::fabs(got[i] - want[i]) > 1e-4f + std::fabs(want[i]) / 256;
    return bad;
  };
  std::vector<srunway::common::Json> choices;
  size_t default_outside = 0;
  for (bool fp32 : {true, false}) {
    auto blas = cuda::Matmul::Open(gpu.device());
    gpu.Check(blas.status(), "cuBLASLt");
    (*blas)->set_fp32_split_k_sums(fp32);
    Buffer gout = gpu.Bf16(std::vector<float>(out.size())), gdx = gpu.Bf16(std::vector<float>(dx.size()));
    gpu.Check((*blas)->Forward(gout.as<uint16_t>(), gx.as<uint16_t>(), gw.as<uint16_t>(), nullptr, N, C, OC,
                               gpu.stream()), "Matmul::Forward");
    gpu.Check((*blas)->Backward(gdx.as<uint16_t>(), nullptr, nullptr, gdout.as<uint16_t>(), gx.as<uint16_t>(),
                                gw.as<uint16_t>(), N, C, OC, gpu.stream()),
              "Matmul::Backward");
    if (fp32) {
      Compare("matmul split-K sums fp32, forward", gpu.Read(gout), out, 1.0f / 256, 1e-4f);
      Compare("matmul split-K sums fp32, dinp", gpu.Read(gdx), dx, 1.0f / 256, 1e-4f);
    } else {
      default_outside = outside(gpu.Read(gout), out) + outside(gpu.Read(gdx), dx);
    }
    choices.push_back((*blas)->Choices());
    if (!fp32 && choices[0].is_object() && choices[1].is_object()) {
      const bool marked = choices[0].value("split_k_sums", "") == "fp32" && !choices[1].contains("split_k_sums");
      const bool refused = (*blas)->KeepChoices(choices[0]).code() == srunway::common::StatusCode::kFailedPrecondition;
      (*blas)->set_fp32_split_k_sums(true);
      const bool refused_back =
          (*blas)->KeepChoices(choices[1]).code() == srunway::common::StatusCode::kFailedPrecondition;
      const bool taken = (*blas)->KeepChoices(choices[0]).ok();
      const bool ok = marked && refused && refused_back && taken;
      std::printf("  %-34s %s  marked %d, refused by the default %d and by fp32 %d, taken by fp32 %d\n",
                  "matmul split-K choices", ok ? "ok  " : "FAIL", marked, refused, refused_back, taken);
      if (!ok) ++g_failures;
    }
  }
  const char* split_k = std::getenv("FAKE_CUBLASLT_SPLIT_K");
  const bool must_differ = split_k != nullptr && std::string_view(split_k) == "1";
  const bool ok = !must_differ || default_outside > 0;
  std::printf("  %-34s %s  %zu of %zu outside one rounding with bf16 split-K sums allowed%s\n",
              "matmul split-K sums default", ok ? "ok  " : "FAIL", default_outside, out.size() + dx.size(),
              must_differ ? " (the stand-in adds halves in bf16: must be some)" : "");
  if (!ok) ++g_failures;
}

// Two steps of optim/adamw.cc's AdamW over gpt-tiny's parameters, tensor by tensor on the GPU (decay on matrices
// and embeddings, not on norms and biases); the gradients scaled by 0.5 as clipping would.
void AdamW(Gpu& gpu) {
  auto config = srunway::trainer::Preset("gpt-tiny");
  gpu.Check(config.status(), "Preset");
  const srunway::trainer::ParamLayout layout(*config);
  const size_t n = static_cast<size_t>(layout.numel());
  srunway::trainer::AdamWConfig adam{0.9f, 0.95f, 1e-8f, 0.1f};
  srunway::trainer::AdamW reference(layout, adam);
  auto params = Random(n, 0.02f);
  Buffer gp = gpu.F32(params), gm = gpu.F32(std::vector<float>(n)), gv = gpu.F32(std::vector<float>(n));
  Buffer gbf16 = gpu.Bf16(std::vector<float>(n));
  const float lr = 6e-4f;
  for (int64_t step = 1; step <= 2; ++step) {
    auto grads = Random(n, 0.01f);
    Buffer gg = gpu.F32(grads);
    for (float& g : grads) g *= 0.5f;
    reference.Step(params, grads, lr, step);
    const double bias1 = 1.0 - std::pow(static_cast<double>(adam.beta1), static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(static_cast<double>(adam.beta2), static_cast<double>(step));
    for (const auto& tensor : layout.tensors()) {
      const int64_t at = tensor.offset;
      gpu.Launched(cuda::AdamW(gp.as<float>() + at, gbf16.as<uint16_t>() + at, gg.as<float>() + at, gm.as<float>() + at,
                           gv.as<float>() + at, tensor.numel, adam.beta1, adam.beta2, adam.eps,
                           tensor.decay ? 1.0f - lr * adam.weight_decay : 1.0f, static_cast<float>(lr / bias1),
                           static_cast<float>(std::sqrt(bias2)), 0.5f, gpu.stream()), "AdamW");
    }
  }
  Compare("adamw parameters", gpu.Read(gp), params, 1e-5f, 1e-7f);
  Compare("adamw first moment", gpu.Read(gm), std::vector<float>(reference.m().begin(), reference.m().end()), 1e-5f,
          1e-7f);
  Compare("adamw second moment", gpu.Read(gv), std::vector<float>(reference.v().begin(), reference.v().end()), 1e-5f,
          1e-10f);
  Compare("adamw bf16 parameters", gpu.Read(gbf16), params, kBf16Rtol, 0.0f);
}

// The gradient norm's sum of squares on the device against the host's (optim/schedule.cc): more blocks of 4096
// values than the final sum's threads, so that some threads add two blocks' sums, and a last block part full.
void SumOfSquares(Gpu& gpu) {
  const int64_t n = 1030 * cuda::kSumOfSquaresBlock + 77;
  const auto values = Random(static_cast<size_t>(n));
  const size_t blocks = static_cast<size_t>(cuda::SumOfSquaresBlocks(n));
  Buffer gvalues = gpu.F32(values), partials = gpu.F32(std::vector<float>(2 * blocks)), total = gpu.F32({-1, -1});
  gpu.Launched(cuda::SumOfSquares(total.as<double>(), partials.as<double>(), gvalues.as<float>(), n, gpu.stream()),
               "SumOfSquares");
  const std::vector<float> bits = gpu.Read(total);
  double got = 0;
  std::memcpy(&got, bits.data(), sizeof(got));
  const double want = srunway::trainer::SumOfSquares(values);
  const double error = std::fabs(got - want) / want;
  std::printf("  %-34s %s   gpu %.17g cpu %.17g (relative %.1e)\n", "sum of squares", error <= 1e-12 ? "ok  " : "FAIL",
              got, want, error);
  if (!(error <= 1e-12)) ++g_failures;

  // The zeros among them (--log-num-zeros-in-grad), -0 too: exactly the host's count.
  auto sparse = values;
  for (size_t i = 0; i < sparse.size(); i += 3) sparse[i] = i % 2 == 0 ? 0.0f : -0.0f;
  Buffer gsparse = gpu.F32(sparse);
  gpu.Launched(cuda::CountZeros(total.as<double>(), partials.as<double>(), gsparse.as<float>(), n, gpu.stream()),
               "CountZeros");
  const std::vector<float> count_bits = gpu.Read(total);
  double zeros = 0;
  std::memcpy(&zeros, count_bits.data(), sizeof(zeros));
  const auto want_zeros = static_cast<double>(std::count(sparse.begin(), sparse.end(), 0.0f));
  std::printf("  %-34s %s   gpu %.0f cpu %.0f\n", "count of zeros", zeros == want_zeros ? "ok  " : "FAIL", zeros,
              want_zeros);
  if (zeros != want_zeros) ++g_failures;
}

// Runs that the vector kernel cannot take whole, against the host's update: one that starts off a 16-byte boundary
// (the scalar kernel alone) and one that starts on it with a tail of three (the vector kernel, then the scalar).
void AdamWAlignments(Gpu& gpu) {
  cpu::AdamWArgs args;
  args.beta2 = 0.95f;
  args.decay = 0.9999f;
  args.step_size = 1e-3f;
  args.bias2_sqrt = 0.3f;
  args.grad_scale = 0.5f;
  constexpr int64_t kCount = 1003;
  for (const int64_t offset : {1, 4}) {
    const size_t n = static_cast<size_t>(offset + kCount);
    auto params = Random(n, 0.02f), grads = Random(n, 0.01f), m = Random(n, 0.001f), v = Random(n, 1e-4f);
    for (float& x : v) x *= x;
    Buffer gp = gpu.F32(params), gg = gpu.F32(grads), gm = gpu.F32(m), gv = gpu.F32(v);
    Buffer gbf16 = gpu.Bf16(std::vector<float>(n));
    gpu.Launched(cuda::AdamW(gp.as<float>() + offset, gbf16.as<uint16_t>() + offset, gg.as<float>() + offset,
                             gm.as<float>() + offset, gv.as<float>() + offset, kCount, args.beta1, args.beta2, args.eps,
                             args.decay, args.step_size, args.bias2_sqrt, args.grad_scale, gpu.stream()),
                 "AdamW");
    cpu::AdamWUpdate(params.data() + offset, grads.data() + offset, m.data() + offset, v.data() + offset, kCount, args);
    const std::string at = "adamw from element " + std::to_string(offset) + " ";
    Compare(at + "parameters", gpu.Read(gp), params, 1e-5f, 1e-7f);
    Compare(at + "first moment", gpu.Read(gm), m, 1e-5f, 1e-7f);
    Compare(at + "second moment", gpu.Read(gv), v, 1e-5f, 1e-10f);
    std::vector<float> rounded(n, 0.0f);  // the elements before the run are never written
    for (size_t i = static_cast<size_t>(offset); i < n; ++i) rounded[i] = params[i];
    Compare(at + "bf16 parameters", gpu.Read(gbf16), rounded, kBf16Rtol, 0.0f);
  }
}

}  // namespace

// cuda_ops [race] [kernels] [attention] [cudnn [cudnn-gpt2]] [matmul] [split-k]: those groups of checks (every
// group but the cudnn ones when none is named; cudnn: cuDNN's fused attention, which must load and have an engine for
// every shape; cudnn-gpt2: also at GPT-2's heads and length, a minute and a half on the emulated GPU's host engine).
// race: the race check's cases (ThreadSanitizer's copy of the kernels, tests/emulated_gpu): every kernel down each
// of its paths, without the cases that differ from another only in the values a thread computes (RoPE's scalings)
// or in size past what the paths need (a batch's second sequence, GPT-2's classifier rows, a million dropped
// elements, the 124M's GEMMs).
int main(int argc, char** argv) {
  const std::set<std::string> known = {"race", "kernels", "attention", "cudnn", "cudnn-gpt2", "matmul", "split-k"};
  std::set<std::string> groups(argv + 1, argv + argc);
  for (const std::string& group : groups) {
    if (!known.contains(group)) {
      std::fprintf(stderr,
                   "cuda_ops: unknown group '%s' (race, kernels, attention, cudnn, cudnn-gpt2, matmul, split-k)\n",
                   group.c_str());
      return 2;
    }
  }
  g_race = groups.erase("race") > 0;
  if (g_race && (groups.contains("cudnn") || groups.contains("cudnn-gpt2"))) {
    std::fprintf(stderr, "cuda_ops: race takes no cudnn group (cuDNN's kernels are not ours to check)\n");
    return 2;
  }
  auto wanted = [&](const char* group) {
    return groups.contains(group) || (groups.empty() && !std::string_view(group).starts_with("cudnn"));
  };
  Gpu gpu("cuda_ops");
  std::printf("cuda_ops: %s\n", gpu.device().name().c_str());
  if (wanted("kernels")) {
    Residual(gpu);
    CopyRows(gpu);
    Activation(gpu, "gelu", cuda::GeluForward, cuda::GeluBackward, cpu::GeluForward, cpu::GeluBackward);
    Activation(gpu, "exact gelu", cuda::GeluErfForward, cuda::GeluErfBackward, cpu::GeluErfForward,
               cpu::GeluErfBackward);
    Activation(gpu, "squared relu", cuda::SquaredReluForward, cuda::SquaredReluBackward, cpu::SquaredReluForward,
               cpu::SquaredReluBackward);
    Embedding(gpu, false);
    Embedding(gpu, true);
    Embedding(gpu, false, 45.25f);  // Gemma 2B's sqrt(2048) in bf16
    LayerNorm(gpu, 512, 768);
    LayerNorm(gpu, 64, 8192);
    LayerNorm(gpu, 100, 300);  // a last block of rows part full, a last slab of columns part full, idle lanes
    LayerNorm(gpu, 70, 520);   // 16-byte columns, a last slab of them part full
    LayerNorm(gpu, 40, 2048);  // the widest rows a warp holds in registers (the 1.3B's)
    LayerNorm(gpu, 2200, 264);  // more rows than the resident warps: a warp takes several
    LayerNorm(gpu, 300, 16);   // the q and k norms' (--qk-layernorm) rows of a head: the tiny presets'
    LayerNorm(gpu, 300, 128);  // and the larger models'
    LayerNorm(gpu, 512, 768, 1);  // --apply-layernorm-1p: the rows in registers, in slabs, and wider than shared
    LayerNorm(gpu, 100, 300, 1);
    LayerNorm(gpu, 64, 8192, 1);
    AdamW(gpu);
    AdamWAlignments(gpu);
    SumOfSquares(gpu);
    RmsNorm(gpu, 512, 768);
    RmsNorm(gpu, 32, 16384);
    RmsNorm(gpu, 77, 300);
    RmsNorm(gpu, 33, 264);
    RmsNorm(gpu, 24, 2048);
    RmsNorm(gpu, 2200, 264);
    RmsNorm(gpu, 300, 16);
    RmsNorm(gpu, 300, 128);
    RmsNorm(gpu, 512, 768, 1);
    RmsNorm(gpu, 77, 300, 1);
    RmsNorm(gpu, 32, 16384, 1);
    ResidualNorm(gpu, 512, 768);
    ResidualNorm(gpu, 40, 2048);  // the widest rows held in registers
    ResidualNorm(gpu, 16, 2056);  // 16-byte columns, too wide for registers
    ResidualNorm(gpu, 30, 300);   // 2-byte columns
    ResidualNorm(gpu, 40, 2048, 1);
    ResidualNorm(gpu, 30, 300, 1);
    Swiglu(gpu);
    Swiglu(gpu, {srunway::trainer::kQuickGeluAlpha, 1.0f, 1.5f});  // gpt-oss's offset; a clamp some values pass
    Swiglu(gpu, {.gelu = true});                                    // Gemma's
    Rope(gpu, false);
    Rope(gpu, true);
    Rope(gpu, true, {10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 1.0f, 24});  // --rotary-percent 0.375: 24 of 64 turn
    Rope(gpu, false, {10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 1.0f, 0, true});  // --rotary-interleaved
    Rope(gpu, false, {10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 1.0f, 40, true});  // both
  }
  if (wanted("kernels") && !g_race) {  // the scalings: other frequencies down the same paths
    // Wavelengths past 64 positions slowed 8 times, under 16 kept, between interpolated: all three kinds of pair.
    Rope(gpu, false, {500000.0f, 8.0f, 1.0f, 4.0f, 64.0f});
    Rope(gpu, false, {10000.0f, 0.0f, 1.0f, 4.0f, 8192.0f, 4.0f});  // linear: every wavelength 4 times longer
    {  // gpt-oss's YaRN (theta 150000, 32x over 4096 positions, unrounded): a ramp over pairs 8.1 to 17.4, q and k
       // times 1.35
      srunway::trainer::ModelConfig gpt_oss = *srunway::trainer::Preset("llama-tiny");
      srunway::trainer::SetHeadDim(gpt_oss, 64);
      gpt_oss.rope_theta = 150000.0f;
      gpt_oss.yarn = srunway::trainer::YarnScaling{.factor = 32.0f, .round_to_int = false};
      Rope(gpu, true, gpt_oss.rope(gpt_oss.seq_len));
    }
    {  // LongRoPE over Phi-4-mini's share of heads of 64 (48 of them: 24 pairs), a factor of its own per pair, q and k
       // times 1.19 (Phi-3's 32x)
      srunway::trainer::ModelConfig phi = *srunway::trainer::Preset("llama-tiny");
      srunway::trainer::SetHeadDim(phi, 64);
      phi.rotary_percent = 0.75;
      srunway::trainer::LongRope longrope;
      longrope.original_positions = 256;
      longrope.attention_factor = 1.19f;
      for (int i = 0; i < 24; ++i) {
        longrope.short_factor.push_back(1.0f + 0.05f * i);
        longrope.long_factor.push_back(1.0f + 2.0f * i);
      }
      phi.longrope = longrope;
      Rope(gpu, true, phi.rope(512));  // past 256 positions: the long factors
    }
  }
  if (wanted("kernels")) {
    Dropout(gpu, g_race ? 1 << 16 : 1 << 20);
    Classifier(gpu, g_race ? 8 : 64, 50257);  // a block a row
    Classifier(gpu, 100, 512);
    Classifier(gpu, 16, 50304);  // GPT-2's padded vocabulary: rows read 16 bytes at a time
  }
  if (wanted("attention")) {
    Attention(gpu, 2, 128, 4, 2, 64, 0.0f);
    Attention(gpu, 2, 128, 4, 2, 64, 0.1f);
    Attention(gpu, 1, 200, 2, 2, 128, 0.0f);
    Attention(gpu, 1, 77, 4, 1, 32, 0.0f);  // every tiled head size, lengths that end mid-tile, 4 heads per kv
    Attention(gpu, 2, 130, 6, 2, 96, 0.1f);
    Attention(gpu, 2, 100, 4, 2, 16, 0.1f);  // the tiny presets' head size
    Attention(gpu, 2, 130, 3, 3, 64, 0.1f);  // a k/v head per query head: dK and dV stored by their block
    // Several documents in a sequence (--reset-attention-mask): forward walks that start past the first key tile,
    // backward walks that stop before the last query tile.
    Attention(gpu, 2, 260, 4, 2, 64, 0.1f, nullptr, /*documents=*/true);
    Attention(gpu, 2, 150, 3, 3, 16, 0.0f, nullptr, /*documents=*/true);
    Attention(gpu, 1, 200, 2, 1, 128, 0.0f, nullptr, /*documents=*/true);
    Attention(gpu, 2, 100, 2, 2, 96, 0.0f, nullptr, /*documents=*/true);
    // A sliding window (--window-size): walks that start and stop inside a sequence of one document; within
    // documents, the later of the two starts bounds each query's keys.
    Attention(gpu, 1, 200, 2, 1, 64, 0.0f, nullptr, /*documents=*/false, /*window=*/70);
    Attention(gpu, 2, 150, 3, 3, 16, 0.1f, nullptr, /*documents=*/true, /*window=*/40);
    // Sinks (--softmax-type learnable; off-by-one's are zeros): every kernel's forward, and their gradients.
    Attention(gpu, 2, 128, 4, 2, 64, 0.1f, nullptr, /*documents=*/false, /*window=*/-1, /*sinks=*/true);
    Attention(gpu, 1, 200, 2, 2, 128, 0.0f, nullptr, /*documents=*/false, /*window=*/-1, /*sinks=*/true);
    Attention(gpu, 2, 150, 2, 1, 32, 0.0f, nullptr, /*documents=*/true, /*window=*/30, /*sinks=*/true);
  }
  if (wanted("cudnn")) {
    auto cudnn = cuda::CudnnAttention::Open(gpu.device());
    gpu.Check(cudnn.status(), "cuDNN");
    std::printf("cuda_ops: cuDNN %zu from %s\n", (*cudnn)->version(), (*cudnn)->library_path().c_str());
    // For cudnn_graph's engine check on machines without this GPU.
    auto device_json = (*cudnn)->DeviceJson();
    std::printf("cuda_ops: cuDNN's properties of this GPU: %s\n",
                device_json.ok() ? device_json->c_str() : std::string(device_json.status().message()).c_str());
    Attention(gpu, 2, 128, 4, 4, 64, 0.0f, cudnn->get());
    Attention(gpu, 2, 128, 4, 2, 64, 0.0f, cudnn->get());  // grouped K/V heads: dK and dV summed per group
    Attention(gpu, 1, 200, 2, 2, 128, 0.0f, cudnn->get());
    Attention(gpu, 1, 77, 4, 1, 32, 0.0f, cudnn->get());
    if (wanted("cudnn-gpt2")) Attention(gpu, 2, 1024, 12, 12, 64, 0.0f, cudnn->get());  // GPT-2's heads and length
  }
  if (wanted("matmul")) {
    auto blas = cuda::Matmul::Open(gpu.device());
    gpu.Check(blas.status(), "cuBLASLt");
    std::printf("cuda_ops: cuBLASLt from %s\n", (*blas)->library_path().c_str());
    if (!g_race) Matmul(gpu, **blas, 256, 768, 2304, true);
    Matmul(gpu, **blas, 100, 96, 40, false);
    Matmul(gpu, **blas, 33, 64, 8, true);
    // The bias gradient kernel over four chunks of rows, 8 columns a lane, and one column a lane (36 is no
    // multiple of 8) over two chunks; then the same by BGRADB where cuBLASLt has it.
    for (bool epilogues : {false, true}) {
      Matmul(gpu, **blas, 1000, 64, 40, true, epilogues);
      Matmul(gpu, **blas, 300, 64, 36, true, epilogues);
    }
    // On the emulated GPU told to decline the GELU epilogues (FAKE_CUBLASLT_DECLINE), their fallbacks are the test;
    // told to decline only DGELU_BGRAD's fp32 sums, its bf16 sums are.
    const char* declined = std::getenv("FAKE_CUBLASLT_DECLINE");
    const bool bf16_sums_only = declined != nullptr && std::string(declined) == "DGELU_BGRAD:F32";
    if (!g_race) {
      MatmulGelu(gpu, **blas, 256, 768, 3072, true, /*must_fuse=*/declined == nullptr || bf16_sums_only,
                 /*must_sum_bf16=*/bf16_sums_only);
      MatmulGelu(gpu, **blas, 256, 768, 3072, false);
    } else {
      MatmulGelu(gpu, **blas, 50, 64, 36, false);  // the GELU kernels
    }
    MatmulGelu(gpu, **blas, 33, 64, 40, true);
    MatmulGelu(gpu, **blas, 50, 64, 36, true);
    MatmulPlans(gpu, **blas);
    if ((*blas)->tuning() && !g_race) {  // the host's choices, of products above that race leaves out
      MatmulTuning(**blas);
      MatmulChoices(gpu, **blas);
    }
  }
  if (wanted("split-k")) MatmulSplitKSums(gpu);
  std::printf("cuda_ops: %s\n", g_failures == 0 ? "every operation matches its CPU twin" : "MISMATCHES above");
  return g_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
