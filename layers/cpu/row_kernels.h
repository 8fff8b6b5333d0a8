// Products whose every output element is one fixed sequence of operations,
// whatever the number of rows a call holds: the kernels layers use when they
// reduce over the batch image by image (BatchSlice::in_image_order), so that
// a step computed slice by slice gives the bits of the whole batch. A GEMM's
// blocking depends on the matrix sizes, and so do its roundings.
#ifndef SPILL_LAYERS_CPU_ROW_KERNELS_H_
#define SPILL_LAYERS_CPU_ROW_KERNELS_H_

#include <cstdint>

namespace spill {
namespace cpu {

// y[i][o] = x[i] . w[o] (+ bias[o] when bias is not null) for n rows of x
// (row stride ldx) and m rows of w (ldw), each k long; y's rows have stride
// ldy. Every dot product goes through one blocked kernel in eight lanes.
void RowDots(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t n, int64_t m,
             int64_t k, const float* bias, float* y, int64_t ldy);

// y[i] = sum over o in order of a[i][o] * w[o] (or y[i] += that sum when
// accumulate): a is n x m (lda), w is m x k (ldw), y is n x k (ldy).
void RowCombinations(const float* a, int64_t lda, const float* w, int64_t ldw, int64_t n, int64_t m,
                     int64_t k, float* y, int64_t ldy, bool accumulate);

// w[o] = sum over i in order of a[i][o] * x[i], added to w's value (or from
// zero when overwrite): a is n x m (lda), x is n x k (ldx), w is m x k (ldw).
// Calls over consecutive row ranges, in order, give the bits of one call.
void RowOuterSums(const float* a, int64_t lda, const float* x, int64_t ldx, int64_t n, int64_t m,
                  int64_t k, float* w, int64_t ldw, bool overwrite);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_ROW_KERNELS_H_
