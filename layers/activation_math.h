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
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define SPILL_HOST_DEVICE __host__ __device__
#else
#define SPILL_HOST_DEVICE
#endif

namespace spill {

enum class ActivationFunction { kClip, kHardSigmoid, kHardSwish, kSigmoid, kSilu, kGelu, kTanh };

// Constants of one activation: clip's bounds, hard_sigmoid's slope and offset.
struct ActivationConstants {
  ActivationFunction function = ActivationFunction::kSigmoid;
  float min = 0, max = 6;               // clip
  float alpha = 1.0f / 6, beta = 0.5f;  // hard_sigmoid: clamp(alpha * x + beta, 0, 1)
};

constexpr bool ActivationReadsOutput(ActivationFunction f) {
  return f == ActivationFunction::kClip || f == ActivationFunction::kHardSigmoid ||
         f == ActivationFunction::kSigmoid || f == ActivationFunction::kTanh;
}

SPILL_HOST_DEVICE inline float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// exp(q) for q <= 0 and erf(x), without branches or library calls, so that
// the CPU's loops over them vectorize (glibc's erff and expf are a scalar
// call per element: a third of a small GPT's step). Polynomials fitted by
// least squares on Chebyshev nodes against exact values: exp within 1.3 ulp
// on [-87, 0] (below, exp(-87)); erf within 2.3 ulp, 1.3e-7 absolute
// (tests/layers_test.cc checks both against double precision). PyTorch's
// vectorized CPU erf is Abramowitz and Stegun's 7.1.26, 1.5e-7 absolute.
SPILL_HOST_DEVICE inline float ExpNonPositive(float q) {
  constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23: adding it rounds to an integer
  q = q > -87.0f ? q : -87.0f;
  const float n = (q * kLog2e + kRound) - kRound;  // q / ln 2 to the nearest integer
  const float r = (q - n * kLn2Hi) - n * kLn2Lo;   // |r| <= ln 2 / 2
  float p = 0.00138294208f;
  p = p * r + 0.00837477110f;
  p = p * r + 0.0416683592f;
  p = p * r + 0.166664213f;
  p = p * r + 0.499999911f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 0]
  float scale;
  memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

SPILL_HOST_DEVICE inline float Erf(float x) {
  const float a = x < 0.0f ? -x : x;
  // |x| < 1: x P(x^2).
  const float s = a * a;
  float p = 7.89820988e-05f;
  p = p * s - 0.000802435388f;
  p = p * s + 0.00519005349f;
  p = p * s - 0.0268548094f;
  p = p * s + 0.112836123f;
  p = p * s - 0.376126289f;
  p = p * s + 1.12837923f;
  const float small = x * p;
  // 1 <= |x|: 1 - erfc(|x|), erfc = exp(-x^2 + C(x)) with C in t on [1, 4]
  // (past 4, erf is 1 in floats).
  const float b = a < 4.0f ? a : 4.0f;
  const float t = (b - 2.5f) * 0.666666667f;
  float c = 4.13666348e-05f;
  c = c * t - 0.000227403420f;
  c = c * t + 0.000881570857f;
  c = c * t - 0.00319047272f;
  c = c * t + 0.0109611237f;
  c = c * t - 0.0366474949f;
  c = c * t + 0.126239315f;
  c = c * t - 0.529021025f;
  c = c * t - 1.55681527f;
  const float one_minus = 1.0f - ExpNonPositive(c - b * b);
  const float large = x < 0.0f ? -one_minus : one_minus;
  return a < 1.0f ? small : large;
}

// GELU, exact: x Phi(x); its gradient from the input v.
SPILL_HOST_DEVICE inline float Gelu(float x) {
  constexpr float kSqrtHalf = 0.70710678118654752f;
  return 0.5f * x * (1.0f + Erf(x * kSqrtHalf));
}

SPILL_HOST_DEVICE inline float GeluGrad(float v, float dy) {
  constexpr float kSqrtHalf = 0.70710678118654752f;
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  const float cdf = 0.5f * (1.0f + Erf(v * kSqrtHalf));
  const float pdf = kInvSqrt2Pi * ExpNonPositive(-0.5f * v * v);
  return dy * (cdf + v * pdf);
}

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
    case ActivationFunction::kGelu:
      return Gelu(x);
    case ActivationFunction::kTanh:
      return tanhf(x);
  }
  return x;
}

// dL/dx from dL/dy = dy and `v`, the output where ActivationReadsOutput, else
// the input. At clip's and hard_sigmoid's kinks the gradient is 0, as
// PyTorch's is.
SPILL_HOST_DEVICE inline float ActivationGrad(const ActivationConstants& k, float v, float dy) {
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
    case ActivationFunction::kGelu:
      return GeluGrad(v, dy);
    case ActivationFunction::kTanh:
      return dy * (1.0f - v * v);
  }
  return dy;
}

}  // namespace spill

#endif  // SPILL_LAYERS_ACTIVATION_MATH_H_
