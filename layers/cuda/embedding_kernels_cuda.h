// Launchers of the embedding's kernels (embedding_kernels.cu). As in
// layer_kernels_cuda.h, each enqueues its work on `stream`, launches nothing
// when there is nothing to do, and is deterministic (no atomics).
#ifndef SPILL_LAYERS_CUDA_EMBEDDING_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_EMBEDDING_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace spill {
namespace cuda {

// y[(i * size + e) * steps + s] = the table's row of ids[i * steps + s]
// (EmbeddingRow, layers/embedding_math.h), or 0 when the id has none. One
// thread per element of y.
void LaunchEmbeddingForward(int64_t images, int64_t steps, int64_t size, int64_t vocabulary,
                            const float* ids, const float* table, float* y, cudaStream_t stream);

// dw[row * size + e] += dy[(i * size + e) * steps + s] for every position
// (i, s) whose id has a row, image by image and position by position in
// order, as the CPU adds them: one thread per column e of the table, so a
// call over a slice continues each sum where the previous slice left it.
void LaunchEmbeddingBackward(int64_t images, int64_t steps, int64_t size, int64_t vocabulary,
                             const float* ids, const float* dy, float* dw, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_EMBEDDING_KERNELS_CUDA_H_
