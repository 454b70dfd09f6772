// The operations the model is written against, once, for the host (ops/cpu, through NewCpuOps) and the GPU
// (ops/cuda). Tensors are pointers into the memory of the model's Device. On the host every tensor is fp32; on
// the GPU activations and the weights they meet are act_dtype() (bf16), and statistics (mean, rstd, saved
// attention state, losses) and parameter gradients are fp32 everywhere. Backwards add into parameter gradients
// (the Linear layers' weight gradients are written instead when told WeightGrad::kWrite) and, for the norms, into
// the input gradient (the residual stream's); the other backwards write their input gradient (see ops/cpu/ops.h). Calls only queue work; an error of the GPU's (a launch that failed) is kept and handed out by
// TakeError.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "trainer/device/device.h"
#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer {

using cpu::Documents;
using cpu::DropoutSite;

// Whether a Linear layer's backward adds its weight gradient into the buffer or writes it over what is there: the
// first backward of a step writes (Model::ZeroGrad leaves the weight matrices' gradients to it, a pass over most
// of the gradients fewer).
enum class WeightGrad { kAdd, kWrite };

class Ops {
 public:
  virtual ~Ops() = default;
  virtual DType act_dtype() const = 0;
  // Which implementations do the work, for the start-up log (attention at head size head_dim, masked by
  // `documents` where that is set; `gelu`: the model has GELU and biases, as GPT's, not Llama's).
  virtual std::string Describe(int head_dim, bool gelu, bool documents) const = 0;
  // Ok when attention takes head size head_dim here; else why, and what it takes.
  virtual common::Status CheckHeadSize(int head_dim) const = 0;
  // The first failure since the last call, or Ok.
  virtual common::Status TakeError() = 0;
  // What this run chose by timing (the GPU's GEMM algorithms: cuda/matmul.h's Choices), for a checkpoint to keep;
  // null where nothing was (the host). KeepTimedChoices gives them back to a resumed run, which then computes as the
  // run that saved them did instead of timing again; FailedPrecondition when they were made on another GPU or
  // library (and are not taken), DataLoss when malformed.
  virtual common::Json TimedChoices() const { return nullptr; }
  virtual common::Status KeepTimedChoices(const common::Json& /*choices*/) { return common::Status::Ok(); }
  // Megatron's --disable-bf16-reduced-precision-matmul: the GEMMs that write bf16 add split-K partial sums in fp32
  // only; false where that changes nothing (the host computes in fp32 throughout). Before the first product.
  virtual bool KeepSplitKSumsFp32() { return false; }

