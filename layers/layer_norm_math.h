// Layer normalization of one pixel - its C channel values, `plane` apart -
// one definition for the CPU and the CUDA kernels (host and device code
// alike), so the two devices compute the same expressions in the same order:
// statistics in double, xhat = (x - mean) * inv_std rounded to float.
#ifndef SPILL_LAYERS_LAYER_NORM_MATH_H_
#define SPILL_LAYERS_LAYER_NORM_MATH_H_

#include <cmath>
#include <cstdint>

#include "layers/activation_math.h"  // SPILL_HOST_DEVICE

namespace spill {

struct PixelStats {
  double mean = 0, inv_std = 0;
};

SPILL_HOST_DEVICE inline PixelStats PixelStatistics(const float* x, int64_t c, int64_t plane,
                                                    double eps) {
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += x[k * plane];
  const double mean = sum / static_cast<double>(c);
  double squares = 0;
  for (int64_t k = 0; k < c; ++k) {
    const double d = x[k * plane] - mean;
    squares += d * d;
  }
  return {mean, 1.0 / sqrt(squares / static_cast<double>(c) + eps)};
}

SPILL_HOST_DEVICE inline float Normalized(float x, const PixelStats& s) {
  return static_cast<float>((x - s.mean) * s.inv_std);
}

// y = xhat * gamma + beta over the pixel's channels.
SPILL_HOST_DEVICE inline void LayerNormPixel(const float* x, const float* gamma, const float* beta,
                                             int64_t c, int64_t plane, double eps, float* y) {
  const PixelStats st = PixelStatistics(x, c, plane, eps);
  for (int64_t k = 0; k < c; ++k) {
    const int64_t i = k * plane;
    y[i] = Normalized(x[i], st) * gamma[k] + beta[k];
  }
}

// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma,
// means over the pixel's channels; overwritten, or added where `accumulate`.
SPILL_HOST_DEVICE inline void LayerNormPixelGrad(const float* x, const float* dy,
                                                 const float* gamma, int64_t c, int64_t plane,
                                                 const PixelStats& st, float* dx, bool accumulate) {
  double sum_g = 0, sum_gx = 0;
  for (int64_t k = 0; k < c; ++k) {
    const int64_t i = k * plane;
    const float g = dy[i] * gamma[k];
    sum_g += g;
    sum_gx += static_cast<double>(g) * Normalized(x[i], st);
  }
  const double mean_g = sum_g / static_cast<double>(c);
  const double mean_gx = sum_gx / static_cast<double>(c);
  for (int64_t k = 0; k < c; ++k) {
    const int64_t i = k * plane;
    const float g = dy[i] * gamma[k];
    const float v = static_cast<float>(st.inv_std * (g - mean_g - Normalized(x[i], st) * mean_gx));
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

}  // namespace spill

#endif  // SPILL_LAYERS_LAYER_NORM_MATH_H_
