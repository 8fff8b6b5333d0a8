// The arithmetic of the matrix layers (layers/matrix_layers.h), one
// definition for the CPU and the CUDA kernels: where element (i, j) of a
// possibly transposed matrix is, one element of a product and of its two
// gradients, and softmax's rows.
#ifndef SPILL_LAYERS_MATRIX_MATH_H_
#define SPILL_LAYERS_MATRIX_MATH_H_

#include <cmath>
#include <cstdint>

#include "layers/activation_math.h"  // SPILL_HOST_DEVICE

namespace spill {

// One image's matrices: op(A) M x K, op(B) K x P, Y M x P; A stored H x W
// (H = M, W = K, or transposed H = K, W = M), B likewise.
struct MatmulGeometry {
  int64_t m = 0, k = 0, p = 0;
  bool transpose_a = false, transpose_b = false;
  float alpha = 1.0f;

  SPILL_HOST_DEVICE int64_t a_size() const { return m * k; }
  SPILL_HOST_DEVICE int64_t b_size() const { return k * p; }
  SPILL_HOST_DEVICE int64_t y_size() const { return m * p; }
  // Where op(A)[i][j] and op(B)[i][j] are in their stored matrices.
  SPILL_HOST_DEVICE int64_t a_at(int64_t i, int64_t j) const {
    return transpose_a ? j * m + i : i * k + j;
  }
  SPILL_HOST_DEVICE int64_t b_at(int64_t i, int64_t j) const {
    return transpose_b ? j * k + i : i * p + j;
  }
};

// Y[i][j] = alpha sum_t op(A)[i][t] op(B)[t][j], t ascending.
SPILL_HOST_DEVICE inline float MatmulElement(const MatmulGeometry& g, const float* a,
                                             const float* b, int64_t i, int64_t j) {
  float sum = 0;
  for (int64_t t = 0; t < g.k; ++t) sum += a[g.a_at(i, t)] * b[g.b_at(t, j)];
  return g.alpha * sum;
}

// d op(A)[i][t] = alpha sum_j dY[i][j] op(B)[t][j], j ascending.
SPILL_HOST_DEVICE inline float MatmulGradA(const MatmulGeometry& g, const float* dy, const float* b,
                                           int64_t i, int64_t t) {
  float sum = 0;
  for (int64_t j = 0; j < g.p; ++j) sum += dy[i * g.p + j] * b[g.b_at(t, j)];
  return g.alpha * sum;
}

// d op(B)[t][j] = alpha sum_i op(A)[i][t] dY[i][j], i ascending.
SPILL_HOST_DEVICE inline float MatmulGradB(const MatmulGeometry& g, const float* a, const float* dy,
                                           int64_t t, int64_t j) {
  float sum = 0;
  for (int64_t i = 0; i < g.m; ++i) sum += a[g.a_at(i, t)] * dy[i * g.p + j];
  return g.alpha * sum;
}

// Softmax's rows in an N x C x H x W tensor: `rows` rows of `length`
// elements `stride` apart; row r starts at (r / stride) * length * stride +
// r % stride.
struct SoftmaxRows {
  int64_t rows = 0, length = 0, stride = 1;

  SPILL_HOST_DEVICE int64_t start(int64_t r) const {
    return (r / stride) * length * stride + r % stride;
  }
};

// One row: y = exp(x - max) / sum, the sum in double.
SPILL_HOST_DEVICE inline void SoftmaxRow(const SoftmaxRows& s, const float* x, float* y) {
  float max = x[0];
  for (int64_t i = 1; i < s.length; ++i) max = x[i * s.stride] > max ? x[i * s.stride] : max;
  double sum = 0;
  for (int64_t i = 0; i < s.length; ++i) {
    const float e = expf(x[i * s.stride] - max);
    y[i * s.stride] = e;
    sum += e;
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < s.length; ++i) y[i * s.stride] *= inverse;
}

// Its gradient: dx = y (dy - sum(dy y)), the sum in double; added to dx
// where `accumulate`.
SPILL_HOST_DEVICE inline void SoftmaxRowGrad(const SoftmaxRows& s, const float* y, const float* dy,
                                             float* dx, bool accumulate) {
  double dot = 0;
  for (int64_t i = 0; i < s.length; ++i)
    dot += static_cast<double>(dy[i * s.stride]) * y[i * s.stride];
  const float along = static_cast<float>(dot);
  for (int64_t i = 0; i < s.length; ++i) {
    const float v = y[i * s.stride] * (dy[i * s.stride] - along);
    dx[i * s.stride] = accumulate ? dx[i * s.stride] + v : v;
  }
}

}  // namespace spill

#endif  // SPILL_LAYERS_MATRIX_MATH_H_
