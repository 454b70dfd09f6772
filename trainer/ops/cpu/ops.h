// CPU reference operations of the trainer, fp32, forward and backward; one operation per file beside this header.
// Conventions (as in llm.c): N = B * T rows of a [B, T, ...] tensor; Linear weights are [out, in]. Backwards
// *add* into parameter gradients (accumulated over micro-batches). Input gradients: the norms' and the residual's
// backward add into them (the residual stream's gradient, which the skip connection also carries); the other
// backwards (matmul, attention, GELU, SwiGLU) write theirs, so the caller zeroes nothing before them.
#pragma once

#include <cstdint>

#include "trainer/ops/glu.h"
#include "trainer/ops/rope_frequency.h"

namespace srunway::trainer::cpu {

// Several documents in one sequence (Megatron's --reset-position-ids and --reset-attention-mask), each [B, T] in
// the memory of the tensors they go with: `positions`, each token's position in its own document (where learned
// position embeddings and RoPE take it); `starts`, the first position of each token's document in its sequence,
// which bounds the keys it attends to from below. A null pointer is one document per sequence: positions t, starts 0.
struct Documents {
  const int32_t* positions = nullptr;
  const int32_t* starts = nullptr;
};

// embedding.cc: out[b,t,:] = scale wte[token] (+ wpe[position] when wpe is not null; position t, or
// docs.positions'); `scale` is ModelConfig::embedding_multiplier.
void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C,
                      float scale, const Documents& docs = {});
void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int B, int T, int C,
                       float scale, const Documents& docs = {});

// layernorm.cc: LayerNorm over the last dimension, times weight + weight_offset (1 where the weights are stored as
// their difference from 1, Megatron's --apply-layernorm-1p; else 0); mean and rstd ([N]) are saved for the backward.
void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                      int N, int C, float eps, float weight_offset = 0);
void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, const float* mean, const float* rstd, int N, int C,
                       float weight_offset = 0);

// rmsnorm.cc: RMSNorm (Llama): out = inp * rstd * (weight + weight_offset), rstd = 1 / sqrt(mean(inp^2) + eps).
void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                    float weight_offset = 0);
void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                     const float* rstd, int N, int C, float weight_offset = 0);

// matmul.cc: out[N, OC] = inp[N, C] @ weight[OC, C]^T (+ bias[OC]), through BLAS.
void MatmulForward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
// dinp = dout @ weight (written); dweight += dout^T @ inp (written over it with write_dweight); dbias += the column
// sums of dout.
void MatmulBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int N, int C, int OC, bool write_dweight = false);
// dbias[OC] += the column sums of dout[N, OC]: MatmulBackward's bias gradient alone.
void BiasBackward(float* dbias, const float* dout, int N, int OC);

// dropout.cc: inverted dropout (kept elements scaled by 1 / (1 - p)) with a mask that is a pure function of a
// key (from the seed, the optimizer step and the site in the model) and each element's index in the global batch,
// so the backward recomputes it and any split of the batch over ranks drops the same elements.
struct DropoutSite {
  float p = 0;             // 0: no dropout
  uint64_t key = 0;
  int64_t first_index = 0;  // the global index of element 0
};
uint64_t DropoutKey(uint64_t seed, int64_t step, int site);
bool DropoutKeeps(uint64_t key, uint64_t index, float p);
void DropoutForward(float* x, int64_t n, const DropoutSite& site);   // in place
void DropoutBackward(float* dx, int64_t n, const DropoutSite& site);  // in place, the forward's mask and scale

// attention.cc: causal softmax attention with grouped-query heads. qkv rows are [q heads | k heads | v heads]
// (H, KV and KV heads of hd values); query head h reads kv head h / (H / KV). att [B, H, T, T] keeps the
// probabilities (zero above the diagonal) for the backward; out is [B, T, H * hd]. `dropout` (attention dropout)
// applies to the probabilities as they weight the values; its indices are those of att. With docs.starts, query t
// attends to keys starts[t]..t alone (its probabilities before them are 0). With `sinks` ([H], not null: Megatron's
// --softmax-type off-by-one or learnable), each row's softmax has one more term, exp(sinks[h]), in its denominator
// (a key of that score and value 0), so its probabilities sum to less than 1. The backward needs nothing more
// for dqkv; with `dsinks` ([H], not null: the sinks are learned) it adds their gradients there.
void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int H, int KV, int hd,
                      const DropoutSite& dropout = {}, const Documents& docs = {}, const float* sinks = nullptr);
