// AdamW, element by element in the order of optim/adamw.cc (torch.optim.AdamW's single-tensor path).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

__global__ void AdamWKernel(float* p, bf16* p_bf16, const float* g, float* m, float* v, int64_t n, float beta1,
                            float beta2, float eps, float decay, float step_size, float bias2_sqrt, float grad_scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float grad = g[i] * grad_scale;
    float param = p[i] * decay;
    const float mi = m[i] + (grad - m[i]) * (1.0f - beta1);
    const float vi = v[i] * beta2 + (1.0f - beta2) * grad * grad;
    param -= step_size * mi / (sqrtf(vi) / bias2_sqrt + eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = param;
    if (p_bf16 != nullptr) Store(p_bf16, i, param);
  }
}

}  // namespace

int AdamW(float* p, bf16* p_bf16, const float* g, float* m, float* v, int64_t n, float beta1, float beta2, float eps,
          float decay, float step_size, float bias2_sqrt, float grad_scale, Stream stream) {
  if (n <= 0) return 0;
  LaunchKernel(AdamWKernel, Blocks(n), kThreads, 0, AsStream(stream), p, p_bf16, g, m, v, n, beta1, beta2, eps, decay,
               step_size, bias2_sqrt, grad_scale);
  return Launched();
}

}  // namespace srunway::trainer::cuda
