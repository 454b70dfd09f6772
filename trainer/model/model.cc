// The transformer block stack, forward and backward, over trainer/ops/ops.h.
#include "trainer/model/model.h"

#include <algorithm>
#include <cassert>
#include <cstddef>

#include <fmt/format.h>

#include "common/half.h"

namespace srunway::trainer {

void DocumentStarts(const int32_t* tokens, int B, int T, int32_t eod, int32_t* starts) {
  for (int b = 0; b < B; ++b) {
    int start = 0;
    for (int t = 0; t < T; ++t) {
      const int64_t at = int64_t{b} * T + t;
      starts[at] = start;
      if (tokens[at] == eod) start = t + 1;
    }
  }
}

Model::Model(const ModelConfig& config, int max_batch, Device* device, Ops* ops, bool recompute,
             std::vector<ParamRange> masters)
    : config_(config), layout_(config), max_batch_(max_batch), placement_(device, ops),
      device_(&placement_.device()), ops_(&placement_.ops()), recompute_(recompute) {
  const bool own_weights = ops_->act_dtype() != DType::kFloat32;
  int64_t held = 0;
  for (const ParamRange& range : masters) held += range.count;
  if (own_weights && !masters.empty() && held < layout_.numel()) masters_ = std::move(masters);
  params_ = Floats(masters_.empty() ? layout_.numel() : held);
  grads_ = Floats(layout_.numel());
  // The weights the ops read: the fp32 parameters where the ops compute in fp32 (the host), else a copy.
  if (!own_weights) {
    w_ = layout_.Views(params_.data(), sizeof(float));
  } else {
    weights_ = Act(layout_.numel());
    w_ = layout_.Views(weights_.data(), DTypeSize(ops_->act_dtype()));
  }
  g_ = layout_.Views(grads_.as<float>());
  zeroed_by_zero_grad_ = UnwrittenRuns();

  const int64_t N = int64_t{max_batch} * config.seq_len;
  const int64_t C = config.d_model, Q = config.q_dim();
  const int64_t F = config.d_ff;
  const int64_t fc = config.arch == Arch::kGpt ? F : 2 * F;
  const int64_t att = ops_->AttentionSaved(max_batch, config.n_head, config.seq_len);
  for (int l = 0; l < config.n_layer; ++l) inputs_.push_back(Act(N * C));
  acts_.resize(recompute ? 1 : config.n_layer);
  for (LayerActs& a : acts_) {
    a.norm1 = Act(N * C);
    a.mean1 = Floats(N);
    a.rstd1 = Floats(N);
    a.qkv = Act(N * config.qkv_dim());
    if (config.qk_norm) {
      const int64_t heads = config.n_head + config.n_kv_head;
      a.qk_pre = Act(N * heads * config.head_dim());
      a.qk_mean = Floats(N * heads);
      a.qk_rstd = Floats(N * heads);
    }
    a.att = Floats(att);
    a.attn = Act(N * Q);
    a.mid = Act(N * C);
    a.norm2 = Act(N * C);
    a.mean2 = Floats(N);
    a.rstd2 = Floats(N);
    a.fc = Act(N * fc);
    a.act = Act(N * F);
  }
  out_ = Act(N * C);
  norm_f_ = Act(N * C);
  mean_f_ = Floats(N);
  rstd_f_ = Floats(N);
  logits_ = Act(N * config.vocab);
  losses_ = Floats(N);
  tokens_ = Ints(N);
  targets_ = Ints(N);
  if (config_.softmax == Softmax::kOffByOne) zero_sinks_ = Act(config.n_head);
  if (config_.window >= 0) {
    window_starts_ = Ints(N);
    host_window_starts_.resize(static_cast<size_t>(N));
  }
  d_res_ = Act(N * C);
  // Also the scratch of the q and k norms' backward (N x H x hd), as d_attn_ is: see QkNormBackward.
  d_norm_ = Act(N * std::max(C, Q));
  d_qkv_ = Act(N * config.qkv_dim());
  d_attn_ = Act(N * std::max(C, Q));
  d_fc_ = Act(N * fc);
  if (!config.gelu()) d_act_ = Act(N * F);  // GELU's backward goes straight into d_fc_
  d_drop_ = Act(N * C);
}

// Zeroed, as the buffers of a fresh model always were.
Buffer Model::Act(int64_t n) const { return ZeroedOrThrow(*device_, ops_->act_dtype(), static_cast<size_t>(n)); }
Buffer Model::Floats(int64_t n) const { return ZeroedOrThrow(*device_, DType::kFloat32, static_cast<size_t>(n)); }
Buffer Model::Ints(int64_t n) const { return ZeroedOrThrow(*device_, DType::kInt32, static_cast<size_t>(n)); }

void Model::set_documents(int32_t eod, bool positions, bool attention) {
  eod_ = positions || attention ? eod : -1;
  reset_positions_ = positions;
  reset_attention_ = attention;
  const int64_t N = int64_t{max_batch_} * config_.seq_len;
  if (eod_ >= 0 && positions_.data() == nullptr) {
    positions_ = Ints(N);
    starts_ = Ints(N);
    host_positions_.resize(static_cast<size_t>(N));
    host_starts_.resize(static_cast<size_t>(N));
  }
}

void* Model::At(const Buffer& buffer, int64_t at) {
  return static_cast<std::byte*>(buffer.data()) + at * static_cast<int64_t>(DTypeSize(buffer.dtype()));
}

void Model::Zero(Buffer& buffer, int64_t n) {
  (void)device_->Zero(buffer.data(), static_cast<size_t>(n) * DTypeSize(buffer.dtype()), device_->main_stream());
}

DropoutSite Model::Site(int site) const {
  if (!dropout_) return {};
  const bool attention = site > 0 && site % 3 == 2;
  const float p = attention ? attention_dropout_ : hidden_dropout_;
  if (p <= 0) return {};
  const int64_t per_sample = attention ? int64_t{config_.n_head} * T_ * T_ : int64_t{T_} * config_.d_model;
  return {p, cpu::DropoutKey(dropout_->seed, dropout_->step, site), dropout_->first_sample * per_sample};
}

void Model::NormForward(void* out, float* mean, float* rstd, const void* inp, const void* w, const void* b, int N,
                        int C) {
  if (config_.layernorm()) {
    ops_->LayerNormForward(out, mean, rstd, inp, w, b, N, C, config_.norm_eps, NormWeightOffset());
  } else {
    ops_->RmsNormForward(out, rstd, inp, w, N, C, config_.norm_eps, NormWeightOffset());
  }
}

void Model::ResidualNormForward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                const void* w, const void* bias, int N) {
  if (config_.layernorm()) {
    ops_->ResidualLayerNormForward(residual, out, mean, rstd, a, b, w, bias, N, config_.d_model, config_.norm_eps,
                                   NormWeightOffset());
  } else {
    ops_->ResidualRmsNormForward(residual, out, rstd, a, b, w, N, config_.d_model, config_.norm_eps,
                                 NormWeightOffset());
  }
}

