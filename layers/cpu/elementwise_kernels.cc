#include "layers/cpu/elementwise_kernels.h"

#include "layers/activation_math.h"

namespace spill {
namespace cpu {

void ReluBlock(const float* x, float* y, int64_t n, float slope) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : x[i] * slope;
}

void ReluGradBlock(const float* y, const float* dy, float* dx, int64_t n, float slope,
                   bool accumulate) {
  if (accumulate) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] += y[i] > 0 ? dy[i] : dy[i] * slope;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : dy[i] * slope;
  }
}

void GeluForward(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = Gelu(x[i]);
}

void GeluBackward(const float* v, const float* dy, float* dx, int64_t n, bool accumulate) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] += GeluGrad(v[i], dy[i]);
  } else {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] = GeluGrad(v[i], dy[i]);
  }
}

}  // namespace cpu
}  // namespace spill
