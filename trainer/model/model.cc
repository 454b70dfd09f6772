// The transformer block stack, forward and backward, over the CPU ops (trainer/ops/cpu).
#include "trainer/model/model.h"

#include <algorithm>
#include <cassert>

#include "trainer/ops/cpu/ops.h"

namespace srunway::trainer {

namespace ops = cpu;

Model::Model(const ModelConfig& config, int max_batch)
    : config_(config), layout_(config), max_batch_(max_batch) {
  params_.assign(layout_.numel(), 0.0f);
  grads_.assign(layout_.numel(), 0.0f);
  p_ = layout_.Views(params_.data());
  g_ = layout_.Views(grads_.data());

  const int64_t N = int64_t{max_batch} * config.seq_len;
  const int64_t C = config.d_model;
  const int64_t F = config.d_ff;
  const int64_t fc = config.arch == Arch::kGpt ? F : 2 * F;
  const int64_t att = int64_t{max_batch} * config.n_head * config.seq_len * config.seq_len;
  acts_.resize(config.n_layer);
  for (LayerActs& a : acts_) {
    a.input.resize(N * C);
    a.norm1.resize(N * C);
    a.mean1.resize(N);
    a.rstd1.resize(N);
    a.qkv.resize(N * config.qkv_dim());
    a.att.resize(att);
    a.attn.resize(N * C);
    a.mid.resize(N * C);
    a.norm2.resize(N * C);
    a.mean2.resize(N);
    a.rstd2.resize(N);
    a.fc.resize(N * fc);
    a.act.resize(N * F);
  }
  out_.resize(N * C);
  norm_f_.resize(N * C);
  mean_f_.resize(N);
  rstd_f_.resize(N);
  logits_.resize(N * config.vocab);
  losses_.resize(N);
  tokens_.resize(N);
  targets_.resize(N);
  d_res_.resize(N * C);
  d_norm_.resize(N * C);
  d_qkv_.resize(N * config.qkv_dim());
  d_attn_.resize(N * C);
  d_fc_.resize(N * fc);
  d_act_.resize(N * F);
  d_drop_.resize(N * C);
}

cpu::DropoutSite Model::Site(int site) const {
  if (!dropout_) return {};
  const bool attention = site > 0 && site % 3 == 2;
  const float p = attention ? attention_dropout_ : hidden_dropout_;
  if (p <= 0) return {};
  const int64_t per_sample = attention ? int64_t{config_.n_head} * T_ * T_ : int64_t{T_} * config_.d_model;
  return {p, ops::DropoutKey(dropout_->seed, dropout_->step, site), dropout_->first_sample * per_sample};
}

void Model::NormForward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                        int N) {
  if (config_.arch == Arch::kGpt) {
    ops::LayerNormForward(out, mean, rstd, inp, w, b, N, config_.d_model, config_.norm_eps);
  } else {
    ops::RmsNormForward(out, rstd, inp, w, N, config_.d_model, config_.norm_eps);
  }
}

void Model::NormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                         const float* mean, const float* rstd, int N) {
  if (config_.arch == Arch::kGpt) {
    ops::LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, config_.d_model);
  } else {
    ops::RmsNormBackward(dinp, dw, dout, inp, w, rstd, N, config_.d_model);
  }
}