void Model::NormBackward(void* dinp, float* dw, float* db, const void* dout, const void* inp, const void* w,
                         const float* mean, const float* rstd, int N, int C) {
  if (config_.layernorm()) {
    ops_->LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C, NormWeightOffset());
  } else {
    ops_->RmsNormBackward(dinp, dw, dout, inp, w, rstd, N, C, NormWeightOffset());
  }
}

namespace {

// q's heads or k's, for their norms: where they start in a qkv row, how many, and their norm's weights (and
// gradients, for the backward).
struct QkPart {
  int64_t column, heads;
  const void* weight;
  const void* bias;
  float* dweight = nullptr;
  float* dbias = nullptr;
};

}  // namespace

// q's heads (N x H rows of hd) and k's (N x KV) are gathered out of qkv into a.qk_pre, normed from there into the
// scratch d_qkv_ (free during the forward, and when recomputing until the layer's attention backward), and put
// back into qkv.
void Model::QkNormForward(LayerActs& a, const BasicLayerViews<void>& w) {
  const int64_t N = int64_t{B_} * T_, H = config_.n_head, KV = config_.n_kv_head, hd = config_.head_dim();
  const int64_t QKV = config_.qkv_dim();
  int64_t row = 0;  // q's rows, then k's
  for (const QkPart& part : {QkPart{0, H, w.q_norm_w, w.q_norm_b}, QkPart{H * hd, KV, w.k_norm_w, w.k_norm_b}}) {
    const int64_t width = part.heads * hd;
    void* heads = At(a.qkv, part.column);
    ops_->CopyRows(At(a.qk_pre, row * hd), width, heads, QKV, N, width);
    NormForward(At(d_qkv_, 0), a.qk_mean.as<float>() + row, a.qk_rstd.as<float>() + row, At(a.qk_pre, row * hd),
                part.weight, part.bias, static_cast<int>(N * part.heads), static_cast<int>(hd));
    ops_->CopyRows(heads, QKV, At(d_qkv_, 0), width, N, width);
    row += N * part.heads;
  }
}