  // `docs` (ops/cpu/ops.h's Documents: several documents in a sequence) in device memory, as the tokens are;
  // `scale` multiplies the token embedding (ModelConfig::embedding_multiplier).
  virtual void EmbeddingForward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int T,
                                int C, float scale, const Documents& docs) = 0;
  virtual void EmbeddingBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int T,
                                 int C, float scale, const Documents& docs) = 0;
  // The norms multiply by weight + weight_offset: 0, or 1 where the weights are stored as their difference from 1
  // (ModelConfig::norm_1p).
  virtual void LayerNormForward(void* out, float* mean, float* rstd, const void* inp, const void* weight,
                                const void* bias, int N, int C, float eps, float weight_offset) = 0;
  virtual void LayerNormBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                                 const void* weight, const float* mean, const float* rstd, int N, int C,
                                 float weight_offset) = 0;
  virtual void RmsNormForward(void* out, float* rstd, const void* inp, const void* weight, int N, int C, float eps,
                              float weight_offset) = 0;
  virtual void RmsNormBackward(void* dinp, float* dweight, const void* dout, const void* inp, const void* weight,
                               const float* rstd, int N, int C, float weight_offset) = 0;
  // residual = a + b, then the norm of residual into out: ResidualForward and the norm's forward in one pass on
  // the GPU (the same values as the two calls).
  virtual void ResidualLayerNormForward(void* residual, void* out, float* mean, float* rstd, const void* a,
                                        const void* b, const void* weight, const void* bias, int N, int C,
                                        float eps, float weight_offset) = 0;
  virtual void ResidualRmsNormForward(void* residual, void* out, float* rstd, const void* a, const void* b,
                                      const void* weight, int N, int C, float eps, float weight_offset) = 0;
  virtual void MatmulForward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                             int OC) = 0;
  // out = residual + (inp @ weight^T + bias): MatmulForward, then ResidualForward(out, residual, out) (the same
  // values on the host). On the GPU one GEMM that reads the residual as its C (beta 1), rounding once.
  virtual void MatmulResidualForward(void* out, const void* inp, const void* weight, const void* bias,
                                     const void* residual, int N, int C, int OC) = 0;
  virtual void MatmulBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                              const void* weight, int N, int C, int OC, WeightGrad dweight_mode) = 0;
  // A Linear layer and GELU: pre = inp @ weight^T + bias, act = GELU(pre) (MatmulForward, then GeluForward). One
  // GEMM with a GELU epilogue on the GPU.
  virtual void MatmulGeluForward(void* act, void* pre, const void* inp, const void* weight, const void* bias, int N,
                                 int C, int OC) = 0;
  // The backward of a Linear layer whose input was act = GELU(pre): dpre = (dout @ weight) * GELU'(pre), written;
  // dweight and dbias added (MatmulBackward, then GeluBackward); where dpre_bias is not null, the column sums of
  // dpre added to it: the bias gradient of the Linear layer that made pre, whose own MatmulBackward then takes
  // no dbias. One GEMM with a DGELU (DGELU_BGRAD, with dpre_bias) epilogue on the GPU.
  virtual void MatmulGeluBackward(void* dpre, float* dpre_bias, float* dweight, float* dbias, const void* dout,
                                  const void* act, const void* pre, const void* weight, int N, int C, int OC,
                                  WeightGrad dweight_mode) = 0;
  // What attention keeps from its forward for its backward, in fp32 elements: the probabilities [B, H, T, T] on
  // the host, each query row's log-sum-exp [B, H, T] on the GPU.
  virtual int64_t AttentionSaved(int B, int H, int T) const = 0;
  // sinks: [H] weights (each head's sink score, ops/cpu/ops.h's AttentionForward), or null.
  virtual void AttentionForward(void* out, float* saved, const void* qkv, int B, int T, int H, int KV, int hd,
                                const DropoutSite& dropout, const Documents& docs, const void* sinks) = 0;
  // dsinks: [H] gradients the sinks' are added to where they are learned, else null.
  virtual void AttentionBackward(void* dqkv, const void* dout, const void* out, const void* qkv, const float* saved,
                                 int B, int T, int H, int KV, int hd, const DropoutSite& dropout, const Documents& docs,
                                 const void* sinks, float* dsinks) = 0;
  virtual void RopeForward(void* qkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                           const Documents& docs) = 0;
  virtual void RopeBackward(void* dqkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                            const Documents& docs) = 0;
  // rows x cols activations from rows src_ld apart into rows dst_ld apart (ops/cpu/ops.h's CopyRows).
  virtual void CopyRows(void* dst, int64_t dst_ld, const void* src, int64_t src_ld, int64_t rows, int64_t cols) = 0;
  // GELU, the tanh approximation or (`exact`) erf's; the backward writes dinp.
  virtual void GeluForward(void* out, const void* inp, int64_t n, bool exact) = 0;
  virtual void GeluBackward(void* dinp, const void* inp, const void* dout, int64_t n, bool exact) = 0;
  virtual void SquaredReluForward(void* out, const void* inp, int64_t n) = 0;
  virtual void SquaredReluBackward(void* dinp, const void* inp, const void* dout, int64_t n) = 0;
  virtual void SwigluForward(void* out, const void* inp, int N, int F, const Glu& glu) = 0;
  virtual void SwigluBackward(void* dinp, const void* inp, const void* dout, int N, int F, const Glu& glu) = 0;
  virtual void ResidualForward(void* out, const void* a, const void* b, int64_t n) = 0;
  // Inverted dropout in place; the backward applies the same mask and scale, so one call serves both.
  virtual void Dropout(void* x, int64_t n, const DropoutSite& site) = 0;
  // Each row's cross-entropy into losses [N] (fp32, device memory) and their mean, which waits for the device.
  // Afterwards `logits` holds what ClassifierBackward needs (the probabilities on the host, the logits untouched
  // on the GPU), which turns it into d(loss)/d(logits) with d(total)/d(row loss) = dloss. A negative target is a
  // position without loss (Megatron's --eod-mask-loss): its loss is 0, its gradients 0, and it counts in the mean.
  virtual double ClassifierForward(void* logits, float* losses, const int32_t* targets, int N, int V) = 0;
  virtual void ClassifierBackward(void* logits, const int32_t* targets, int N, int V, float dloss) = 0;
  // ClassifierForward then ClassifierBackward, as training's step calls them; the GPU's do both in one pass.
  virtual double ClassifierForwardBackward(void* logits, float* losses, const int32_t* targets, int N, int V,
                                           float dloss) {
    const double loss = ClassifierForward(logits, losses, targets, N, V);
    ClassifierBackward(logits, targets, N, V, dloss);
    return loss;
  }
  // The weights the operations read, made from the fp32 parameters: a bf16 copy on the GPU; nothing to do on the
  // host, where they are the parameters themselves.
  virtual void CastWeights(void* out, const float* params, int64_t n) = 0;
  // The gradients' round trip through bf16 around their reduction (--grad-reduce-in-bf16), whatever the ops' type:
  // n fp32 values to bf16 (to nearest even), and n bf16 values back to fp32.
  virtual void GradsToBf16(void* out, const float* in, int64_t n) = 0;
  virtual void GradsFromBf16(float* out, const void* in, int64_t n) = 0;
  // One AdamW update of n fp32 parameters, with their moments; `weights` (not null where the ops read a copy)
  // receives the updated weights in the ops' type.
  virtual void AdamW(float* params, void* weights, const float* grads, float* m, float* v, int64_t n,
                     const cpu::AdamWArgs& args) = 0;
  // The sum of squares of n fp32 values in fixed blocks added in order (the same for any thread count), which
  // waits for the device.
  virtual double SumOfSquares(const float* values, int64_t n) = 0;
  // How many of n fp32 values are zero (Megatron's --log-num-zeros-in-grad), which waits for the device.
  virtual int64_t CountZeros(const float* values, int64_t n) = 0;
};

// The host's operations: ops/cpu, fp32.
std::unique_ptr<Ops> NewCpuOps();

// Where a model or optimizer computes: the device and ops a caller gave (which outlive it), or, for those not
// given, the host's own.
class Placement {
 public:
  Placement(Device* device, Ops* ops);
  Device& device() const { return *device_; }
  Ops& ops() const { return *ops_; }

 private:
  std::unique_ptr<Device> own_device_;
  std::unique_ptr<Ops> own_ops_;
  Device* device_;
  Ops* ops_;
};

}  // namespace srunway::trainer
