// The matrix layers' kernels. See matrix_kernels_cuda.h.
#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/cuda/matrix_kernels_cuda.h"

namespace spill {
namespace cuda {
namespace {

__global__ void MatmulForward(MatmulGeometry g, int64_t matrices, const float* a, const float* b,
                              float* y) {
  SPILL_GRID_LOOP(e, matrices * g.y_size()) {
    const int64_t q = e / g.y_size(), i = (e % g.y_size()) / g.p, j = e % g.p;
    y[e] = MatmulElement(g, a + q * g.a_size(), b + q * g.b_size(), i, j);
  }
}

// One thread per element of op(A): its gradient, stored where A has it.
__global__ void MatmulGradA(MatmulGeometry g, int64_t matrices, const float* b, const float* dy,
                            float* da, bool accumulate) {
  SPILL_GRID_LOOP(e, matrices * g.a_size()) {
    const int64_t q = e / g.a_size(), i = (e % g.a_size()) / g.k, t = e % g.k;
    const float v = spill::MatmulGradA(g, dy + q * g.y_size(), b + q * g.b_size(), i, t);
    float& d = da[q * g.a_size() + g.a_at(i, t)];
    d = accumulate ? d + v : v;
  }
}

__global__ void MatmulGradB(MatmulGeometry g, int64_t matrices, const float* a, const float* dy,
                            float* db, bool accumulate) {
  SPILL_GRID_LOOP(e, matrices * g.b_size()) {
    const int64_t q = e / g.b_size(), t = (e % g.b_size()) / g.p, j = e % g.p;
    const float v = spill::MatmulGradB(g, a + q * g.a_size(), dy + q * g.y_size(), t, j);
    float& d = db[q * g.b_size() + g.b_at(t, j)];
    d = accumulate ? d + v : v;
  }
}

__global__ void SoftmaxForward(SoftmaxRows s, const float* x, float* y) {
  SPILL_GRID_LOOP(r, s.rows) { SoftmaxRow(s, x + s.start(r), y + s.start(r)); }
}

__global__ void SoftmaxBackward(SoftmaxRows s, const float* y, const float* dy, float* dx,
                                bool accumulate) {
  SPILL_GRID_LOOP(r, s.rows) {
    SoftmaxRowGrad(s, y + s.start(r), dy + s.start(r), dx + s.start(r), accumulate);
  }
}

}  // namespace

void LaunchMatmulForward(const MatmulGeometry& g, int64_t matrices, const float* a, const float* b,
                         float* y, cudaStream_t stream) {
  if (matrices * g.y_size() <= 0) return;
  MatmulForward<<<Blocks(matrices * g.y_size()), kThreads, 0, stream>>>(g, matrices, a, b, y);
}

void LaunchMatmulBackward(const MatmulGeometry& g, int64_t matrices, const float* a, const float* b,
                          const float* dy, float* da, bool accumulate_a, float* db,
                          bool accumulate_b, cudaStream_t stream) {
  if (da != nullptr && matrices * g.a_size() > 0) {
    MatmulGradA<<<Blocks(matrices * g.a_size()), kThreads, 0, stream>>>(g, matrices, b, dy, da,
                                                                        accumulate_a);
  }
  if (db != nullptr && matrices * g.b_size() > 0) {
    MatmulGradB<<<Blocks(matrices * g.b_size()), kThreads, 0, stream>>>(g, matrices, a, dy, db,
                                                                        accumulate_b);
  }
}

void LaunchSoftmaxRowsForward(const SoftmaxRows& s, const float* x, float* y, cudaStream_t stream) {
  if (s.rows <= 0) return;
  SoftmaxForward<<<Blocks(s.rows), kThreads, 0, stream>>>(s, x, y);
}

void LaunchSoftmaxRowsBackward(const SoftmaxRows& s, const float* y, const float* dy, float* dx,
                               bool accumulate, cudaStream_t stream) {
  if (s.rows <= 0) return;
  SoftmaxBackward<<<Blocks(s.rows), kThreads, 0, stream>>>(s, y, dy, dx, accumulate);
}

}  // namespace cuda
}  // namespace spill
