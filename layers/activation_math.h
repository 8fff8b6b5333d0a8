// The elementwise activations' formulas, one definition for the CPU and the
// CUDA kernels (compiled for both by nvcc, for the host alone by g++), so the
// two devices compute the same expressions in the same order.
//
// Each backward reads what the layer declares (ActivationReadsOutput): the
// output where it decides the gradient alone (clip, hard_sigmoid, sigmoid),
// the input otherwise (hard_swish, silu, gelu).
#ifndef SPILL_LAYERS_ACTIVATION_MATH_H_
#define SPILL_LAYERS_ACTIVATION_MATH_H_

#include <cmath>

#ifdef __CUDACC__
#define SPILL_HOST_DEVICE __host__ __device__
#else
#define SPILL_HOST_DEVICE
#endif

namespace spill {

enum class ActivationFunction { kClip, kHardSigmoid, kHardSwish, kSigmoid, kSilu, kGelu };

// Constants of one activation: clip's bounds, hard_sigmoid's slope and offset.
struct ActivationConstants {
  ActivationFunction function = ActivationFunction::kSigmoid;
  float min = 0, max = 6;               // clip
  float alpha = 1.0f / 6, beta = 0.5f;  // hard_sigmoid: clamp(alpha * x + beta, 0, 1)
};

constexpr bool ActivationReadsOutput(ActivationFunction f) {
  return f == ActivationFunction::kClip || f == ActivationFunction::kHardSigmoid ||
         f == ActivationFunction::kSigmoid;
}

SPILL_HOST_DEVICE inline float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// min(max(x, lo), hi) as compares and selects, which vectorize (fminf and
// fmaxf compile to a library call per element on the CPU): the same value
// for every x, NaN included (NaN > lo is false, so NaN gives lo, as fmaxf's
// NaN-ignoring maximum does); a -0 below lo = 0 gives +0.
SPILL_HOST_DEVICE inline float Clamp(float x, float lo, float hi) {
  const float low = x > lo ? x : lo;
  return low < hi ? low : hi;
}

// clip's gradient: 0 at the kinks, as PyTorch's is.
SPILL_HOST_DEVICE inline float ClipGrad(float y, float dy, float lo, float hi) {
  return y > lo && y < hi ? dy : 0.0f;
}

SPILL_HOST_DEVICE inline float Activate(const ActivationConstants& k, float x) {
  constexpr float kSqrtHalf = 0.70710678118654752f;
  switch (k.function) {
    case ActivationFunction::kClip:
      return Clamp(x, k.min, k.max);
    case ActivationFunction::kHardSigmoid:
      return Clamp(k.alpha * x + k.beta, 0.0f, 1.0f);
    case ActivationFunction::kHardSwish:  // x * relu6(x + 3) / 6, as PyTorch writes it
      return x * Clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f;
    case ActivationFunction::kSigmoid:
      return Sigmoid(x);
    case ActivationFunction::kSilu:
      return x * Sigmoid(x);
    case ActivationFunction::kGelu:  // exact: x * Phi(x)
      return 0.5f * x * (1.0f + erff(x * kSqrtHalf));
  }
  return x;
}

// dL/dx from dL/dy = dy and `v`, the output where ActivationReadsOutput, else
// the input. At clip's and hard_sigmoid's kinks the gradient is 0, as
// PyTorch's is.
SPILL_HOST_DEVICE inline float ActivationGrad(const ActivationConstants& k, float v, float dy) {
  constexpr float kSqrtHalf = 0.70710678118654752f;
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  switch (k.function) {
    case ActivationFunction::kClip:
      return ClipGrad(v, dy, k.min, k.max);
    case ActivationFunction::kHardSigmoid:
      return v > 0.0f && v < 1.0f ? dy * k.alpha : 0.0f;
    case ActivationFunction::kHardSwish:
      if (v < -3.0f) return 0.0f;
      return v <= 3.0f ? dy * (v / 3.0f + 0.5f) : dy;
    case ActivationFunction::kSigmoid:
      return dy * v * (1.0f - v);
    case ActivationFunction::kSilu: {
      const float s = Sigmoid(v);
      return dy * s * (1.0f + v * (1.0f - s));
    }
    case ActivationFunction::kGelu: {
      const float cdf = 0.5f * (1.0f + erff(v * kSqrtHalf));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);
      return dy * (cdf + v * pdf);
    }
  }
  return dy;
}

}  // namespace spill

#endif  // SPILL_LAYERS_ACTIVATION_MATH_H_
