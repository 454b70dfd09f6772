// See cuda_ops.h. Each call queues its kernel; the first launch that fails is kept for TakeError.
#include "trainer/ops/cuda/cuda_ops.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/log.h"
#include "trainer/ops/cuda/cudnn_attention.h"
#include "trainer/ops/cuda/kernels.h"
#include "trainer/ops/cuda/matmul.h"

namespace srunway::trainer::cuda {
namespace {

using common::Status;

bf16* H(void* p) { return static_cast<bf16*>(p); }
const bf16* H(const void* p) { return static_cast<const bf16*>(p); }

class CudaOps : public Ops {
 public:
  // `no_cudnn`: why cuDNN is not used where it would have been by default (empty otherwise).
  CudaOps(Device& device, std::unique_ptr<Matmul> matmul, std::unique_ptr<CudnnAttention> cudnn, std::string no_cudnn)
      : device_(device),
        stream_(device.native(device.main_stream())),
        matmul_(std::move(matmul)),
        cudnn_(std::move(cudnn)),
        no_cudnn_(std::move(no_cudnn)) {}

  DType act_dtype() const override { return DType::kBFloat16; }
  std::string Describe(int head_dim, bool gelu, bool documents) const override {
    const char* kernels = AttentionKernelName(head_dim, documents);
    const std::string attention =
        cudnn_ == nullptr || documents
            ? fmt::format("{}{}", kernels != nullptr ? kernels : "nothing",
                          cudnn_ != nullptr ? " (documents: cuDNN's graphs here take no document mask)" : "")
            : fmt::format("cuDNN {} from {} ({} {})", cudnn_->version(), cudnn_->library_path(),
                          AttentionIs("auto") ? "or, where faster," : "else", kernels != nullptr ? kernels : "nothing");
    const std::string epilogues =
        !gelu ? "" : matmul_->epilogues() ? "GELU and bias gradients in cuBLASLt's epilogues, "
                                          : "GELU and bias gradients by its own kernels, ";
    return fmt::format(
        "attention on {}, {}cuBLASLt from {}{}{}{}", attention, epilogues, matmul_->library_path(),
        matmul_->tuning() ? " (each product's algorithm the fastest of its first candidates, timed)" : "",
        matmul_->fp32_split_k_sums() ? ", split-K sums in fp32" : "",
        no_cudnn_.empty() ? "" : "; no cuDNN attention: " + no_cudnn_);
  }
  Status CheckHeadSize(int head_dim) const override {
    if (AttentionKernelName(head_dim) != nullptr) return Status::Ok();
    return common::InvalidArgument(
        "head size {} (--hidden-size / --num-attention-heads): attention on the GPU takes "
        "16, 32, 64, 96 or 128, or a multiple of 32 up to 256{}",
        head_dim, AttentionIs("") ? "" : " (SRUNWAY_ATTENTION is set)");
  }
  Status TakeError() override { return std::exchange(error_, Status::Ok()); }
  common::Json TimedChoices() const override { return matmul_->Choices(); }
  Status KeepTimedChoices(const common::Json& choices) override { return matmul_->KeepChoices(choices); }
  bool KeepSplitKSumsFp32() override {
    matmul_->set_fp32_split_k_sums(true);
    return true;
  }

