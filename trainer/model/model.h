// GPT and Llama, forward and backward, written once against trainer/ops/ops.h: parameters, gradients and
// activations live in Buffers of the model's Device (the host by default, with ops/cpu).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "trainer/device/device.h"
#include "trainer/model/config.h"
#include "trainer/model/params.h"
#include "trainer/ops/ops.h"

namespace srunway::trainer {

// Where a training micro-batch sits, for dropout's masks: they are drawn from the seed, the optimizer step and
// each element's place in the global batch, so every split of the batch over ranks drops the same elements.
struct DropoutContext {
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t first_sample = 0;  // the global index of the micro-batch's first sample
};

// Several documents in each of B sequences of T tokens (Megatron's get_ltor_masks_and_position_ids): a document
// ends after each `eod` token, which is the last of its own; starts[b, t] receives the position in sequence b
// where t's document begins (0 before the first eod).
void DocumentStarts(const int32_t* tokens, int B, int T, int32_t eod, int32_t* starts);

class Model {
 public:
  // Told each range of grads() as soon as the backward has finished with it, from the end of the buffer to its
  // start without gaps (the untied head, the final norm, each layer's parts from its MLP output down to its first
  // norm, the embeddings: see ParamLayout), so its reduction can start while the backward goes on.
  using GradsReady = std::function<void(ParamRange range)>;
  // Asked before the forward reads each part of params() (the embeddings, each layer, the final norm, the head),
  // from the start of the buffer to its end, so parameters still arriving (ZeRO-1's all-gather) are waited for
  // only when needed.
  using ParamsNeeded = std::function<void(ParamRange range)>;
  // Activations are sized for micro-batches of up to max_batch sequences of up to config.seq_len tokens. On
  // `device` with `ops`, which outlive the model; without them, on the host with ops/cpu. With `recompute`
  // (Megatron's full activation recomputation), the forward keeps only each layer's input, and the backward runs
  // each layer's forward again just before its backward: one layer's activations in memory instead of all of
  // them, for a third more compute; the results are the same bit for bit. With `masters` (ZeRO-1's owned ranges)
  // and ops that read weights of another type (the GPU's bf16), params() holds those ranges alone, packed in
  // their order: the fp32 master weights sharded as Megatron's distributed optimizer shards them, 4 bytes per
  // parameter fewer per rank but a slice; on the host, where the ops read params() itself, they stay whole.
  // Throws DeviceFull when the device cannot hold it.
  Model(const ModelConfig& config, int max_batch, Device* device = nullptr, Ops* ops = nullptr, bool recompute = false,
        std::vector<ParamRange> masters = {});

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  Device& device() { return *device_; }
  Ops& ops() { return *ops_; }
  // The fp32 parameters (whole, or the packed master ranges: see masters()) and gradients (whole), in the device's
  // memory (host memory for the host device).
  std::span<float> params() { return {params_.as<float>(), params_.count()}; }
  std::span<const float> params() const { return {params_.as<float>(), params_.count()}; }
  std::span<float> grads() { return {grads_.as<float>(), grads_.count()}; }
  std::span<const float> grads() const { return {grads_.as<float>(), grads_.count()}; }
  // The ranges params() holds, packed, when it does not hold every parameter; else empty.
  const std::vector<ParamRange>& masters() const { return masters_; }
  // The weights the operations read, whole, of weights_type() (params() itself on the host): for an optimizer
  // that writes them beside the parameters, and ZeRO-1's all-gather.
  void* weights() { return weights_.data() != nullptr ? weights_.data() : params_.data(); }
  DType weights_type() const { return ops_->act_dtype(); }

  // Sets every parameter from `whole` (numel() floats on the host: an initialisation, a loaded checkpoint): the
  // master ranges' fp32 values and the weights the operations read.
  common::Status SetParams(std::span<const float> whole);

