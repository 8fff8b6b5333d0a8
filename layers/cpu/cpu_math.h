// CPU math used by the CPU layers: GEMM through Eigen (threaded with OpenMP
// across the cores) and a few parallel loops.
//
// Determinism: every routine here computes each output element in one thread
// with a fixed order of operations, so results do not depend on scheduling.
// Recomputation and every memory mode rely on that.
#ifndef SPILL_LAYERS_CPU_CPU_MATH_H_
#define SPILL_LAYERS_CPU_CPU_MATH_H_

#include <cstdint>

namespace spill {
namespace cpu {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is M x K and
// op(B) is K x N; lda, ldb, ldc are row strides. beta == 0 ignores C's
// contents (it may hold NaN).
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// y = x (n elements) or y += x when accumulate.
void CopyOrAdd(const float* x, float* y, int64_t n, bool accumulate);
void Fill(float* y, int64_t n, float value);
// y += x
void Add(const float* x, float* y, int64_t n);

// Number of threads the CPU kernels use.
int NumThreads();

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_CPU_MATH_H_
