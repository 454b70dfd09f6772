// The trainer's Linear layers on the GPU through cuBLASLt, opened at run time like every site GPU library
// (common/site_library.h: SRUNWAY_CUBLASLT_LIBRARY, the linker's path, the CUDA install, Python wheels). bf16
// inputs, fp32 accumulation; the twin of ops/cpu/matmul.cc, checked against it by the gpu suite's cuda_ops.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

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

  // out[N, OC] = inp[N, C] @ weight[OC, C]^T (+ bias[OC] when not null), bf16.
  common::Status Forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int C, int OC,
                         Stream stream);
  // dinp[N, C] = dout @ weight (bf16); dweight[OC, C] += dout^T @ inp (fp32); dbias[OC] += the column sums of
  // dout (fp32) when dbias is not null. Any of dinp and dweight may be null (not wanted).
  common::Status Backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                          const bf16* weight, int N, int C, int OC, Stream stream);

  const std::string& library_path() const;

 private:
  struct Api;
  struct Gemm;
  Matmul(std::unique_ptr<Api> api, Buffer workspace);
  // D (m x n) = alpha op(A) op(B) + beta C, column-major, C and D the same matrix.
  common::Status Run(const Gemm& gemm, const void* a, const void* b, void* d, const void* bias, Stream stream);

  std::unique_ptr<Api> api_;
  Buffer workspace_;
};

}  // namespace srunway::trainer::cuda
