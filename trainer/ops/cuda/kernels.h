// CUDA operations of the trainer, one per file beside this header, each the twin of the CPU operation of the same
// name in ops/cpu/ops.h (checked against it by the gpu suite's cuda_ops). Mixed precision: activations and the
// weights they are multiplied with are bf16; parameters, their gradients, optimizer state and the norms' saved
// mean and rstd are fp32; arithmetic is fp32. As on the CPU, backwards add into parameter gradients and the norms'
// and the residual's into their input gradients; the others write their input gradient.
// Plain C++: no CUDA type appears, so the model and the tests include it without nvcc. Every call is queued on
// `stream` (a CUstream, which is a cudaStream_t) and returns the launch's CUDA error code (0: queued);
// ErrorText names one.
#pragma once

#include <cstdint>

#include "trainer/ops/glu.h"
#include "trainer/ops/rope_frequency.h"

namespace srunway::trainer::cuda {

using bf16 = uint16_t;  // the bits of a __nv_bfloat16 (common::FloatToBFloat16 on the host)
using Stream = void*;

const char* ErrorText(int code);

// adamw.cu: one AdamW update of n elements in the order of optim/adamw.cc, on g * grad_scale (global-norm
// clipping). decay = 1 - lr * weight_decay, or 1 for norms and biases; step_size = lr / (1 - beta1^step);
// bias2_sqrt = sqrt(1 - beta2^step). When p_bf16 is not null it receives the updated parameters in bf16.
int AdamW(float* p, bf16* p_bf16, const float* g, float* m, float* v, int64_t n, float beta1, float beta2, float eps,
          float decay, float step_size, float bias2_sqrt, float grad_scale, Stream stream);

// norm.cu: *total = the sum of squares of n values in double, on the device, by fixed blocks of 4096 values
// (partials[b], SumOfSquaresBlocks(n) of them, as optim/schedule.cc's SumOfSquares) whose sums are added in a fixed
// order: the same total for the same values on every run.
constexpr int64_t kSumOfSquaresBlock = 4096;
inline int64_t SumOfSquaresBlocks(int64_t n) { return (n + kSumOfSquaresBlock - 1) / kSumOfSquaresBlock; }
int SumOfSquares(double* total, double* partials, const float* values, int64_t n, Stream stream);
// norm.cu: *total = how many of n values are zero (+0 or -0), counted as SumOfSquares sums (into as many partials).
int CountZeros(double* total, double* partials, const float* values, int64_t n, Stream stream);

// embedding.cu: out[b,t,:] = scale wte[token] (+ wpe[position] when wpe is not null; position t, or positions[b,t] where
// it is not null: several documents in a sequence, ops/cpu/ops.h's Documents); the backward adds into fp32 dwte
// (atomically: rows of repeated tokens meet in any order) and dwpe (in batch order; atomically with positions).
int EmbeddingForward(bf16* out, const int32_t* tokens, const int32_t* positions, const bf16* wte, const bf16* wpe,
                     int B, int T, int C, float scale, Stream stream);
int EmbeddingBackward(float* dwte, float* dwpe, const bf16* dout, const int32_t* tokens, const int32_t* positions,
                      int B, int T, int C, float scale, Stream stream);

// gelu.cu: GELU, tanh approximation, and exact (erf's); the backward writes dinp.
int GeluForward(bf16* out, const bf16* inp, int64_t n, Stream stream);
int GeluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream);
int GeluErfForward(bf16* out, const bf16* inp, int64_t n, Stream stream);
int GeluErfBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream);

// residual.cu: out = a + b; the backward adds dout into da and db.
int ResidualForward(bf16* out, const bf16* a, const bf16* b, int64_t n, Stream stream);
int ResidualBackward(bf16* da, bf16* db, const bf16* dout, int64_t n, Stream stream);

// layernorm.cu: LayerNorm over rows of C, one warp per row, times weight + weight_offset (1 where the weights are
// stored as their difference from 1, added in fp32; else 0); mean and rstd [N] saved in fp32. The backward adds
// into bf16 dinp and fp32 dweight and dbias (atomically, one add per block and channel).
int LayerNormForward(bf16* out, float* mean, float* rstd, const bf16* inp, const bf16* weight, const bf16* bias,
                     int N, int C, float eps, float weight_offset, Stream stream);
