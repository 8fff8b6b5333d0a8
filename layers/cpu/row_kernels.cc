#include "layers/cpu/row_kernels.h"

#include <algorithm>
#include <cstring>

namespace spill {
namespace cpu {
namespace {

// Blocks of kRows rows of x by kCols rows of w, each dot product in kLanes
// partial sums: registers hold the whole block.
constexpr int kLanes = 8;
constexpr int kRows = 2;
constexpr int kCols = 4;
// Columns of y per tile of RowCombinations: a tile of every row stays in
// cache while o sweeps over it.
constexpr int64_t kTile = 256;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// out[r][c] = x[r] . w[c] over len elements. Every dot product goes through
// this one function (a partial block repeats its last row or column), so
// each is the same sequence of operations wherever it falls.
void DotBlock(const float* const* x, const float* const* w, int64_t len, float out[kRows][kCols]) {
  Lanes acc[kRows][kCols] = {};
  int64_t j = 0;
  for (; j + kLanes <= len; j += kLanes) {
    Lanes wv[kCols];
    for (int c = 0; c < kCols; ++c) std::memcpy(&wv[c], w[c] + j, sizeof(Lanes));
    for (int r = 0; r < kRows; ++r) {
      Lanes xv;
      std::memcpy(&xv, x[r] + j, sizeof(Lanes));
      for (int c = 0; c < kCols; ++c) acc[r][c] += xv * wv[c];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      float tail = 0;
      for (int64_t q = j; q < len; ++q) tail += x[r][q] * w[c][q];
      const Lanes& a = acc[r][c];
      out[r][c] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])) + tail;
    }
  }
}

// y[j] += a * x[j]
inline void Axpy(float a, const float* x, float* y, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) y[j] += a * x[j];
}

}  // namespace

void RowDots(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t n, int64_t m,
             int64_t k, const float* bias, float* y, int64_t ldy) {
  if (n <= 0 || m <= 0) return;
#pragma omp parallel for schedule(static) if (n * m * k > (1 << 16))
  for (int64_t o0 = 0; o0 < m; o0 += kCols) {
    const float* rows_w[kCols];
    for (int c = 0; c < kCols; ++c) rows_w[c] = w + std::min(o0 + c, m - 1) * ldw;
    for (int64_t i0 = 0; i0 < n; i0 += kRows) {
      const float* rows_x[kRows];
      for (int r = 0; r < kRows; ++r) rows_x[r] = x + std::min(i0 + r, n - 1) * ldx;
      float out[kRows][kCols];
      DotBlock(rows_x, rows_w, k, out);
      for (int r = 0; r < kRows && i0 + r < n; ++r) {
        for (int c = 0; c < kCols && o0 + c < m; ++c) {
          y[(i0 + r) * ldy + o0 + c] = bias != nullptr ? out[r][c] + bias[o0 + c] : out[r][c];
        }
      }
    }
  }
}

void RowCombinations(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t n, int64_t m,
                     int64_t k, float* y, int64_t ldy, bool accumulate) {
  if (n <= 0 || k <= 0) return;
  const int64_t tiles = (k + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (n * m * k > (1 << 16))
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t t = tile * kTile, len = std::min(kTile, k - t);
    for (int64_t i = 0; i < n && !accumulate; ++i) std::fill_n(y + i * ldy + t, len, 0.0f);
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t i = 0; i < n; ++i) Axpy(a[i * lda + o], w + o * ldw + t, y + i * ldy + t, len);
    }
  }
}

void RowOuterSums(const float* a, int64_t lda, const float* x, int64_t ldx, int64_t n, int64_t m,
                  int64_t k, float* w, int64_t ldw, bool overwrite) {
  if (m <= 0 || k <= 0) return;
  const int64_t tiles = (k + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (n * m * k > (1 << 16))
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t t = tile * kTile, len = std::min(kTile, k - t);
    for (int64_t o = 0; o < m; ++o) {
      float* row = w + o * ldw + t;
      if (overwrite) std::fill_n(row, len, 0.0f);
      for (int64_t i = 0; i < n; ++i) Axpy(a[i * lda + o], x + i * ldx + t, row, len);
    }
  }
}

}  // namespace cpu
}  // namespace spill
