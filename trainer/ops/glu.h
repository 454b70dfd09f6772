// A Llama's gated FFN activation, one formula for the CPU operation and the CUDA kernel (as rope_frequency.h's):
// act(gate) * (up + offset) with act(x) = x sigmoid(alpha x), SwiGLU's SiLU (alpha 1) or the quick GELU of
// Megatron's --quick-geglu (alpha 1.702), or GELU's tanh approximation (GeGLU: --geglu, Gemma's gelu_pytorch_tanh),
// offset Megatron's --glu-linear-offset, and with its --activation-func-clamp-value the gate clamped above at
// `clamp` and up to [-clamp, clamp] first (gpt-oss's). GELU's tanh approximation is GPT's activation too (GeluTanh),
// and so is exact GELU (GeluErf).
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define SRUNWAY_GLU_HOST_DEVICE __host__ __device__
#else
#define SRUNWAY_GLU_HOST_DEVICE
#endif

namespace srunway::trainer {

constexpr float kQuickGeluAlpha = 1.702f;  // Megatron's quick_gelu: x sigmoid(1.702 x)

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and with it its derivative, from one
// tanh.
constexpr float kGeluSqrt2OverPi = 0.7978845608028654f, kGeluCubic = 0.044715f;
SRUNWAY_GLU_HOST_DEVICE inline float GeluTanhInner(float x) {
  return tanhf(kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x));
}
SRUNWAY_GLU_HOST_DEVICE inline float GeluTanh(float x) { return 0.5f * x * (1.0f + GeluTanhInner(x)); }
SRUNWAY_GLU_HOST_DEVICE inline float GeluTanhWithGrad(float x, float& grad) {
  const float th = GeluTanhInner(x);
  grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * x * (1.0f + th);
}
SRUNWAY_GLU_HOST_DEVICE inline float GeluTanhGrad(float x) {
  float grad;
  (void)GeluTanhWithGrad(x, grad);
  return grad;
}

// GELU exact: 0.5 x (1 + erf(x / sqrt(2))) (PyTorch's gelu; Megatron's with --no-bias-gelu-fusion, Hugging Face's
// "gelu"), and its derivative 0.5 (1 + erf(x / sqrt(2))) + x exp(-x^2 / 2) / sqrt(2 pi).
constexpr float kInvSqrt2 = 0.7071067811865476f, kInvSqrt2Pi = 0.3989422804014327f;
SRUNWAY_GLU_HOST_DEVICE inline float GeluErf(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }
SRUNWAY_GLU_HOST_DEVICE inline float GeluErfGrad(float x) {
  return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
}

struct Glu {
  float alpha = 1.0f;
  float offset = 0.0f;
  float clamp = 0.0f;  // 0: none
  bool gelu = false;   // GELU (tanh) in place of x sigmoid(alpha x)
};

// The activation of one gate and up pair.
SRUNWAY_GLU_HOST_DEVICE inline float GluForward(const Glu& glu, float gate, float up) {
  if (glu.clamp > 0.0f) {
    gate = fminf(gate, glu.clamp);
    up = fminf(fmaxf(up, -glu.clamp), glu.clamp);
  }
  if (glu.gelu) return GeluTanh(gate) * (up + glu.offset);
  const float sig = 1.0f / (1.0f + expf(-glu.alpha * gate));
  return gate * sig * (up + glu.offset);
}

// Its gradients for d(out) = d: a clamped input's is 0 (PyTorch's clamp passes it within the bounds, ends included).
SRUNWAY_GLU_HOST_DEVICE inline void GluBackward(const Glu& glu, float gate, float up, float d, float& dgate,
                                                float& dup) {
  bool gate_passes = true, up_passes = true;
  if (glu.clamp > 0.0f) {
    gate_passes = gate <= glu.clamp;
    up_passes = up >= -glu.clamp && up <= glu.clamp;
    gate = fminf(gate, glu.clamp);
    up = fminf(fmaxf(up, -glu.clamp), glu.clamp);
  }
  const float linear = up + glu.offset;
  if (glu.gelu) {
    float grad;
    const float act = GeluTanhWithGrad(gate, grad);
    dgate = gate_passes ? d * linear * grad : 0.0f;
    dup = up_passes ? d * act : 0.0f;
    return;
  }
  const float sig = 1.0f / (1.0f + expf(-glu.alpha * gate));
  dgate = gate_passes ? d * linear * sig * (1.0f + glu.alpha * gate * (1.0f - sig)) : 0.0f;
  dup = up_passes ? d * gate * sig : 0.0f;
}

}  // namespace srunway::trainer
