// Launchers of the matrix layers' kernels (matrix_kernels.cu): one thread
// per output element, each a loop in the CPU's order (layers/matrix_math.h).
// As in layer_kernels_cuda.h, each enqueues its work on `stream`, launches
// nothing when there is nothing to do, and is deterministic.
#ifndef SPILL_LAYERS_CUDA_MATRIX_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_MATRIX_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/matrix_math.h"

namespace spill {
namespace cuda {

// `matrices` products Y = alpha op(A) op(B), one after another in memory.
void LaunchMatmulForward(const MatmulGeometry& g, int64_t matrices, const float* a, const float* b,
                         float* y, cudaStream_t stream);
// The gradients of A (into da, added where accumulate_a) and of B; either
// may be null.
void LaunchMatmulBackward(const MatmulGeometry& g, int64_t matrices, const float* a, const float* b,
                          const float* dy, float* da, bool accumulate_a, float* db,
                          bool accumulate_b, cudaStream_t stream);

// One thread per row.
void LaunchSoftmaxRowsForward(const SoftmaxRows& s, const float* x, float* y, cudaStream_t stream);
void LaunchSoftmaxRowsBackward(const SoftmaxRows& s, const float* y, const float* dy, float* dx,
                               bool accumulate, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_MATRIX_KERNELS_CUDA_H_