void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int H, int KV,
                       int hd, const DropoutSite& dropout = {}, const Documents& docs = {}, float* dsinks = nullptr);

// rope.cc: rotary position embedding on the q and k heads of qkv, in place, "rotate half" convention (GPT-NeoX,
// Hugging Face Llama): pairs (i, i + r/2) turn by position * RopeInverseFrequency(rope, i, r), position t or
// docs.positions', r = RotaryDim(rope, hd) (the whole head unless --rotary-percent says less; the dimensions past r
// are left as they are); with rope.interleaved the pairs are (2i, 2i + 1) instead. The backward turns gradients back.
void RopeForward(float* qkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                 const Documents& docs = {});
void RopeBackward(float* dqkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                  const Documents& docs = {});

// copy_rows.cc: rows x cols values from rows `src_ld` apart into rows `dst_ld` apart (the regions do not overlap).
void CopyRows(float* dst, int64_t dst_ld, const float* src, int64_t src_ld, int64_t rows, int64_t cols);

// gelu.cc: GELU, tanh approximation (GPT-2; PyTorch's gelu(approximate="tanh")), and exact (PyTorch's gelu).
void GeluForward(float* out, const float* inp, int64_t n);
void GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n);
void GeluErfForward(float* out, const float* inp, int64_t n);
void GeluErfBackward(float* dinp, const float* inp, const float* dout, int64_t n);

// squared_relu.cc: relu(x)^2 (Megatron's --squared-relu; Hugging Face's relu2).
void SquaredReluForward(float* out, const float* inp, int64_t n);
void SquaredReluBackward(float* dinp, const float* inp, const float* dout, int64_t n);

// swiglu.cc: out[N, F] = silu(inp[:, :F]) * inp[:, F:] for inp [N, 2F] (gate, then up); with `glu`, ops/glu.h's
// other gated activations (--quick-geglu, --glu-linear-offset, --activation-func-clamp-value).
void SwigluForward(float* out, const float* inp, int N, int F, const Glu& glu = {});
void SwigluBackward(float* dinp, const float* inp, const float* dout, int N, int F, const Glu& glu = {});

// residual.cc: out = a + b; the backward adds dout to both inputs' gradients.
void ResidualForward(float* out, const float* a, const float* b, int64_t n);
void ResidualBackward(float* da, float* db, const float* dout, int64_t n);

// cross_entropy.cc: turns logits [N, V] into probabilities in place and returns the mean loss over the N rows;
// losses[N] receives each row's loss. A negative target is a row without loss (0, and no gradient: --eod-mask-loss);
// one at V or above is the caller's bug (checked by the data layer).
double SoftmaxCrossEntropyForward(float* logits_to_probs, float* losses, const int32_t* targets, int N, int V);
// Turns probabilities into gradients in place: d logit = (p - onehot) * dloss, dloss being d(total)/d(row loss).
void SoftmaxCrossEntropyBackward(float* probs_to_dlogits, const int32_t* targets, int N, int V, float dloss);

// adamw.cc: one AdamW update of n elements in torch.optim.AdamW's order, on g * grad_scale (global-norm
// clipping). decay = 1 - lr * weight_decay (1 for norms and biases), step_size = lr / (1 - beta1^step),
// bias2_sqrt = sqrt(1 - beta2^step).
struct AdamWArgs {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float decay = 1.0f, step_size = 0.0f, bias2_sqrt = 1.0f, grad_scale = 1.0f;
};
void AdamWUpdate(float* p, const float* g, float* m, float* v, int64_t n, const AdamWArgs& args);

}  // namespace srunway::trainer::cpu
