// The trainer's Linear layers on the GPU through cuBLASLt, opened at run time like every site GPU library
// (common/site_library.h: SRUNWAY_CUBLASLT_LIBRARY, the linker's path, the CUDA install, Python wheels). bf16
// inputs, fp32 accumulation; the twin of ops/cpu/matmul.cc, checked against it by the gpu suite's cuda_ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "trainer/device/device.h"
#include "trainer/ops/cuda/kernels.h"

namespace srunway::trainer::cuda {

class Matmul {
 public:
  // Loads cuBLASLt and gives it a workspace on `device` (a GPU), which must outlive it.
  static common::StatusOr<std::unique_ptr<Matmul>> Open(Device& device, size_t workspace_bytes = size_t{32} << 20);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // out[N, OC] = inp[N, C] @ weight[OC, C]^T (+ bias[OC] when not null) (+ residual[N, OC] when not null: the
  // product's C, beta 1), bf16.
  common::Status Forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                         Stream stream, const bf16* residual = nullptr);
  // dinp[N, C] = dout @ weight (bf16); dweight[OC, C] += dout^T @ inp (fp32; written over what dweight holds with
  // write_dweight: the product's beta 0); dbias[OC] += the column sums of dout (fp32) when dbias is not null.
  // Any of dinp and dweight may be null (not wanted). With both dweight and
  // dbias, the sums come from the weight gradient's GEMM (BGRADB: cuBLASLt sums dout as it reads it) where
  // epilogues(), bgradb() and this cuBLASLt has it with an fp32 bias gradient; else from the bias gradient kernel.
  common::Status Backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                          const bf16* weight, int N, int C, int OC, Stream stream, bool write_dweight = false);

  // A Linear layer followed by GELU (tanh form): pre = inp @ weight^T (+ bias), act = GELU(pre), both [N, OC].
  // One GEMM with cuBLASLt's GELU_AUX(_BIAS) epilogue, which stores both, where epilogues() and OC is a
  // multiple of 8 (the epilogue's leading dimension) and cuBLASLt has an algorithm for it; else Forward and the
  // GELU kernel.
  common::Status ForwardGelu(bf16* act, bf16* pre, const bf16* inp, const bf16* weight, const bf16* bias, int N,
                             int C, int OC, Stream stream);
  // The backward of a Linear layer whose input was act = GELU(pre), [N, C]: dpre = (dout @ weight) * GELU'(pre)
  // (written, bf16), dweight and dbias as Backward; dpre_bias[C] += the column sums of dpre (fp32) when not null.
  // The DGELU epilogue under the same conditions (C a multiple of 8), else Backward and the GELU backward kernel
  // in place. With dpre_bias, DGELU_BGRAD, which also sums dpre's columns (in fp32, before dpre is rounded to
  // bf16), where this cuBLASLt has it with an fp32 bias gradient, else with a bf16 one (the fp32 sums rounded
  // once); else the bias gradient kernel over dpre.
  common::Status BackwardGelu(bf16* dpre, float* dpre_bias, float* dweight, float* dbias, const bf16* dout,
                              const bf16* act, const bf16* pre, const bf16* weight, int N, int C, int OC,
                              Stream stream, bool write_dweight = false);
  // Whether the epilogues (GELU's, and the bias gradients' DGELU_BGRAD and BGRADB) are tried: yes unless
  // SRUNWAY_GELU_EPILOGUE=0 was set when this was opened.
  bool epilogues() const { return epilogues_; }
  void set_epilogues(bool on) { epilogues_ = on; }
  // How many ForwardGelu/BackwardGelu calls tried an epilogue and went the unfused way (no algorithm for it).
  int64_t gelu_fallbacks() const { return gelu_fallbacks_; }
  // How many BackwardGelu calls with a dpre_bias tried DGELU_BGRAD and summed dpre with the kernel instead.
  int64_t bias_gradient_fallbacks() const { return bias_gradient_fallbacks_; }
  // How many BackwardGelu calls had DGELU_BGRAD's sums in bf16 (this cuBLASLt had none in fp32).
  int64_t bf16_bias_sums() const { return bf16_bias_sums_; }
  // Whether Backward's bias gradients are asked of BGRADB (with epilogues()): yes unless SRUNWAY_BGRADB=0 was set
  // when this was opened, which leaves them to the bias gradient kernel, to compare (cuBLASLt's own bias gradient
  // kernel ran at about half the column-sum kernel's bandwidth on an H200).
  bool bgradb() const { return bgradb_; }
  void set_bgradb(bool on) { bgradb_ = on; }
  // How many weight gradients with a bias gradient tried BGRADB and summed dout with the kernel instead, and how
  // many had their sums from it.
  int64_t bgradb_fallbacks() const { return bgradb_fallbacks_; }
  int64_t bgradb_sums() const { return bgradb_sums_; }
  // How many times cuBLASLt's heuristic was asked for an algorithm: once per distinct product (shape, types,
  // epilogue, pointer alignments), whose choice every later call of that product reuses.
  int64_t algorithm_searches() const { return algorithm_searches_; }
  // Whether each product's algorithm is the fastest of the heuristic's first kTunedCandidates, timed on the GPU
  // at the product's first call, rather than the heuristic's first: yes unless SRUNWAY_GEMM_TUNE=0 was set when
  // this was opened. A candidate must be 3% faster than the first to be kept; timing noise may choose another
  // algorithm from run to run (and rank to rank), whose results differ in the last bits, which is why a
  // checkpoint keeps the choices (Choices, KeepChoices).
  static constexpr int kTunedCandidates = 8;
  bool tuning() const { return tuning_; }
  void set_tuning(bool on) { tuning_ = on; }
  // Whether the products that write bf16 (the forward's and dinp's) may sum split-K partial results in bf16
  // (cuBLASLt's default, as PyTorch's), or only in fp32 (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) or unsplit: Megatron's
  // --disable-bf16-reduced-precision-matmul, PyTorch's allow_bf16_reduced_precision_reduction = False. The weight
  // gradients write fp32, whose split-K sums are fp32 either way. Changing it drops the plans made so far.
  bool fp32_split_k_sums() const { return fp32_split_k_sums_; }
  void set_fp32_split_k_sums(bool on);
  // Of the products timed (those with more than one candidate), how many, and how many kept another algorithm
  // than the heuristic's first.
  int64_t tuned_products() const { return tuned_products_; }
  int64_t tuned_changes() const { return tuned_changes_; }
  // The choices of the products with more than one candidate, timed or kept, for a checkpoint: {"gpu": the GPU's
  // name, "cublaslt": cuBLASLt's version, "products": {product: [the candidate chosen, of how many]}, and with
  // fp32_split_k_sums() "split_k_sums": "fp32"}; null when there are none.
  common::Json Choices() const;
  // Choices a checkpoint kept (Choices' form): those products take them at their first call instead of timing
  // their candidates, where the heuristic offers as many as it did then, so that a resumed run computes as the run
  // that saved them did. FailedPrecondition (nothing taken) when they were made on another GPU or cuBLASLt, or
  // with the other fp32_split_k_sums() (another list of candidates), DataLoss when they are malformed.
  common::Status KeepChoices(const common::Json& choices);
  // How many products took a kept choice instead of being timed.
  int64_t kept_products() const { return kept_products_; }

  const std::string& library_path() const;

 private:
  struct Api;
  struct Gemm;
  struct Epilogue;
  struct Plan;
  struct Algorithm;
  Matmul(std::unique_ptr<Api> api, Device& device, Buffer workspace);
  // D (m x n) = epilogue(alpha op(A) op(B) + beta C), column-major, C and D the same matrix. NotFound when
  // this cuBLASLt does not support the epilogue or has no algorithm for the product.
  common::Status Run(const Gemm& gemm, const void* a, const void* b, void* d, const Epilogue& epilogue,
                     Stream stream);
  // The descriptors of a product like Run's and cuBLASLt's choice of algorithm for it (with tuning(), the
  // fastest of its candidates, timed on `stream`).
  common::Status MakePlan(Plan& plan, const std::string& key, const Gemm& gemm, const void* a, const void* b, void* d,
                          const Epilogue& epilogue, Stream stream);
  // What Choices names this GPU and cuBLASLt by.
  std::string GpuName() const;
  size_t LibraryVersion() const;
  // Times each of `candidates` running the product and keeps the fastest in `plan`.
  common::Status ChooseFastest(Plan& plan, const std::vector<Algorithm>& candidates, const Gemm& gemm, const void* a,
                               const void* b, void* d, Stream stream);
  // SRUNWAY_LOG=debug: a line where the plan's algorithm splits k, saying whether it adds the parts in bf16.
  void LogSplitK(const Plan& plan, const Gemm& gemm) const;
  // The epilogue's bias and aux pointers, which differ from call to call of one plan.
  common::Status SetPointers(const Plan& plan, const Epilogue& epilogue);
  // The products of a Linear layer [N, C] -> [N, OC] (see matmul.cc): out, and dinp written in bf16.
  static Gemm ForwardProduct(int N, int C, int OC);
  static Gemm InputGradientProduct(int N, int C, int OC);
  // Run with a bias gradient epilogue (DGELU_BGRAD, BGRADB), whose sums (fp32, or bf16 with `bf16_sums`)
  // cuBLASLt writes (never adds) into bias_sums_ (the epilogue's bias pointer and type are set here), then
  // dbias[count] += those sums. NotFound, with nothing run, when this cuBLASLt has no algorithm for it.
  common::Status RunAddingBiasSums(const Gemm& gemm, const void* a, const void* b, void* d, Epilogue epilogue,
                                   float* dbias, int count, Stream stream, bool bf16_sums = false);
  // dbias[OC] += the column sums of dout [N, OC] by the bias gradient kernel, in cuBLASLt's workspace.
  common::Status BiasGradientKernel(float* dbias, const bf16* dout, int N, int OC, Stream stream);
  // Backward's dweight and dbias.
  common::Status WeightGradients(float* dweight, float* dbias, const bf16* dout, const bf16* inp, int N, int C, int OC,
                                 Stream stream, bool write_dweight);

  std::unique_ptr<Api> api_;
  Device& device_;
  Buffer workspace_;
  Buffer bias_sums_;  // DGELU_BGRAD's or BGRADB's sums, added to the bias gradient after (cuBLASLt writes them)
  bool epilogues_ = true;
  bool bgradb_ = true;
  bool tuning_ = false;
  bool fp32_split_k_sums_ = false;
  int64_t tuned_products_ = 0;
  int64_t tuned_changes_ = 0;
  std::map<std::string, std::pair<int, int>> kept_;  // KeepChoices': product -> (chosen, candidates)
  int64_t kept_products_ = 0;
  int64_t gelu_fallbacks_ = 0;
  int64_t bias_gradient_fallbacks_ = 0;
  int64_t bf16_bias_sums_ = 0;
  int64_t bgradb_fallbacks_ = 0;
  int64_t bgradb_sums_ = 0;
  int64_t algorithm_searches_ = 0;
};

}  // namespace srunway::trainer::cuda
