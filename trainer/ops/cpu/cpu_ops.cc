// The host's Ops: ops/cpu's functions, every tensor fp32.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "trainer/ops/ops.h"
#include "trainer/optim/schedule.h"

namespace srunway::trainer {
namespace {

float* F(void* p) { return static_cast<float*>(p); }
const float* F(const void* p) { return static_cast<const float*>(p); }

class CpuOps : public Ops {
 public:
  DType act_dtype() const override { return DType::kFloat32; }
  std::string Describe(int, bool, bool) const override { return "the host's fp32 operations (ops/cpu)"; }
  common::Status CheckHeadSize(int) const override { return common::Status::Ok(); }
  common::Status TakeError() override { return common::Status::Ok(); }

  void EmbeddingForward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int T, int C,
                        float scale, const Documents& docs) override {
    cpu::EmbeddingForward(F(out), tokens, F(wte), F(wpe), B, T, C, scale, docs);
  }
  void EmbeddingBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int T, int C,
                         float scale, const Documents& docs) override {
    cpu::EmbeddingBackward(dwte, dwpe, F(dout), tokens, B, T, C, scale, docs);
  }
  void LayerNormForward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                        int N, int C, float eps, float weight_offset) override {
    cpu::LayerNormForward(F(out), mean, rstd, F(inp), F(weight), F(bias), N, C, eps, weight_offset);
  }
  void LayerNormBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, const float* mean, const float* rstd, int N, int C,
                         float weight_offset) override {
    cpu::LayerNormBackward(F(dinp), dweight, dbias, F(dout), F(inp), F(weight), mean, rstd, N, C, weight_offset);
  }
  void RmsNormForward(void* out, float* rstd, const void* inp, const void* weight, int N, int C, float eps,
                      float weight_offset) override {
    cpu::RmsNormForward(F(out), rstd, F(inp), F(weight), N, C, eps, weight_offset);
  }
  void RmsNormBackward(void* dinp, float* dweight, const void* dout, const void* inp, const void* weight,
                       const float* rstd, int N, int C, float weight_offset) override {
    cpu::RmsNormBackward(F(dinp), dweight, F(dout), F(inp), F(weight), rstd, N, C, weight_offset);
  }
  void ResidualLayerNormForward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                const void* weight, const void* bias, int N, int C, float eps,
                                float weight_offset) override {
    cpu::ResidualForward(F(residual), F(a), F(b), int64_t{N} * C);
    cpu::LayerNormForward(F(out), mean, rstd, F(residual), F(weight), F(bias), N, C, eps, weight_offset);
  }
  void ResidualRmsNormForward(void* residual, void* out, float* rstd, const void* a, const void* b,
                              const void* weight, int N, int C, float eps, float weight_offset) override {
    cpu::ResidualForward(F(residual), F(a), F(b), int64_t{N} * C);
    cpu::RmsNormForward(F(out), rstd, F(residual), F(weight), N, C, eps, weight_offset);
  }
  void MatmulForward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                     int OC) override {
    cpu::MatmulForward(F(out), F(inp), F(weight), F(bias), N, C, OC);
  }
  void MatmulResidualForward(void* out, const void* inp, const void* weight, const void* bias, const void* residual,
                             int N, int C, int OC) override {
    cpu::MatmulForward(F(out), F(inp), F(weight), F(bias), N, C, OC);
    cpu::ResidualForward(F(out), F(residual), F(out), int64_t{N} * OC);
  }
  void MatmulBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp, const void* weight,
                      int N, int C, int OC, WeightGrad dweight_mode) override {
    cpu::MatmulBackward(F(dinp), dweight, dbias, F(dout), F(inp), F(weight), N, C, OC,
                        dweight_mode == WeightGrad::kWrite);
  }
  void MatmulGeluForward(void* act, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                         int OC) override {
    cpu::MatmulForward(F(pre), F(inp), F(weight), F(bias), N, C, OC);
    cpu::GeluForward(F(act), F(pre), int64_t{N} * OC);
  }
  void MatmulGeluBackward(void* dpre, float* dpre_bias, float* dweight, float* dbias, const void* dout, const void* act,
                          const void* pre, const void* weight, int N, int C, int OC, WeightGrad dweight_mode) override {
    cpu::MatmulBackward(F(dpre), dweight, dbias, F(dout), F(act), F(weight), N, C, OC,
                        dweight_mode == WeightGrad::kWrite);
    cpu::GeluBackward(F(dpre), F(pre), F(dpre), int64_t{N} * C);  // in place: d(act) becomes d(pre)
    if (dpre_bias != nullptr) cpu::BiasBackward(dpre_bias, F(dpre), N, C);
  }
  int64_t AttentionSaved(int B, int H, int T) const override { return int64_t{B} * H * T * T; }
  void AttentionForward(void* out, float* saved, const void* qkv, int B, int T, int H, int KV, int hd,
                        const DropoutSite& dropout, const Documents& docs, const void* sinks) override {
    cpu::AttentionForward(F(out), saved, F(qkv), B, T, H, KV, hd, dropout, docs, F(sinks));
  }
  void AttentionBackward(void* dqkv, const void* dout, const void*, const void* qkv, const float* saved, int B, int T,
                         int H, int KV, int hd, const DropoutSite& dropout, const Documents& docs, const void*,
                         float* dsinks) override {
    cpu::AttentionBackward(F(dqkv), F(dout), F(qkv), saved, B, T, H, KV, hd, dropout, docs, dsinks);
  }
  void RopeForward(void* qkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                   const Documents& docs) override {
    cpu::RopeForward(F(qkv), B, T, H, KV, hd, rope, docs);
  }
  void RopeBackward(void* dqkv, int B, int T, int H, int KV, int hd, const RopeFrequencies& rope,
                    const Documents& docs) override {
    cpu::RopeBackward(F(dqkv), B, T, H, KV, hd, rope, docs);
  }
  void CopyRows(void* dst, int64_t dst_ld, const void* src, int64_t src_ld, int64_t rows, int64_t cols) override {
    cpu::CopyRows(F(dst), dst_ld, F(src), src_ld, rows, cols);
  }
  void GeluForward(void* out, const void* inp, int64_t n, bool exact) override {
    (exact ? cpu::GeluErfForward : cpu::GeluForward)(F(out), F(inp), n);
  }
  void GeluBackward(void* dinp, const void* inp, const void* dout, int64_t n, bool exact) override {
    (exact ? cpu::GeluErfBackward : cpu::GeluBackward)(F(dinp), F(inp), F(dout), n);
  }
  void SquaredReluForward(void* out, const void* inp, int64_t n) override {
    cpu::SquaredReluForward(F(out), F(inp), n);
  }
  void SquaredReluBackward(void* dinp, const void* inp, const void* dout, int64_t n) override {
    cpu::SquaredReluBackward(F(dinp), F(inp), F(dout), n);
  }
  void SwigluForward(void* out, const void* inp, int N, int F_, const Glu& glu) override {
    cpu::SwigluForward(F(out), F(inp), N, F_, glu);
  }
  void SwigluBackward(void* dinp, const void* inp, const void* dout, int N, int F_, const Glu& glu) override {
    cpu::SwigluBackward(F(dinp), F(inp), F(dout), N, F_, glu);
  }
  void ResidualForward(void* out, const void* a, const void* b, int64_t n) override {
    cpu::ResidualForward(F(out), F(a), F(b), n);
  }
  void Dropout(void* x, int64_t n, const DropoutSite& site) override { cpu::DropoutForward(F(x), n, site); }
  double ClassifierForward(void* logits, float* losses, const int32_t* targets, int N, int V) override {
    return cpu::SoftmaxCrossEntropyForward(F(logits), losses, targets, N, V);
  }
  void ClassifierBackward(void* logits, const int32_t* targets, int N, int V, float dloss) override {
    cpu::SoftmaxCrossEntropyBackward(F(logits), targets, N, V, dloss);
  }
  void CastWeights(void* out, const float* params, int64_t n) override {
    if (out != params) std::memmove(out, params, sizeof(float) * static_cast<size_t>(n));
  }
  void GradsToBf16(void* out, const float* in, int64_t n) override {
    auto* half = static_cast<uint16_t*>(out);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) half[i] = common::FloatToBFloat16(in[i]);
  }
  void GradsFromBf16(float* out, const void* in, int64_t n) override {
    const auto* half = static_cast<const uint16_t*>(in);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = common::BFloat16ToFloat(half[i]);
  }
  void AdamW(float* params, void*, const float* grads, float* m, float* v, int64_t n,
             const cpu::AdamWArgs& args) override {
    cpu::AdamWUpdate(params, grads, m, v, n, args);
  }
  int64_t CountZeros(const float* values, int64_t n) override {
    return static_cast<int64_t>(std::count(values, values + n, 0.0f));
  }
  double SumOfSquares(const float* values, int64_t n) override {
    return trainer::SumOfSquares({values, static_cast<size_t>(n)});
  }
};

}  // namespace

std::unique_ptr<Ops> NewCpuOps() { return std::make_unique<CpuOps>(); }

Placement::Placement(Device* device, Ops* ops) {
  if (device == nullptr) own_device_ = NewCpuDevice();
  if (ops == nullptr) own_ops_ = NewCpuOps();
  device_ = device != nullptr ? device : own_device_.get();
  ops_ = ops != nullptr ? ops : own_ops_.get();
}

}  // namespace srunway::trainer
