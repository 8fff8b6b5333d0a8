#include "layers/cpu/cpu_math.h"

#include <omp.h>

#include <Eigen/Core>

namespace spill {
namespace cpu {
namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Stride>;
using MutMap = Eigen::Map<RowMajor, Eigen::Unaligned, Stride>;

// Elementwise loops below this size are not worth waking other threads for.
constexpr int64_t kParallelThreshold = 1 << 15;

}  // namespace

int NumThreads() { return omp_get_max_threads(); }

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  MutMap C(c, m, n, Stride(ldc));
  if (beta == 0.0f) {
    C.setZero();
  } else if (beta != 1.0f) {
    C *= beta;
  }
  if (k == 0) return;
  ConstMap A(a, trans_a ? k : m, trans_a ? m : k, Stride(lda));
  ConstMap B(b, trans_b ? n : k, trans_b ? k : n, Stride(ldb));
  if (!trans_a && !trans_b)
    C.noalias() += alpha * (A * B);
  else if (trans_a && !trans_b)
    C.noalias() += alpha * (A.transpose() * B);
  else if (!trans_a && trans_b)
    C.noalias() += alpha * (A * B.transpose());
  else
    C.noalias() += alpha * (A.transpose() * B.transpose());
}

void CopyOrAdd(const float* x, float* y, int64_t n, bool accumulate) {
  if (accumulate) {
    Add(x, y, n);
    return;
  }
#pragma omp parallel for if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

void Fill(float* y, int64_t n, float value) {
#pragma omp parallel for if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

void Add(const float* x, float* y, int64_t n) {
#pragma omp parallel for if (n > kParallelThreshold) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace cpu
}  // namespace spill