// The same gathered from d_qkv_ into the scratch d_attn_ (free after the attention's backward), the norms'
// backward into d_norm_ (free until qkv's backward writes it), and back into d_qkv_.
void Model::QkNormBackward(LayerActs& a, const BasicLayerViews<void>& w, const LayerViews& dw) {
  const int64_t N = int64_t{B_} * T_, H = config_.n_head, KV = config_.n_kv_head, hd = config_.head_dim();
  const int64_t QKV = config_.qkv_dim();
  int64_t row = 0;
  for (const QkPart& part : {QkPart{0, H, w.q_norm_w, w.q_norm_b, dw.q_norm_w, dw.q_norm_b},
                             QkPart{H * hd, KV, w.k_norm_w, w.k_norm_b, dw.k_norm_w, dw.k_norm_b}}) {
    const int64_t width = part.heads * hd;
    void* heads = At(d_qkv_, part.column);
    ops_->CopyRows(At(d_attn_, 0), width, heads, QKV, N, width);
    Zero(d_norm_, N * width);  // the norms' backward adds into its input's gradient
    NormBackward(At(d_norm_, 0), part.dweight, part.dbias, At(d_attn_, 0), At(a.qk_pre, row * hd), part.weight,
                 a.qk_mean.as<float>() + row, a.qk_rstd.as<float>() + row, static_cast<int>(N * part.heads),
                 static_cast<int>(hd));
    ops_->CopyRows(heads, QKV, At(d_norm_, 0), width, N, width);
    row += N * part.heads;
  }
}

double Model::Forward(const int32_t* tokens, const int32_t* targets, int B, int T, const DropoutContext* dropout,
                      const ParamsNeeded& need, std::optional<float> backward_loss_scale) {
  auto needs = [&](ParamRange range) {
    if (need && range.count > 0) need(range);
  };
  assert(B > 0 && B <= max_batch_ && T > 0 && T <= config_.seq_len);
  B_ = B;
  T_ = T;
  dropout_.reset();
  if (dropout != nullptr) dropout_ = *dropout;
  const ModelConfig& c = config_;
  const int N = B * T, C = c.d_model;
  const int64_t NC = int64_t{N} * C;
  Stream& stream = device_->main_stream();
  (void)device_->CopyFromHost(tokens_.data(), tokens, sizeof(int32_t) * static_cast<size_t>(N), stream);
  docs_ = {};
  positions_reach_ = T;
  if (eod_ >= 0) {
    DocumentStarts(tokens, B, T, eod_, host_starts_.data());
    const size_t bytes = sizeof(int32_t) * static_cast<size_t>(N);
    if (reset_positions_) {
      for (int i = 0; i < N; ++i) host_positions_[i] = i % T - host_starts_[i];
      positions_reach_ = 1 + *std::max_element(host_positions_.begin(), host_positions_.begin() + N);
      (void)device_->CopyFromHost(positions_.data(), host_positions_.data(), bytes, stream);
      docs_.positions = positions_.as<int32_t>();
    }
    if (reset_attention_) {
      (void)device_->CopyFromHost(starts_.data(), host_starts_.data(), bytes, stream);
      docs_.starts = starts_.as<int32_t>();
    }
  }
  window_docs_ = docs_;
  if (c.window >= 0 && c.window + 1 < T) {  // the first key in the window, and in the document where they bound it
    for (int i = 0; i < N; ++i) {
      const int32_t document = docs_.starts != nullptr ? host_starts_[i] : 0;
      host_window_starts_[i] = std::max(document, i % T - c.window);
    }
    (void)device_->CopyFromHost(window_starts_.data(), host_window_starts_.data(), sizeof(int32_t) * N, stream);
    window_docs_.starts = window_starts_.as<int32_t>();
  }

  needs(layout_.Embeddings());
  ops_->EmbeddingForward(inputs_[0].data(), tokens_.as<int32_t>(), w_.wte, w_.wpe, B, T, C,
                         config_.embedding_multiplier, docs_);
  ops_->Dropout(inputs_[0].data(), NC, Site(0));
  for (int l = 0; l < c.n_layer; ++l) {
    needs(layout_.Layer(l));
    LayerForward(l, Acts(l), inputs_[l].data(), l + 1 < c.n_layer ? inputs_[l + 1].data() : out_.data());
  }
  needs(layout_.FinalNorm());
  needs(layout_.Head());
  NormForward(norm_f_.data(), mean_f_.as<float>(), rstd_f_.as<float>(), out_.data(), w_.norm_f_w, w_.norm_f_b, N, C);
  ops_->MatmulForward(logits_.data(), norm_f_.data(), w_.lm_head, nullptr, N, C, c.vocab);

  have_targets_ = targets != nullptr;
  dlogits_scale_.reset();
  if (!have_targets_) return 0.0;
  (void)device_->CopyFromHost(targets_.data(), targets, sizeof(int32_t) * static_cast<size_t>(N), stream);
  // The loss is the mean over the positions that have one (a negative target has none: --eod-mask-loss), as
  // Megatron's loss mask divides by its sum; a batch with none has no loss and no gradient.
  counted_ = static_cast<int>(std::count_if(targets, targets + N, [](int32_t t) { return t >= 0; }));
  auto over_counted = [&](double mean_over_n) {
    if (counted_ == N) return mean_over_n;
    return counted_ == 0 ? 0.0 : mean_over_n * N / counted_;
  };
  if (!backward_loss_scale) {
    return over_counted(ops_->ClassifierForward(logits_.data(), losses_.as<float>(), targets_.as<int32_t>(), N,
                                                c.vocab));
  }
  dlogits_scale_ = backward_loss_scale;
  return over_counted(ops_->ClassifierForwardBackward(logits_.data(), losses_.as<float>(), targets_.as<int32_t>(), N,
                                                      c.vocab, DlossPerRow(*backward_loss_scale)));
}

