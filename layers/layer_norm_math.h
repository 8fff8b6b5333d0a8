// Layer normalization of one pixel - its C channel values, `plane` apart -
// one definition for the CPU and the CUDA kernels (host and device code
// alike), so the two devices compute the same expressions in the same order:
// statistics in double, xhat = (x - mean) * inv_std rounded to float. x, y,
// dy and dx are elements of E: float32 on both devices (FloatPixels), or on
// the CPU 16 bits loaded and stored as they are (layers/cpu/typed_elements.h),
// which gives the bits of float32 copies rounded.
#ifndef SPILL_LAYERS_LAYER_NORM_MATH_H_
#define SPILL_LAYERS_LAYER_NORM_MATH_H_

#include <cmath>
#include <cstdint>

#include "layers/activation_math.h"  // SPILL_HOST_DEVICE

namespace spill {

struct PixelStats {
  double mean = 0, inv_std = 0;
};

struct FloatPixels {
  using T = float;
  SPILL_HOST_DEVICE static float Load(float v) { return v; }
  SPILL_HOST_DEVICE static float Store(float v) { return v; }
};

template <typename E = FloatPixels>
SPILL_HOST_DEVICE inline PixelStats PixelStatistics(const typename E::T* x, int64_t c,
                                                    int64_t plane, double eps) {
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += E::Load(x[k * plane]);
  const double mean = sum / static_cast<double>(c);
  double squares = 0;
  for (int64_t k = 0; k < c; ++k) {
    const double d = E::Load(x[k * plane]) - mean;
    squares += d * d;
  }
  return {mean, 1.0 / sqrt(squares / static_cast<double>(c) + eps)};
}

SPILL_HOST_DEVICE inline float Normalized(float x, const PixelStats& s) {
  return static_cast<float>((x - s.mean) * s.inv_std);
}

// y = xhat * gamma + beta over the pixel's channels.
template <typename E = FloatPixels>
SPILL_HOST_DEVICE inline void LayerNormPixel(const typename E::T* x, const float* gamma,
                                             const float* beta, int64_t c, int64_t plane,
                                             double eps, typename E::T* y) {
  const PixelStats st = PixelStatistics<E>(x, c, plane, eps);
  for (int64_t k = 0; k < c; ++k) {
    const int64_t i = k * plane;
    y[i] = E::Store(Normalized(E::Load(x[i]), st) * gamma[k] + beta[k]);
  }
}

// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma,
// means over the pixel's channels; overwritten, or added where `accumulate`.
template <typename E = FloatPixels>
SPILL_HOST_DEVICE inline void LayerNormPixelGrad(const typename E::T* x, const typename E::T* dy,
                                                 const float* gamma, int64_t c, int64_t plane,
                                                 const PixelStats& st, typename E::T* dx,
                                                 bool accumulate) {
  double sum_g = 0, sum_gx = 0;
  for (int64_t k = 0; k < c; ++k) {
    const int64_t i = k * plane;
    const float g = E::Load(dy[i]) * gamma[k];
    sum_g += g;
    sum_gx += static_cast<double>(g) * Normalized(E::Load(x[i]), st);
  }
  const double mean_g = sum_g / static_cast<double>(c);
  const double mean_gx = sum_gx / static_cast<double>(c);
  for (int64_t k = 0; k < c; ++k) {
    const int64_t i = k * plane;
    const float g = E::Load(dy[i]) * gamma[k];
    const float v =
        static_cast<float>(st.inv_std * (g - mean_g - Normalized(E::Load(x[i]), st) * mean_gx));
    dx[i] = E::Store(accumulate ? E::Load(dx[i]) + v : v);
  }
}

}  // namespace spill

#endif  // SPILL_LAYERS_LAYER_NORM_MATH_H_
