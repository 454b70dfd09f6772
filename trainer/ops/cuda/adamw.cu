// AdamW, element by element in the order of optim/adamw.cc (torch.optim.AdamW's single-tensor path).
#include "trainer/ops/cuda/common.cuh"

namespace srunway::trainer::cuda {
namespace {

struct AdamWStep {
  float beta1, beta2, eps, decay, step_size, bias2_sqrt, grad_scale;
};

// One element's update: its moments in place, its new value returned.
__device__ __forceinline__ float Updated(const AdamWStep& s, float param, float g, float& m, float& v) {
  const float grad = g * s.grad_scale;
  param *= s.decay;
  m = m + (grad - m) * (1.0f - s.beta1);
  v = v * s.beta2 + (1.0f - s.beta2) * grad * grad;
  return param - s.step_size * m / (sqrtf(v) / s.bias2_sqrt + s.eps);
}

__global__ void AdamWKernel(float* p, bf16* p_bf16, const float* g, float* m, float* v, int64_t n, AdamWStep s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float param = Updated(s, p[i], g[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    p[i] = param;
    if (p_bf16 != nullptr) Store(p_bf16, i, param);
  }
}

// Four bf16 values in 8 bytes.
union Pack4 {
  uint2 raw;
  __nv_bfloat162 pairs[2];
};

// The same four elements at a time, read and written 16 bytes at a time (8 for the bf16 copy): AdamW reads or
// writes 30 bytes per parameter and does little else, so the width of its accesses sets its speed.
__global__ void AdamWVectorKernel(float4* p, uint2* p_bf16, const float4* g, float4* m, float4* v, int64_t quads,
                                  AdamWStep s) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < quads; i += int64_t{gridDim.x} * blockDim.x) {
    float4 param = p[i], mi = m[i], vi = v[i];
    const float4 gi = g[i];
    param.x = Updated(s, param.x, gi.x, mi.x, vi.x);
    param.y = Updated(s, param.y, gi.y, mi.y, vi.y);
    param.z = Updated(s, param.z, gi.z, mi.z, vi.z);
    param.w = Updated(s, param.w, gi.w, mi.w, vi.w);
    m[i] = mi;
    v[i] = vi;
    p[i] = param;
    if (p_bf16 != nullptr) {
      Pack4 pack;
      pack.pairs[0] = __floats2bfloat162_rn(param.x, param.y);
      pack.pairs[1] = __floats2bfloat162_rn(param.z, param.w);
      p_bf16[i] = pack.raw;
    }
  }
}

bool Aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

int AdamW(float* p, bf16* p_bf16, const float* g, float* m, float* v, int64_t n, float beta1, float beta2, float eps,
          float decay, float step_size, float bias2_sqrt, float grad_scale, Stream stream) {
  if (n <= 0) return 0;
  const AdamWStep s{beta1, beta2, eps, decay, step_size, bias2_sqrt, grad_scale};
  // A run of the parameter buffer starts where its tensor does: most are 16-byte aligned in all four buffers, and
  // the few that are not (or a tail of fewer than four) take the scalar kernel.
  const bool vector = Aligned(p, 16) && Aligned(g, 16) && Aligned(m, 16) && Aligned(v, 16) && Aligned(p_bf16, 8);
  const int64_t quads = vector ? n / 4 : 0;
  if (quads > 0) {
    LaunchKernel(AdamWVectorKernel, Blocks(quads), kThreads, 0, AsStream(stream), reinterpret_cast<float4*>(p),
                 reinterpret_cast<uint2*>(p_bf16), reinterpret_cast<const float4*>(g), reinterpret_cast<float4*>(m),
                 reinterpret_cast<float4*>(v), quads, s);
    if (int rc = Launched(); rc != 0) return rc;
  }
  const int64_t done = quads * 4;
  if (done == n) return 0;
  LaunchKernel(AdamWKernel, Blocks(n - done), kThreads, 0, AsStream(stream), p + done,
               p_bf16 != nullptr ? p_bf16 + done : nullptr, g + done, m + done, v + done, n - done, s);
  return Launched();
}

}  // namespace srunway::trainer::cuda