int LayerNormBackward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* mean, const float* rstd, int N, int C, float weight_offset, Stream stream);
// residual = a + b (as ResidualForward), then out = LayerNorm(residual), in one pass over each row.
int ResidualLayerNormForward(bf16* residual, bf16* out, float* mean, float* rstd, const bf16* a, const bf16* b,
                             const bf16* weight, const bf16* bias, int N, int C, float eps, float weight_offset,
                             Stream stream);

// rmsnorm.cu: RMSNorm (Llama), one warp per row, times weight + weight_offset as LayerNorm, rstd [N] saved in fp32;
// the backward adds into bf16 dinp and fp32 dweight (atomically, one add per block and channel).
int RmsNormForward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int N, int C, float eps,
                   float weight_offset, Stream stream);
int RmsNormBackward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                    const float* rstd, int N, int C, float weight_offset, Stream stream);
// residual = a + b, then out = RMSNorm(residual), in one pass over each row.
int ResidualRmsNormForward(bf16* residual, bf16* out, float* rstd, const bf16* a, const bf16* b, const bf16* weight,
                           int N, int C, float eps, float weight_offset, Stream stream);

// copy_rows.cu: rows x cols values from rows `src_ld` apart into rows `dst_ld` apart.
int CopyRows(bf16* dst, int64_t dst_ld, const bf16* src, int64_t src_ld, int64_t rows, int64_t cols,
             Stream stream);

// squared_relu.cu: relu(x)^2, and its backward 2 relu(x) dout.
int SquaredReluForward(bf16* out, const bf16* inp, int64_t n, Stream stream);
int SquaredReluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t n, Stream stream);

// swiglu.cu: out[N, F] = silu(inp[:, :F]) * inp[:, F:] for inp [N, 2F], or ops/glu.h's other gated activations;
// the backward writes dinp [N, 2F].
int SwigluForward(bf16* out, const bf16* inp, int N, int F, const Glu& glu, Stream stream);
int SwigluBackward(bf16* dinp, const bf16* inp, const bf16* dout, int N, int F, const Glu& glu, Stream stream);

// rope.cu: rotary position embedding of the q and k heads of qkv rows [(H + 2 KV) * hd], in place, "rotate
// half" pairing, at position t (or positions[b,t] where not null), by ops/rope_frequency.h's frequencies as the
// CPU's; the backward rotates gradients back.
int RopeForward(bf16* qkv, const int32_t* positions, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                Stream stream);
int RopeBackward(bf16* dqkv, const int32_t* positions, int B, int T, int H, int KV, int hd,
                 const RopeFrequencies& rope, Stream stream);

// dropout.cu: inverted dropout in place with the CPU's mask (the same hash of key and global element index, the
// same 24-bit comparison), so a GPU run drops exactly the elements a CPU run drops. p <= 0 does nothing.
int Dropout(bf16* x, int64_t n, float p, uint64_t key, int64_t first_index, Stream stream);

// classifier.cu: softmax cross-entropy, one block per row and one pass over its logits each way: ClassifierLosses
// writes losses[n] = -log softmax(logits[n])[target] and the row's log-sum-exp lse[n]; ClassifierGradients turns
// the logits into their gradients in place from lse, (softmax - onehot) * dloss (dloss = d(total loss)/d(row
// loss), e.g. 1 / rows per step), so the full-vocabulary probabilities never exist apart.
int ClassifierLosses(float* losses, float* lse, const bf16* logits, const int32_t* targets, int N, int V,
                     Stream stream);
int ClassifierGradients(bf16* logits_to_dlogits, const float* lse, const int32_t* targets, int N, int V, float dloss,
                        Stream stream);
// Both, in one kernel: each row's gradients right after its loss, while the row is still in L2.
int ClassifierLossesAndGradients(float* losses, float* lse, bf16* logits_to_dlogits, const int32_t* targets, int N,
                                 int V, float dloss, Stream stream);

// convert.cu: out[i] = bf16(in[i]), round to nearest even (the weights the bf16 operations read).
int ToBf16(bf16* out, const float* in, int64_t n, Stream stream);
int FromBf16(float* out, const bf16* in, int64_t n, Stream stream);

