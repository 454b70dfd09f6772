// ErrorText: the CUDA runtime's words for an error code.
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {

const char* ErrorText(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace srunway::trainer::cuda