double Model::Forward(const int32_t* tokens, const int32_t* targets, int B, int T, const DropoutContext* dropout,
                      const ParamsNeeded& need) {
  auto needs = [&](ParamRange range) {
    if (need && range.count > 0) need(range);
  };
  assert(B > 0 && B <= max_batch_ && T > 0 && T <= config_.seq_len);
  B_ = B;
  T_ = T;
  dropout_.reset();
  if (dropout != nullptr) dropout_ = *dropout;
  const ModelConfig& c = config_;
  const int N = B * T, C = c.d_model, F = c.d_ff, H = c.n_head, KV = c.n_kv_head, hd = c.head_dim();
  const int QKV = c.qkv_dim();
  const bool gpt = c.arch == Arch::kGpt;
  std::copy(tokens, tokens + N, tokens_.begin());

  needs(layout_.Embeddings());
  ops::EmbeddingForward(acts_[0].input.data(), tokens_.data(), p_.wte, p_.wpe, B, T, C);
  ops::DropoutForward(acts_[0].input.data(), int64_t{N} * C, Site(0));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerActs& a = acts_[l];
    const LayerViews& w = p_.layers[l];
    needs(layout_.Layer(l));
    NormForward(a.norm1.data(), a.mean1.data(), a.rstd1.data(), a.input.data(), w.norm1_w, w.norm1_b, N);
    ops::MatmulForward(a.qkv.data(), a.norm1.data(), w.qkv_w, w.qkv_b, N, C, QKV);
    if (!gpt) ops::RopeForward(a.qkv.data(), B, T, H, KV, hd, c.rope_theta);
    ops::AttentionForward(a.attn.data(), a.att.data(), a.qkv.data(), B, T, H, KV, hd, Site(2 + 3 * l));
    ops::MatmulForward(d_attn_.data(), a.attn.data(), w.proj_w, w.proj_b, N, C, C);  // scratch: projection out
    ops::DropoutForward(d_attn_.data(), int64_t{N} * C, Site(1 + 3 * l));
    ops::ResidualForward(a.mid.data(), a.input.data(), d_attn_.data(), int64_t{N} * C);
    NormForward(a.norm2.data(), a.mean2.data(), a.rstd2.data(), a.mid.data(), w.norm2_w, w.norm2_b, N);
    if (gpt) {
      ops::MatmulForward(a.fc.data(), a.norm2.data(), w.fc_w, w.fc_b, N, C, F);
      ops::GeluForward(a.act.data(), a.fc.data(), int64_t{N} * F);
    } else {
      ops::MatmulForward(a.fc.data(), a.norm2.data(), w.fc_w, nullptr, N, C, 2 * F);
      ops::SwigluForward(a.act.data(), a.fc.data(), N, F);
    }
    ops::MatmulForward(d_attn_.data(), a.act.data(), w.out_w, w.out_b, N, F, C);  // scratch: FFN out
    ops::DropoutForward(d_attn_.data(), int64_t{N} * C, Site(3 + 3 * l));
    float* next = l + 1 < c.n_layer ? acts_[l + 1].input.data() : out_.data();
    ops::ResidualForward(next, a.mid.data(), d_attn_.data(), int64_t{N} * C);
  }
  needs(layout_.FinalNorm());
  needs(layout_.Head());
  NormForward(norm_f_.data(), mean_f_.data(), rstd_f_.data(), out_.data(), p_.norm_f_w, p_.norm_f_b, N);
  ops::MatmulForward(logits_.data(), norm_f_.data(), p_.lm_head, nullptr, N, C, c.vocab);

  have_targets_ = targets != nullptr;
  if (!have_targets_) return 0.0;
  std::copy(targets, targets + N, targets_.begin());
  return ops::SoftmaxCrossEntropyForward(logits_.data(), losses_.data(), targets_.data(), N, c.vocab);
}