float Model::DlossPerRow(float loss_scale) const { return counted_ == 0 ? 0.0f : loss_scale / counted_; }

void Model::LayerForward(int l, LayerActs& a, const void* input, void* output) {
  const ModelConfig& c = config_;
  const int B = B_, T = T_;
  const int N = B * T, C = c.d_model, F = c.d_ff, H = c.n_head, KV = c.n_kv_head, hd = c.head_dim();
  const int QKV = c.qkv_dim();
  const int64_t NC = int64_t{N} * C;
  const bool gpt = c.arch == Arch::kGpt;
  const BasicLayerViews<void>& w = w_.layers[l];
  NormForward(a.norm1.data(), a.mean1.as<float>(), a.rstd1.as<float>(), input, w.norm1_w, w.norm1_b, N, C);
  ops_->MatmulForward(a.qkv.data(), a.norm1.data(), w.qkv_w, w.qkv_b, N, C, QKV);
  if (c.qk_norm) QkNormForward(a, w);
  if (c.rope_turns(l)) ops_->RopeForward(a.qkv.data(), B, T, H, KV, hd, c.rope(positions_reach_), docs_);
  ops_->AttentionForward(a.attn.data(), a.att.as<float>(), a.qkv.data(), B, T, H, KV, hd, Site(2 + 3 * l),
                         AttentionDocs(l), Sinks(w));
  ops_->MatmulForward(d_attn_.data(), a.attn.data(), w.proj_w, w.proj_b, N, c.q_dim(), C);  // scratch: its output
  ops_->Dropout(d_attn_.data(), NC, Site(1 + 3 * l));
  ResidualNormForward(a.mid.data(), a.norm2.data(), a.mean2.as<float>(), a.rstd2.as<float>(), input, d_attn_.data(),
                      w.norm2_w, w.norm2_b, N);
  if (c.gelu()) {
    ops_->MatmulGeluForward(a.act.data(), a.fc.data(), a.norm2.data(), w.fc_w, w.fc_b, N, C, F);
  } else if (gpt) {  // squared ReLU or exact GELU, each after the GEMM
    ops_->MatmulForward(a.fc.data(), a.norm2.data(), w.fc_w, w.fc_b, N, C, F);
    if (c.squared_relu) {
      ops_->SquaredReluForward(a.act.data(), a.fc.data(), int64_t{N} * F);
    } else {
      ops_->GeluForward(a.act.data(), a.fc.data(), int64_t{N} * F, /*exact=*/true);
    }
  } else {
    ops_->MatmulForward(a.fc.data(), a.norm2.data(), w.fc_w, w.fc_b, N, C, 2 * F);
    ops_->SwigluForward(a.act.data(), a.fc.data(), N, F, c.glu());
  }
  const DropoutSite ffn_dropout = Site(3 + 3 * l);
  if (ffn_dropout.p <= 0) {  // the residual add in the GEMM: one pass less over the residual stream
    ops_->MatmulResidualForward(output, a.act.data(), w.out_w, w.out_b, a.mid.data(), N, F, C);
    return;
  }
  ops_->MatmulForward(d_attn_.data(), a.act.data(), w.out_w, w.out_b, N, F, C);  // scratch: FFN out
  ops_->Dropout(d_attn_.data(), NC, ffn_dropout);
  ops_->ResidualForward(output, a.mid.data(), d_attn_.data(), NC);
}