  // Runs B sequences of T tokens (B <= max_batch, T <= seq_len). With targets, returns the mean cross-entropy
  // over the positions whose target is not negative (a negative one has no loss: --eod-mask-loss) and keeps what
  // Backward needs; without, leaves the logits of every position readable through Logits().
  // With `dropout` (training), hidden and attention dropout apply as set_dropout() says; without (evaluation,
  // sampling), nothing is dropped. With `backward_loss_scale` (training, with targets), the classifier's gradients
  // for the Backward that follows, which must be given the same loss_scale, are made with the losses, in the same
  // pass over the logits where the ops can (the GPU's).
  double Forward(const int32_t* tokens, const int32_t* targets, int B, int T, const DropoutContext* dropout = nullptr,
                 const ParamsNeeded& need = nullptr, std::optional<float> backward_loss_scale = std::nullopt);
  // Megatron's hidden dropout (the embeddings' output, and each attention and MLP output before its residual
  // add) and attention dropout (the attention probabilities).
  void set_dropout(float hidden, float attention) {
    hidden_dropout_ = hidden;
    attention_dropout_ = attention;
  }
  // Megatron's --reset-position-ids (`positions`: each document's first token at position 0, for the learned
  // position embeddings and RoPE) and --reset-attention-mask (`attention`: each token attends to its own
  // document's tokens alone), documents ending after each `eod` token of a Forward's input (DocumentStarts).
  // Throws DeviceFull when the device cannot hold the two [max_batch, seq_len] tables.
  void set_documents(int32_t eod, bool positions, bool attention);
  // Logits [V] of sequence b at position t after a Forward without targets, copied to the host as fp32.
  common::StatusOr<std::vector<float>> Logits(int b, int t);

  // Remakes the weights the operations read from a whole params() after it changed by any other way than an
  // optimizer that writes both. Nothing to do on the host.
  void RefreshWeights();

  // Adds d(loss * loss_scale)/d(params) into grads(); loss_scale = 1 / (micro-batches per step, on all ranks).
  void Backward(float loss_scale, const GradsReady& ready = nullptr);
  // Makes grads() zero for the backwards that follow: zeroes all but the Linear layers' weight matrices (most of
  // the parameters), whose gradients the next Backward writes instead of adding (WeightGrad::kWrite). Until that
  // Backward, those matrices' gradients still hold what they held.
  void ZeroGrad();

 private:
  // What a layer's backward reads of its forward, besides the layer's input (inputs_).
  struct LayerActs {
    Buffer norm1, mean1, rstd1;
    Buffer qkv;    // after the q and k norms (qk_norm) and RoPE (Llama)
    // With qk_norm: q's and k's heads before their norms, as rows of hd (q's N x H rows, then k's N x KV), and the
    // rows' statistics.
    Buffer qk_pre, qk_mean, qk_rstd;
    Buffer att;    // what attention keeps for its backward (Ops::AttentionSaved)
    Buffer attn;   // attention output before the projection [N, H * hd]
    Buffer mid;    // residual after attention [N, C]
    Buffer norm2, mean2, rstd2;
    Buffer fc;   // [N, F] (GPT) or [N, 2F] (Llama)
    Buffer act;  // [N, F]
  };

  // One layer's forward from `input` into `output` ([N, C] each), keeping in `a` what its backward reads.
  void LayerForward(int l, LayerActs& a, const void* input, void* output);
  // qk_norm: q's and k's heads of a.qkv through their norms, in place; the backward does the same to d_qkv_.
  void QkNormForward(LayerActs& a, const BasicLayerViews<void>& w);
  void QkNormBackward(LayerActs& a, const BasicLayerViews<void>& w, const LayerViews& dw);
  // The activations of layer l: its own, or (recomputing) the one set every layer shares.
  LayerActs& Acts(int l) { return acts_[recompute_ ? 0 : l]; }

