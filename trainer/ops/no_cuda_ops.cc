// cuda::NewCudaOps in a build without nvcc: srunway-train trains on the host only.
#include "trainer/ops/cuda/cuda_ops.h"

namespace srunway::trainer::cuda {

common::StatusOr<std::unique_ptr<Ops>> NewCudaOps(Device&) {
  return common::FailedPrecondition("this srunway-train was built without its CUDA kernels (nvcc was not found "
                                    "when it was built)");
}

}  // namespace srunway::trainer::cuda