common::StatusOr<std::vector<float>> Model::Logits(int b, int t) {
  assert(!have_targets_ && b < B_ && t < T_);
  const size_t V = static_cast<size_t>(config_.vocab);
  const size_t element = DTypeSize(logits_.dtype());
  const auto* row = static_cast<const std::byte*>(logits_.data()) + (int64_t{b} * T_ + t) * V * element;
  std::vector<float> out(V);
  if (logits_.dtype() == DType::kFloat32) {
    SRUNWAY_RETURN_IF_ERROR(device_->CopyToHost(out.data(), row, V * element, device_->main_stream()));
  } else {
    std::vector<uint16_t> half(V);
    SRUNWAY_RETURN_IF_ERROR(device_->CopyToHost(half.data(), row, V * element, device_->main_stream()));
    SRUNWAY_RETURN_IF_ERROR(device_->Synchronize(device_->main_stream()));
    const bool bf16 = logits_.dtype() == DType::kBFloat16;
    for (size_t i = 0; i < V; ++i) out[i] = bf16 ? common::BFloat16ToFloat(half[i]) : common::HalfToFloat(half[i]);
  }
  SRUNWAY_RETURN_IF_ERROR(device_->Synchronize(device_->main_stream()));
  return out;
}

void Model::Backward(float loss_scale, const GradsReady& ready) {
  auto done = [&](ParamRange range) {
    if (ready && range.count > 0) ready(range);
  };
  assert(have_targets_);
  const ModelConfig& c = config_;
  const int B = B_, T = T_;
  const int N = B * T, C = c.d_model, F = c.d_ff, H = c.n_head, KV = c.n_kv_head, hd = c.head_dim();
  const int QKV = c.qkv_dim();
  const bool gpt = c.arch == Arch::kGpt;
  const int64_t NC = int64_t{N} * C;
  // d(an output that went through a dropout mask) = the mask applied to d(what it was added into).
  auto Masked = [&](const Buffer& d, const DropoutSite& site) -> const void* {
    if (site.p <= 0) return d.data();
    (void)device_->Copy(d_drop_.data(), d.data(), static_cast<size_t>(NC) * DTypeSize(d.dtype()),
                        device_->main_stream());
    ops_->Dropout(d_drop_.data(), NC, site);
    return d_drop_.data();
  };

  // The loss is the mean over the counted positions. The gradients may have come with the losses (Forward's
  // backward_loss_scale).
  assert(!dlogits_scale_ || *dlogits_scale_ == loss_scale);
  if (!dlogits_scale_) {
    ops_->ClassifierBackward(logits_.data(), targets_.as<int32_t>(), N, c.vocab, DlossPerRow(loss_scale));
  }
  dlogits_scale_.reset();
  // The first Backward since ZeroGrad writes the weight matrices' gradients, which ZeroGrad left as they were.
  const WeightGrad dw_mode = write_weight_grads_ ? WeightGrad::kWrite : WeightGrad::kAdd;
  write_weight_grads_ = false;
  // Tied, the head's gradient is wte's, which the embeddings' backward adds to at the end.
  ops_->MatmulBackward(d_norm_.data(), g_.lm_head, nullptr, logits_.data(), norm_f_.data(), w_.lm_head, N, C,
                       c.vocab, dw_mode);
  done(layout_.Head());  // untied; tied to wte, it is final with the embeddings
  Zero(d_res_, NC);
  NormBackward(d_res_.data(), g_.norm_f_w, g_.norm_f_b, d_norm_.data(), out_.data(), w_.norm_f_w, mean_f_.as<float>(),
               rstd_f_.as<float>(), N, C);
  done(layout_.FinalNorm());
  have_targets_ = false;  // the logits became gradients

  for (int l = c.n_layer - 1; l >= 0; --l) {
    LayerActs& a = Acts(l);
    // Recomputing: the layer's forward again from its input (the same dropout masks: they are drawn from the
    // step and position), its output into a scratch nothing reads; d_res_ (what the backward carries) is untouched.
    if (recompute_) LayerForward(l, a, inputs_[l].data(), d_drop_.data());
    const BasicLayerViews<void>& w = w_.layers[l];
    const LayerViews& dw = g_.layers[l];
    // FFN branch: d_res is d(layer output), which is also d(FFN output) and part of d(mid).
    const int fc_dim = gpt ? F : 2 * F;
    const void* d_out = Masked(d_res_, Site(3 + 3 * l));
    if (c.gelu()) {
      // fc's bias gradient too: on the GPU the column sums of d(fc) come out of the same product.
      ops_->MatmulGeluBackward(d_fc_.data(), dw.fc_b, dw.out_w, dw.out_b, d_out, a.act.data(), a.fc.data(), w.out_w, N,
                               F, C, dw_mode);
      done(layout_.LayerPart(l, "out."));
    } else {
      ops_->MatmulBackward(d_act_.data(), dw.out_w, dw.out_b, d_out, a.act.data(), w.out_w, N, F, C, dw_mode);
      done(layout_.LayerPart(l, "out."));
      if (gpt && c.squared_relu) {
        ops_->SquaredReluBackward(d_fc_.data(), a.fc.data(), d_act_.data(), int64_t{N} * F);
      } else if (gpt) {
        ops_->GeluBackward(d_fc_.data(), a.fc.data(), d_act_.data(), int64_t{N} * F, /*exact=*/true);
      } else {
        ops_->SwigluBackward(d_fc_.data(), a.fc.data(), d_act_.data(), N, F, c.glu());
      }
    }
    ops_->MatmulBackward(d_norm_.data(), dw.fc_w, c.gelu() ? nullptr : dw.fc_b, d_fc_.data(), a.norm2.data(), w.fc_w,
                         N, C, fc_dim, dw_mode);
    done(layout_.LayerPart(l, "fc."));
    NormBackward(d_res_.data(), dw.norm2_w, dw.norm2_b, d_norm_.data(), a.mid.data(), w.norm2_w, a.mean2.as<float>(),
                 a.rstd2.as<float>(), N, C);
    done(layout_.LayerPart(l, "norm2."));
    // Attention branch: d_res is now d(mid), also d(attention projection output) and part of d(input).
    ops_->MatmulBackward(d_attn_.data(), dw.proj_w, dw.proj_b, Masked(d_res_, Site(1 + 3 * l)), a.attn.data(),
                         w.proj_w, N, c.q_dim(), C, dw_mode);
    done(layout_.LayerPart(l, "proj."));
    ops_->AttentionBackward(d_qkv_.data(), d_attn_.data(), a.attn.data(), a.qkv.data(), a.att.as<float>(), B, T, H, KV,
                            hd, Site(2 + 3 * l), AttentionDocs(l), Sinks(w), dw.sinks);
    if (dw.sinks != nullptr) done(layout_.LayerPart(l, "softmax_offset"));
    if (c.rope_turns(l)) {
      ops_->RopeBackward(d_qkv_.data(), B, T, H, KV, hd, c.rope(positions_reach_), docs_);
    }
    if (c.qk_norm) {
      QkNormBackward(a, w, dw);
      done(layout_.LayerPart(l, "k_norm."));
      done(layout_.LayerPart(l, "q_norm."));
    }
    ops_->MatmulBackward(d_norm_.data(), dw.qkv_w, dw.qkv_b, d_qkv_.data(), a.norm1.data(), w.qkv_w, N, C, QKV,
                         dw_mode);
    done(layout_.LayerPart(l, "qkv."));
    NormBackward(d_res_.data(), dw.norm1_w, dw.norm1_b, d_norm_.data(), inputs_[l].data(), w.norm1_w,
                 a.mean1.as<float>(), a.rstd1.as<float>(), N, C);
    done(layout_.LayerPart(l, "norm1."));
  }
  ops_->Dropout(d_res_.data(), NC, Site(0));
  ops_->EmbeddingBackward(g_.wte, g_.wpe, d_res_.data(), tokens_.as<int32_t>(), B, T, C,
                          config_.embedding_multiplier, docs_);
  done(layout_.Embeddings());
}

