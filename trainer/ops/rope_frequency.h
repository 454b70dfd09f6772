// RoPE's frequencies, one formula for the CPU operation and the CUDA kernel: theta^(-2i/hd) for pair i of a head
// of hd values, with Llama 3.1's scaling of the long wavelengths where scaling_factor is set, every wavelength
// linear_factor times longer (positions interpolated), YaRN's blend of the two, or LongRoPE's factor per pair.
#pragma once

#include <math.h>

#ifdef __CUDACC__
#define SRUNWAY_HOST_DEVICE __host__ __device__
#else
#define SRUNWAY_HOST_DEVICE
#endif

namespace srunway::trainer {

// The most pairs LongRoPE's factors reach (a head of 256 turned whole).
inline constexpr int kMaxRopePairFactors = 128;

struct RopeFrequencies {
  float theta = 10000.0f;
  // Llama 3.1's scaling (Megatron's --use-rope-scaling, Hugging Face's rope_type llama3); 0: none. Wavelengths
  // longer than original_positions / low_freq_factor turn scaling_factor times slower, those shorter than
  // original_positions / high_freq_factor stay, and those between move from one to the other smoothly.
  float scaling_factor = 0.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  float original_positions = 8192.0f;
  // Linear scaling (Megatron's --rotary-seq-len-interpolation-factor, Hugging Face's rope_type linear): every
  // frequency divided by it, as if each position were that many times nearer; 1: none. Not with the above.
  float linear_factor = 1.0f;
  // How many of each head's first dimensions turn (Megatron's --rotary-percent): pairs (i, i + rotary_dim / 2),
  // each at RopeInverseFrequency(i, rotary_dim); the dimensions past them pass as they are. 0: the whole head.
  int rotary_dim = 0;
  // Megatron's --rotary-interleaved: the pairs are (2i, 2i + 1), side by side, instead of the two halves'
  // (i, i + rotary_dim / 2); pair i turns at the same frequency either way.
  bool interleaved = false;
  // YaRN (Megatron's --position-embedding-type yarn; not with the scalings above): pair i's frequency is
  // theta^(-2i/hd) / yarn_factor (interpolated) where ramp(i) = clamp((i - yarn_low) / (yarn_high - yarn_low), 0, 1)
  // is 1, theta^(-2i/hd) (kept) where it is 0, and the blend of the two between; 0: none. The bounds are the pairs
  // that turn beta_fast and beta_slow times over the original positions (ModelConfig::rope works them out).
  float yarn_factor = 0.0f;
  float yarn_low = 0.0f;
  float yarn_high = 0.0f;
  // The factor q and k are multiplied by as they turn (YaRN's "mscale", which scales attention's logits by its
  // square; LongRoPE's); 1: none.
  float attention_factor = 1.0f;
  // LongRoPE (Hugging Face's rope_type longrope, Phi-3's; not with the scalings above): pair i's frequency divided by
  // pair_factor[i], for the first pair_factors pairs (the rotary dimensions' every pair); 0: none. Held in the struct
  // so that the kernel takes them with its arguments.
  int pair_factors = 0;
  float pair_factor[kMaxRopePairFactors] = {};
};

// Pair i of a head's `half` pairs: its first dimension, and how far its second is from it.
SRUNWAY_HOST_DEVICE inline int RopePairFirst(const RopeFrequencies& rope, int i) {
  return rope.interleaved ? 2 * i : i;
}
SRUNWAY_HOST_DEVICE inline int RopePairGap(const RopeFrequencies& rope, int half) {
  return rope.interleaved ? 1 : half;
}

// The dimensions of a head of hd that `rope` turns.
SRUNWAY_HOST_DEVICE inline int RotaryDim(const RopeFrequencies& rope, int hd) {
  return rope.rotary_dim > 0 && rope.rotary_dim < hd ? rope.rotary_dim : hd;
}

// Pair i's angle per position. The scaling is Hugging Face's _compute_llama3_parameters (and Megatron's
// _apply_scaling) in fp32, as both compute it.
SRUNWAY_HOST_DEVICE inline float RopeInverseFrequency(const RopeFrequencies& rope, int i, int hd) {
  const float inv_freq = powf(rope.theta, -2.0f * static_cast<float>(i) / static_cast<float>(hd));
  if (i < rope.pair_factors) return inv_freq / rope.pair_factor[i];
  if (rope.yarn_factor > 0.0f) {  // Megatron's YarnRotaryEmbedding, in fp32 as it computes it
    const float ramp = fminf(fmaxf((static_cast<float>(i) - rope.yarn_low) / (rope.yarn_high - rope.yarn_low), 0.0f),
                             1.0f);
    return inv_freq / rope.yarn_factor * ramp + inv_freq * (1.0f - ramp);
  }
  if (rope.scaling_factor <= 0.0f) return inv_freq / rope.linear_factor;
  const float wavelength = 6.283185307179586f / inv_freq;
  if (wavelength < rope.original_positions / rope.high_freq_factor) return inv_freq;
  if (wavelength > rope.original_positions / rope.low_freq_factor) return inv_freq / rope.scaling_factor;
  const float smooth = (rope.original_positions / wavelength - rope.low_freq_factor) /
                       (rope.high_freq_factor - rope.low_freq_factor);
  return (1.0f - smooth) * inv_freq / rope.scaling_factor + smooth * inv_freq;
}

}  // namespace srunway::trainer