  void EmbeddingForward(void* out, const int32_t* tokens, const void* wte, const void* wpe, int B, int T, int C,
                        float scale, const Documents& docs) override {
    Check(cuda::EmbeddingForward(H(out), tokens, docs.positions, H(wte), H(wpe), B, T, C, scale, stream_),
          "embedding forward");
  }
  void EmbeddingBackward(float* dwte, float* dwpe, const void* dout, const int32_t* tokens, int B, int T, int C,
                         float scale, const Documents& docs) override {
    Check(cuda::EmbeddingBackward(dwte, dwpe, H(dout), tokens, docs.positions, B, T, C, scale, stream_),
          "embedding backward");
  }
  void LayerNormForward(void* out, float* mean, float* rstd, const void* inp, const void* weight, const void* bias,
                        int N, int C, float eps, float weight_offset) override {
    Check(cuda::LayerNormForward(H(out), mean, rstd, H(inp), H(weight), H(bias), N, C, eps, weight_offset, stream_),
          "layernorm forward");
  }
  void LayerNormBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp,
                         const void* weight, const float* mean, const float* rstd, int N, int C,
                         float weight_offset) override {
    Check(cuda::LayerNormBackward(H(dinp), dweight, dbias, H(dout), H(inp), H(weight), mean, rstd, N, C, weight_offset,
                                  stream_),
          "layernorm backward");
  }
  void RmsNormForward(void* out, float* rstd, const void* inp, const void* weight, int N, int C, float eps,
                      float weight_offset) override {
    Check(cuda::RmsNormForward(H(out), rstd, H(inp), H(weight), N, C, eps, weight_offset, stream_), "rmsnorm forward");
  }
  void RmsNormBackward(void* dinp, float* dweight, const void* dout, const void* inp, const void* weight,
                       const float* rstd, int N, int C, float weight_offset) override {
    Check(cuda::RmsNormBackward(H(dinp), dweight, H(dout), H(inp), H(weight), rstd, N, C, weight_offset, stream_),
          "rmsnorm backward");
  }
  void ResidualLayerNormForward(void* residual, void* out, float* mean, float* rstd, const void* a, const void* b,
                                const void* weight, const void* bias, int N, int C, float eps,
                                float weight_offset) override {
    Check(cuda::ResidualLayerNormForward(H(residual), H(out), mean, rstd, H(a), H(b), H(weight), H(bias), N, C, eps,
                                         weight_offset, stream_),
          "residual + layernorm forward");
  }
  void ResidualRmsNormForward(void* residual, void* out, float* rstd, const void* a, const void* b,
                              const void* weight, int N, int C, float eps, float weight_offset) override {
    Check(cuda::ResidualRmsNormForward(H(residual), H(out), rstd, H(a), H(b), H(weight), N, C, eps, weight_offset,
                                       stream_),
          "residual + rmsnorm forward");
  }
  void MatmulForward(void* out, const void* inp, const void* weight, const void* bias, int N, int C,
                     int OC) override {
    Keep(matmul_->Forward(H(out), H(inp), H(weight), H(bias), N, C, OC, stream_));
  }
  void MatmulResidualForward(void* out, const void* inp, const void* weight, const void* bias, const void* residual,
                             int N, int C, int OC) override {
    Keep(matmul_->Forward(H(out), H(inp), H(weight), H(bias), N, C, OC, stream_, H(residual)));
  }
  void MatmulBackward(void* dinp, float* dweight, float* dbias, const void* dout, const void* inp, const void* weight,
                      int N, int C, int OC, WeightGrad dweight_mode) override {
    Keep(matmul_->Backward(H(dinp), dweight, dbias, H(dout), H(inp), H(weight), N, C, OC, stream_,
                           dweight_mode == WeightGrad::kWrite));
  }
  void MatmulGeluForward(void* act, void* pre, const void* inp, const void* weight, const void* bias, int N, int C,
                         int OC) override {
    Keep(matmul_->ForwardGelu(H(act), H(pre), H(inp), H(weight), H(bias), N, C, OC, stream_));
  }
  void MatmulGeluBackward(void* dpre, float* dpre_bias, float* dweight, float* dbias, const void* dout, const void* act,
                          const void* pre, const void* weight, int N, int C, int OC, WeightGrad dweight_mode) override {
    Keep(matmul_->BackwardGelu(H(dpre), dpre_bias, dweight, dbias, H(dout), H(act), H(pre), H(weight), N, C, OC,
                               stream_, dweight_mode == WeightGrad::kWrite));
  }
  int64_t AttentionSaved(int B, int H_, int T) const override { return int64_t{B} * H_ * T; }
  void AttentionForward(void* out, float* saved, const void* qkv, int B, int T, int H_, int KV, int hd,
                        const DropoutSite& dropout, const Documents& docs, const void* sinks) override {
    auto kernels = [&] {
      Check(cuda::AttentionForward(H(out), saved, H(qkv), B, T, H_, KV, hd, dropout.p, dropout.key, dropout.first_index,
                                   docs.starts, H(sinks), stream_),
            "attention forward");
    };
    // cuDNN draws its own dropout masks, not the CPU twin's: attention dropout stays on the kernels, as do
    // documents and sinks, which our graphs do not take.
    const AttentionShape shape{B, T, H_, KV, hd};
    if (dropout.p == 0 && docs.starts == nullptr && sinks == nullptr &&
        OnCudnn(
            false, shape, [&] { return cudnn_->Forward(out, saved, qkv, shape, device_.main_stream()); }, kernels)) {
      return;
    }
    kernels();
  }
  void AttentionBackward(void* dqkv, const void* dout, const void* out, const void* qkv, const float* saved, int B,
                         int T, int H_, int KV, int hd, const DropoutSite& dropout, const Documents& docs,
                         const void* sinks, float* dsinks) override {
    auto kernels = [&] {
      const size_t scratch = static_cast<size_t>(cuda::AttentionBackwardScratch(B, T, H_, KV, hd));
      if (!Reserve(scratch_, scratch, "attention backward scratch")) return;
      Check(cuda::AttentionBackward(H(dqkv), scratch_.as<float>(), H(dout), H(out), H(qkv), saved, B, T, H_, KV, hd,
                                    dropout.p, dropout.key, dropout.first_index, docs.starts, H(sinks), dsinks,
                                    stream_),
            "attention backward");
    };
    const AttentionShape shape{B, T, H_, KV, hd};
    if (dropout.p == 0 && docs.starts == nullptr && sinks == nullptr &&
        OnCudnn(
            true, shape, [&] { return cudnn_->Backward(dqkv, dout, out, qkv, saved, shape, device_.main_stream()); },
            kernels)) {
      return;
    }
    kernels();
  }
  void RopeForward(void* qkv, int B, int T, int H_, int KV, int hd, const RopeFrequencies& rope,
                   const Documents& docs) override {
    Check(cuda::RopeForward(H(qkv), docs.positions, B, T, H_, KV, hd, rope, stream_), "rope forward");
  }
  void RopeBackward(void* dqkv, int B, int T, int H_, int KV, int hd, const RopeFrequencies& rope,
                    const Documents& docs) override {
    Check(cuda::RopeBackward(H(dqkv), docs.positions, B, T, H_, KV, hd, rope, stream_), "rope backward");
  }
  void CopyRows(void* dst, int64_t dst_ld, const void* src, int64_t src_ld, int64_t rows, int64_t cols) override {
    Check(cuda::CopyRows(H(dst), dst_ld, H(src), src_ld, rows, cols, stream_), "copy rows");
  }
  void GeluForward(void* out, const void* inp, int64_t n, bool exact) override {
    Check((exact ? cuda::GeluErfForward : cuda::GeluForward)(H(out), H(inp), n, stream_), "gelu forward");
  }
  void GeluBackward(void* dinp, const void* inp, const void* dout, int64_t n, bool exact) override {
    Check((exact ? cuda::GeluErfBackward : cuda::GeluBackward)(H(dinp), H(inp), H(dout), n, stream_),
          "gelu backward");
  }
  void SquaredReluForward(void* out, const void* inp, int64_t n) override {
    Check(cuda::SquaredReluForward(H(out), H(inp), n, stream_), "squared relu forward");
  }
  void SquaredReluBackward(void* dinp, const void* inp, const void* dout, int64_t n) override {
    Check(cuda::SquaredReluBackward(H(dinp), H(inp), H(dout), n, stream_), "squared relu backward");
  }
  void SwigluForward(void* out, const void* inp, int N, int F, const Glu& glu) override {
    Check(cuda::SwigluForward(H(out), H(inp), N, F, glu, stream_), "swiglu forward");
  }
  void SwigluBackward(void* dinp, const void* inp, const void* dout, int N, int F, const Glu& glu) override {
    Check(cuda::SwigluBackward(H(dinp), H(inp), H(dout), N, F, glu, stream_), "swiglu backward");
  }
  void ResidualForward(void* out, const void* a, const void* b, int64_t n) override {
    Check(cuda::ResidualForward(H(out), H(a), H(b), n, stream_), "residual forward");
  }
  void Dropout(void* x, int64_t n, const DropoutSite& site) override {
    Check(cuda::Dropout(H(x), n, site.p, site.key, site.first_index, stream_), "dropout");
  }
  double ClassifierForward(void* logits, float* losses, const int32_t* targets, int N, int V) override {
    // Each row's log-sum-exp stays for ClassifierBackward, which then reads the logits once.
    if (!Reserve(lse_, static_cast<size_t>(N), "classifier log-sum-exp")) return 0;
    Check(cuda::ClassifierLosses(losses, lse_.as<float>(), H(logits), targets, N, V, stream_), "classifier");
    return MeanLoss(losses, N);
  }
  double ClassifierForwardBackward(void* logits, float* losses, const int32_t* targets, int N, int V,
                                   float dloss) override {
    if (!Reserve(lse_, static_cast<size_t>(N), "classifier log-sum-exp")) return 0;
    Check(cuda::ClassifierLossesAndGradients(losses, lse_.as<float>(), H(logits), targets, N, V, dloss, stream_),
          "classifier");
    return MeanLoss(losses, N);
  }
  void ClassifierBackward(void* logits, const int32_t* targets, int N, int V, float dloss) override {
    Check(cuda::ClassifierGradients(H(logits), lse_.as<float>(), targets, N, V, dloss, stream_), "classifier backward");
  }
  void CastWeights(void* out, const float* params, int64_t n) override {
    Check(cuda::ToBf16(H(out), params, n, stream_), "weights to bf16");
  }
  void GradsToBf16(void* out, const float* in, int64_t n) override {
    Check(cuda::ToBf16(H(out), in, n, stream_), "gradients to bf16");
  }
  void GradsFromBf16(float* out, const void* in, int64_t n) override {
    Check(cuda::FromBf16(out, H(in), n, stream_), "gradients from bf16");
  }
  void AdamW(float* params, void* weights, const float* grads, float* m, float* v, int64_t n,
             const cpu::AdamWArgs& args) override {
    Check(cuda::AdamW(params, H(weights), grads, m, v, n, args.beta1, args.beta2, args.eps, args.decay,
                      args.step_size, args.bias2_sqrt, args.grad_scale, stream_), "adamw");
  }
  double SumOfSquares(const float* values, int64_t n) override {
    return BlockSums(cuda::SumOfSquares, values, n, "sum of squares");
  }
  int64_t CountZeros(const float* values, int64_t n) override {
    return static_cast<int64_t>(BlockSums(cuda::CountZeros, values, n, "count of zeros"));
  }