  Buffer Act(int64_t n) const;  // n activations of the ops' type
  Buffer Floats(int64_t n) const;
  Buffer Ints(int64_t n) const;
  void Zero(Buffer& buffer, int64_t n);
  // The address of `buffer`'s element `at`.
  static void* At(const Buffer& buffer, int64_t at);
  // The runs of grads() between the weight matrices the Linear layers' backwards write: what ZeroGrad zeroes.
  std::vector<ParamRange> UnwrittenRuns() const;
  // The model's norm over rows of C values (d_model, or head_dim for the q and k norms).
  void NormForward(void* out, float* mean, float* rstd, const void* inp, const void* w, const void* b, int N, int C);
  // residual = a + b, then its norm into out, fused.
  void ResidualNormForward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                           const void* w, const void* bias, int N);
  void NormBackward(void* dinp, float* dw, float* db, const void* dout, const void* inp, const void* w,
                    const float* mean, const float* rstd, int N, int C);
  // What the norms add to their stored weights: 1 where those are their difference from 1 (ModelConfig::norm_1p).
  float NormWeightOffset() const { return config_.norm_1p ? 1.0f : 0.0f; }

  ModelConfig config_;
  ParamLayout layout_;
  int max_batch_;
  Placement placement_;
  Device* device_;
  Ops* ops_;
  std::vector<ParamRange> masters_;  // what params_ holds, packed; empty: everything
  Buffer params_, grads_;
  Buffer weights_;           // the weights the ops read where they are not fp32 (a bf16 copy on the GPU)
  BasicModelViews<void> w_;  // views of those weights: of params_ itself on the host
  ModelViews g_;
  std::vector<ParamRange> zeroed_by_zero_grad_;  // UnwrittenRuns()
  bool write_weight_grads_ = false;              // since ZeroGrad, no Backward yet: the next writes the matrices'

  bool recompute_;
  std::vector<Buffer> inputs_;  // the residual stream entering each layer [N, C]
  std::vector<LayerActs> acts_;  // one per layer, or one in all when recomputing
  Buffer out_, norm_f_, mean_f_, rstd_f_, logits_, losses_;
  Buffer tokens_, targets_;
  // set_documents: the end-of-document token (-1: none), what it resets, and the tables of the last Forward (on
  // the device, and as made on the host), which docs_ points to where they apply.
  int32_t eod_ = -1;
  bool reset_positions_ = false, reset_attention_ = false;
  Buffer positions_, starts_;
  std::vector<int32_t> host_positions_, host_starts_;
  Documents docs_;
  // The last Forward's largest position + 1: T, or with reset positions its longest document's length, what RoPE's
  // frequencies are chosen by (LongRoPE's factors, as transformers chooses them by its position_ids).
  int positions_reach_ = 0;
  // With a sliding window (ModelConfig::window), each query's first key, max(its document's start, t - window), on
  // the device and the host: the attention's starts in the layers with the window (AttentionDocs).
  Buffer window_starts_;
  std::vector<int32_t> host_window_starts_;
  Documents window_docs_;
  const Documents& AttentionDocs(int layer) const { return config_.windowed(layer) ? window_docs_ : docs_; }
  // Each head's sink score for the attention (ModelConfig::softmax): the layer's learned ones, zeros for
  // off-by-one, null for none.
  Buffer zero_sinks_;
  const void* Sinks(const BasicLayerViews<void>& w) const {
    return config_.softmax == Softmax::kLearnable ? w.sinks : zero_sinks_.data();
  }
  // Gradients of activations, reused layer after layer.
  Buffer d_res_, d_norm_, d_qkv_, d_attn_, d_fc_, d_act_;
  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  int counted_ = 0;  // the last Forward's positions with a loss (a target that is not negative)
  // d(mean loss)/d(row loss) for the counted rows, scaled by loss_scale.
  float DlossPerRow(float loss_scale) const;
  std::optional<float> dlogits_scale_;  // the loss_scale the logits' gradients were made for by Forward
  float hidden_dropout_ = 0, attention_dropout_ = 0;
  std::optional<DropoutContext> dropout_;  // of the last Forward, for the Backward
  Buffer d_drop_;                          // a gradient through a dropout mask
  // Site 0: the embeddings; layer l: 1 + 3l the attention projection, 2 + 3l the attention probabilities,
  // 3 + 3l the MLP output.
  DropoutSite Site(int site) const;
};

}  // namespace srunway::trainer