std::vector<ParamRange> Model::UnwrittenRuns() const {
  // The matrices every Backward passes to MatmulBackward or MatmulGeluBackward as their dweight, in layout order.
  std::vector<const TensorSpec*> written;
  written.push_back(layout_.Find(config_.tied_embeddings() ? "wte" : "lm_head.weight"));
  for (int l = 0; l < config_.n_layer; ++l) {
    for (const char* name : {"qkv.weight", "proj.weight", "fc.weight", "out.weight"}) {
      written.push_back(layout_.Find(fmt::format("layers.{}.{}", l, name)));
    }
  }
  std::sort(written.begin(), written.end(),
            [](const TensorSpec* a, const TensorSpec* b) { return a->offset < b->offset; });
  std::vector<ParamRange> runs;
  int64_t at = 0;
  for (const TensorSpec* spec : written) {
    if (spec->offset > at) runs.push_back({at, spec->offset - at});
    at = spec->offset + spec->numel;
  }
  if (at < layout_.numel()) runs.push_back({at, layout_.numel() - at});
  return runs;
}

void Model::ZeroGrad() {
  for (const ParamRange& run : zeroed_by_zero_grad_) {
    (void)device_->Zero(grads_.as<float>() + run.offset, static_cast<size_t>(run.count) * sizeof(float),
                        device_->main_stream());
  }
  write_weight_grads_ = true;
}