 private:
  // norm.cu's `sums` (SumOfSquares, CountZeros) of n values, its partials in partials_, read back (waits).
  double BlockSums(int (*sums)(double*, double*, const float*, int64_t, Stream), const float* values, int64_t n,
                   const char* what) {
    const size_t blocks = static_cast<size_t>(SumOfSquaresBlocks(n));
    if (blocks == 0) return 0;
    if (!Reserve(partials_, 2 * (blocks + 1), what)) return 0;  // doubles, in floats: the total last
    auto* partials = static_cast<double*>(partials_.data());
    Check(sums(partials + blocks, partials, values, n, stream_), what);
    double total = 0;
    Keep(device_.CopyToHost(&total, partials + blocks, sizeof(double), device_.main_stream()));
    Keep(device_.Synchronize(device_.main_stream()));
    return total;
  }

  // The mean of the N losses, read back (waits for the device), summed in row order as on the host.
  double MeanLoss(const float* losses, int N) {
    std::vector<float> host(static_cast<size_t>(N));
    Keep(device_.CopyToHost(host.data(), losses, sizeof(float) * host.size(), device_.main_stream()));
    Keep(device_.Synchronize(device_.main_stream()));
    double total = 0;  // in row order, as on the host
    for (float loss : host) total += loss;
    return total / N;
  }
  // Grows `buffer` (fp32, device memory) to at least `floats`; false, with the error kept, when it cannot.
  bool Reserve(Buffer& buffer, size_t floats, const char* what) {
    const Status grown = Grow(buffer, device_, DType::kFloat32, floats, device_.main_stream());
    Keep(grown.WithContext(what));
    return grown.ok();
  }
  void Check(int rc, const char* what) {
    if (rc != 0 && error_.ok()) error_ = common::Internal("{} failed on {}: {}", what, device_.name(), ErrorText(rc));
  }
  void Keep(const Status& status) {
    if (!status.ok() && error_.ok()) error_ = status;
  }
  // Whether cuDNN ran one direction of attention at `shape` (`cudnn` runs it, `kernels` the kernels; both write
  // the same outputs from the same inputs): under SRUNWAY_ATTENTION=cudnn whenever it can; under auto when it can
  // and was the faster of the two when first timed at that shape, which is told in one line.
  bool OnCudnn(bool backward, const AttentionShape& shape, const std::function<Status()>& cudnn,
               const std::function<void()>& kernels) {
    const char* what = backward ? "attention backward" : "attention forward";
    if (cudnn_ == nullptr) return false;
    if (!AttentionIs("auto")) return Cudnn(cudnn(), what);
    auto [choice, first] = cudnn_is_faster_.try_emplace(std::make_tuple(backward, shape), false);
    if (!first) return choice->second && Cudnn(cudnn(), what);
    if (!Cudnn(cudnn(), what)) return false;  // no plan: told by CudnnAttention, the kernels from now on
    const double cudnn_ms = Milliseconds([&] { Cudnn(cudnn(), what); });
    const double kernels_ms = Milliseconds(kernels);  // the outputs are the kernels' now, as good as cuDNN's
    choice->second = cudnn_ms <= kernels_ms;
    const char* kernel_name = AttentionKernelName(shape.hd);  // never null here: CheckHeadSize passed
    common::LogInfo("{} at B {} T {} H {} KV {} hd {}: cuDNN {:.3f} ms, {} {:.3f} ms: {} from now on", what, shape.B,
                    shape.T, shape.H, shape.KV, shape.hd, cudnn_ms,
                    kernel_name != nullptr ? kernel_name : "the kernels", kernels_ms,
                    choice->second ? "cuDNN" : "the kernels");
    return true;
  }
  // The mean time of a few runs of `fn` on the main stream.
  double Milliseconds(const std::function<void()>& fn) {
    constexpr int kRuns = 3;
    Keep(device_.Synchronize(device_.main_stream()));
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRuns; ++i) fn();
    Keep(device_.Synchronize(device_.main_stream()));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRuns;
  }
  // Whether cuDNN took the call: NotFound (no engine for the shape, told once by CudnnAttention) leaves it to
  // the kernels; another failure is kept.
  bool Cudnn(const Status& status, const char* what) {
    if (status.code() == common::StatusCode::kNotFound) return false;
    if (!status.ok()) Keep(status.WithContext(fmt::format("{} on {}", what, device_.name())));
    return true;
  }