std::span<const float> Model::Logits(int b, int t) const {
  assert(!have_targets_ && b < B_ && t < T_);
  return {logits_.data() + (int64_t{b} * T_ + t) * config_.vocab, static_cast<size_t>(config_.vocab)};
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
  auto zero = [](std::vector<float>& v, int64_t n) { std::fill_n(v.begin(), n, 0.0f); };
  // d(an output that went through a dropout mask) = the mask applied to d(what it was added into).
  auto Masked = [&](const std::vector<float>& d, const ops::DropoutSite& site) -> const float* {
    if (site.p <= 0) return d.data();
    std::copy_n(d.begin(), NC, d_drop_.begin());
    ops::DropoutBackward(d_drop_.data(), NC, site);
    return d_drop_.data();
  };

  // The loss is the mean over N positions.
  ops::SoftmaxCrossEntropyBackward(logits_.data(), targets_.data(), N, c.vocab, loss_scale / N);
  zero(d_norm_, NC);
  ops::MatmulBackward(d_norm_.data(), g_.lm_head, nullptr, logits_.data(), norm_f_.data(), p_.lm_head, N, C,
                      c.vocab);
  done(layout_.Head());  // untied (Llama); tied to wte, it is final with the embeddings
  zero(d_res_, NC);
  NormBackward(d_res_.data(), g_.norm_f_w, g_.norm_f_b, d_norm_.data(), out_.data(), p_.norm_f_w, mean_f_.data(),
               rstd_f_.data(), N);
  done(layout_.FinalNorm());
  have_targets_ = false;  // the probabilities became gradients

  for (int l = c.n_layer - 1; l >= 0; --l) {
    LayerActs& a = acts_[l];
    const LayerViews& w = p_.layers[l];
    const LayerViews& dw = g_.layers[l];
    // FFN branch: d_res is d(layer output), which is also d(FFN output) and part of d(mid).
    const int fc_dim = gpt ? F : 2 * F;
    zero(d_act_, int64_t{N} * F);
    ops::MatmulBackward(d_act_.data(), dw.out_w, dw.out_b, Masked(d_res_, Site(3 + 3 * l)), a.act.data(), w.out_w,
                        N, F, C);
    done(layout_.LayerPart(l, "out."));
    zero(d_fc_, int64_t{N} * fc_dim);
    if (gpt) {
      ops::GeluBackward(d_fc_.data(), a.fc.data(), d_act_.data(), int64_t{N} * F);
    } else {
      ops::SwigluBackward(d_fc_.data(), a.fc.data(), d_act_.data(), N, F);
    }
    zero(d_norm_, NC);
    ops::MatmulBackward(d_norm_.data(), dw.fc_w, dw.fc_b, d_fc_.data(), a.norm2.data(), w.fc_w, N, C, fc_dim);
    done(layout_.LayerPart(l, "fc."));
    NormBackward(d_res_.data(), dw.norm2_w, dw.norm2_b, d_norm_.data(), a.mid.data(), w.norm2_w, a.mean2.data(),
                 a.rstd2.data(), N);
    done(layout_.LayerPart(l, "norm2."));
    // Attention branch: d_res is now d(mid), also d(attention projection output) and part of d(input).
    zero(d_attn_, NC);
    ops::MatmulBackward(d_attn_.data(), dw.proj_w, dw.proj_b, Masked(d_res_, Site(1 + 3 * l)), a.attn.data(),
                        w.proj_w, N, C, C);
    done(layout_.LayerPart(l, "proj."));
    zero(d_qkv_, int64_t{N} * QKV);
    ops::AttentionBackward(d_qkv_.data(), d_attn_.data(), a.qkv.data(), a.att.data(), B, T, H, KV, hd,
                           Site(2 + 3 * l));
    if (!gpt) ops::RopeBackward(d_qkv_.data(), B, T, H, KV, hd, c.rope_theta);
    zero(d_norm_, NC);
    ops::MatmulBackward(d_norm_.data(), dw.qkv_w, dw.qkv_b, d_qkv_.data(), a.norm1.data(), w.qkv_w, N, C, QKV);
    done(layout_.LayerPart(l, "qkv."));
    NormBackward(d_res_.data(), dw.norm1_w, dw.norm1_b, d_norm_.data(), a.input.data(), w.norm1_w, a.mean1.data(),
                 a.rstd1.data(), N);
    done(layout_.LayerPart(l, "norm1."));
  }
  ops::DropoutBackward(d_res_.data(), NC, Site(0));
  ops::EmbeddingBackward(g_.wte, g_.wpe, d_res_.data(), tokens_.data(), B, T, C);
  done(layout_.Embeddings());
}

void Model::ZeroGrad() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

}  // namespace srunway::trainer
