// The embedding's kernels. See embedding_kernels_cuda.h.
#include "layers/cuda/embedding_kernels_cuda.h"
#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/embedding_math.h"

namespace spill {
namespace cuda {
namespace {

// One thread per output element: coalesced writes; the ids are read once
// per embedding column (cached).
__global__ void EmbeddingForward(int64_t images, int64_t steps, int64_t size, int64_t vocabulary,
                                 const float* ids, const float* table, float* y) {
  SPILL_GRID_LOOP(k, images * size * steps) {
    const int64_t s = k % steps, ie = k / steps;  // ie = i * size + e
    const int64_t e = ie % size, i = ie / size;
    const int64_t row = EmbeddingRow(ids[i * steps + s], vocabulary);
    y[k] = row < 0 ? 0.0f : table[row * size + e];
  }
}

// One thread per column of the table: the only writer of its column, adding
// the positions in the CPU's order.
__global__ void EmbeddingBackward(int64_t images, int64_t steps, int64_t size, int64_t vocabulary,
                                  const float* ids, const float* dy, float* dw) {
  SPILL_GRID_LOOP(e, size) {
    for (int64_t i = 0; i < images; ++i) {
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t row = EmbeddingRow(ids[i * steps + s], vocabulary);
        if (row >= 0) dw[row * size + e] += dy[(i * size + e) * steps + s];
      }
    }
  }
}

}  // namespace

void LaunchEmbeddingForward(int64_t images, int64_t steps, int64_t size, int64_t vocabulary,
                            const float* ids, const float* table, float* y, cudaStream_t stream) {
  const int64_t total = images * size * steps;
  if (total <= 0) return;
  EmbeddingForward<<<Blocks(total), kThreads, 0, stream>>>(images, steps, size, vocabulary, ids,
                                                           table, y);
}

void LaunchEmbeddingBackward(int64_t images, int64_t steps, int64_t size, int64_t vocabulary,
                             const float* ids, const float* dy, float* dw, cudaStream_t stream) {
  if (images <= 0 || steps <= 0 || size <= 0) return;
  EmbeddingBackward<<<Blocks(size), kThreads, 0, stream>>>(images, steps, size, vocabulary, ids, dy,
                                                           dw);
}

}  // namespace cuda
}  // namespace spill