  Device& device_;
  Stream stream_;
  std::unique_ptr<Matmul> matmul_;
  std::unique_ptr<CudnnAttention> cudnn_;  // SRUNWAY_ATTENTION unset, cudnn or auto, where cuDNN loaded
  std::string no_cudnn_;
  std::map<std::tuple<bool, AttentionShape>, bool> cudnn_is_faster_;  // auto: by direction (backward?) and shape
  Buffer scratch_, lse_, partials_;  // lse_: the last ClassifierForward's rows
  Status error_ = Status::Ok();
};

}  // namespace

common::StatusOr<std::unique_ptr<Ops>> NewCudaOps(Device& device) {
  SRUNWAY_ASSIGN_OR_RETURN(auto matmul, Matmul::Open(device));
  // cuDNN's attention by default (measured 2 to 3 times faster than the mma.sync kernels on an H100, README's "On
  // a GPU"); a cuDNN that cannot be opened is a warning where SRUNWAY_ATTENTION asked for it, and otherwise said
  // once, by the leader, at the end of the start-up line (Describe) rather than by every rank.
  std::unique_ptr<CudnnAttention> cudnn;
  std::string no_cudnn;
  if (AttentionIs("") || AttentionIs("cudnn") || AttentionIs("auto")) {
    auto opened = CudnnAttention::Open(device);
    if (opened.ok()) {
      cudnn = std::move(*opened);
    } else if (AttentionIs("")) {
      no_cudnn = opened.status().message();
    } else {
      common::LogWarn("SRUNWAY_ATTENTION={}: {}; attention runs on srunway's kernels",
                      AttentionIs("auto") ? "auto" : "cudnn", opened.status().message());
    }
  }
  return std::unique_ptr<Ops>(
      std::make_unique<CudaOps>(device, std::move(matmul), std::move(cudnn), std::move(no_cudnn)));
}

}  // namespace srunway::trainer::cuda