void Model::RefreshWeights() {
  assert(masters_.empty());
  if (weights_.data() != nullptr) ops_->CastWeights(weights_.data(), params_.as<float>(), layout_.numel());
}

common::Status Model::SetParams(std::span<const float> whole) {
  assert(static_cast<int64_t>(whole.size()) == layout_.numel());
  Stream& stream = device_->main_stream();
  if (masters_.empty()) {
    SRUNWAY_RETURN_IF_ERROR(device_->CopyFromHost(params_.data(), whole.data(), whole.size_bytes(), stream));
    RefreshWeights();
    return device_->Synchronize(stream);
  }
  int64_t at = 0;
  for (const ParamRange& range : masters_) {
    SRUNWAY_RETURN_IF_ERROR(device_->CopyFromHost(params_.as<float>() + at, whole.data() + range.offset,
                                                  static_cast<size_t>(range.count) * sizeof(float), stream));
    at += range.count;
  }
  // The weights rounded on the host (to nearest even, as the GPU's cast) and uploaded a chunk at a time: no device
  // memory beyond the model's, whose whole fp32 copy is what sharding saves.
  assert(weights_.dtype() == DType::kBFloat16);
  std::vector<uint16_t> chunk(static_cast<size_t>(std::min<int64_t>(layout_.numel(), int64_t{4} << 20)));
  for (int64_t offset = 0; offset < layout_.numel(); offset += static_cast<int64_t>(chunk.size())) {
    const auto n = static_cast<size_t>(std::min(static_cast<int64_t>(chunk.size()), layout_.numel() - offset));
    std::transform(whole.begin() + offset, whole.begin() + offset + static_cast<int64_t>(n), chunk.begin(),
                   common::FloatToBFloat16);
    SRUNWAY_RETURN_IF_ERROR(device_->CopyFromHost(weights_.as<uint16_t>() + offset, chunk.data(), n * sizeof(uint16_t),
                                                  stream));
    // Before the chunk is reused; the first wait also covers the master ranges' copies queued above.
    SRUNWAY_RETURN_IF_ERROR(device_->Synchronize(stream));
  }
  return common::Status::Ok();
}

}  // namespace srunway::trainer