// attention.cu: causal attention with grouped-query heads, qkv rows [q heads | k heads | v heads] as on the CPU;
// out [B, T, H * hd]. Flash-style contract: no [T, T] matrix is kept, only the log-sum-exp of each query row's
// scores (lse [B, H, T], fp32), from which the backward recomputes the probabilities. Head sizes 16, 32, 64, 96, 128
// (with 16-byte aligned tensors) run tiled tensor-core kernels: flash_attention_mma.cu's (mma.sync, softmax in
// registers), or under SRUNWAY_ATTENTION=wmma flash_attention.cu's; others (a multiple of 32 up to 256), or every
// size under SRUNWAY_ATTENTION=simple, one warp per query row with an online softmax (correct, slow). Attention
// dropout, when p > 0, uses the CPU's mask at the CPU's indices (those of a [B, H, T, T] matrix after first_index).
// With `starts` ([B, T], not null: several documents in a sequence), query t attends to keys starts[b,t]..t alone,
// on the mma.sync kernels (whatever SRUNWAY_ATTENTION=wmma says) or the one warp per row. With `sinks` ([H], not
// null), each row's softmax has exp(sinks[h]) more in its denominator (ops/cpu/ops.h's AttentionForward), which
// the saved log-sum-exp includes, so that the backward's probabilities are the forward's; with dsinks ([H] fp32,
// not null: learned sinks) the backward adds the sinks' gradients there (the same sums every call).
// The backward writes dqkv (bf16) and needs `scratch` of AttentionBackwardScratch floats.
int64_t AttentionBackwardScratch(int B, int T, int H, int KV, int hd);
// Where in that scratch the backward leaves each query row's D = dout . out [B, H, T] (after dq, dk and dv's fp32
// sums), from which the sinks' gradients are made.
float* AttentionBackwardRowDots(float* scratch, int B, int T, int H, int KV, int hd);
// Which kernels attention runs at head size hd (for 16-byte aligned tensors; with `documents`, starts given):
// "mma.sync tiles", "WMMA tiles" or "one warp per query row"; null when none takes it.
const char* AttentionKernelName(int hd, bool documents = false);
int AttentionForward(bf16* out, float* lse, const bf16* qkv, int B, int T, int H, int KV, int hd, float dropout_p,
                     uint64_t dropout_key, int64_t dropout_first_index, const int32_t* starts, const bf16* sinks,
                     Stream stream);
int AttentionBackward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* out, const bf16* qkv, const float* lse,
                      int B, int T, int H, int KV, int hd, float dropout_p, uint64_t dropout_key,
                      int64_t dropout_first_index, const int32_t* starts, const bf16* sinks, float* dsinks,
                      Stream stream);

// SRUNWAY_ATTENTION, read once, is `name`: "simple", "wmma", "mma" (the mma.sync kernels alone), "cudnn"
// (cudnn_attention.h, else the mma.sync kernels), "auto" (cuDNN or the mma.sync kernels, whichever is faster, timed
// once per shape), or "" (unset: as "cudnn", except that a cuDNN that cannot be loaded is no warning).
bool AttentionIs(const char* name);

// flash_attention.cu: the tiled kernels behind AttentionForward/Backward, whether they take a call (dout and dqkv
// null for the forward), and which of them SRUNWAY_ATTENTION picks.
bool FlashAttentionSupported(int hd, const void* qkv, const void* out, const void* dout, const void* dqkv);
const char* FlashAttentionKernelName(bool documents);
int FlashAttentionForward(bf16* out, float* lse, const bf16* qkv, int B, int T, int H, int KV, int hd,
                          float dropout_p, uint64_t dropout_key, int64_t dropout_first_index, const int32_t* starts,
                          const bf16* sinks, Stream stream);
int FlashAttentionBackward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* out, const bf16* qkv,
                           const float* lse, int B, int T, int H, int KV, int hd, float dropout_p, uint64_t dropout_key,
                           int64_t dropout_first_index, const int32_t* starts, Stream stream);

// bias_grad.cu: dbias[OC] += the column sums of dout [N, OC], summed by chunks of rows into `scratch` (at least OC
// floats; more chunks run side by side with more) and then in chunk order, so the same every call; the bias
// part of the matmul backward (matmul.h), which lends it cuBLASLt's workspace.
int BiasGradient(float* dbias, const bf16* dout, int N, int OC, float* scratch, int64_t scratch_floats,
                 Stream stream);
// dbias[OC] += sums[OC]: a bias gradient summed elsewhere (cuBLASLt's DGELU_BGRAD writes its own, never adds).
int AddBiasGradient(float* dbias, const float* sums, int OC, Stream stream);
// The same from sums cuBLASLt wrote in bf16 (its default bias gradient type, D's, where it has no fp32 one).
int AddBf16BiasGradient(float* dbias, const bf16* sums, int OC, Stream stream);

}  // namespace srunway::trainer::cuda
