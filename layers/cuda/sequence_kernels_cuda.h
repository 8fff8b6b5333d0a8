// Launchers of the sequence layers' kernels (sequence_kernels.cu):
// positions and attention. As in layer_kernels_cuda.h, each enqueues its work
// on `stream`, launches nothing when there is nothing to do, and is
// deterministic (no atomics: every sum has one writer, in a fixed order).
#ifndef SPILL_LAYERS_CUDA_SEQUENCE_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_SEQUENCE_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/cuda/stored_cuda.h"

namespace spill {
namespace cuda {

// The longest head (d = C / heads) the attention kernels keep in registers.
constexpr int64_t kMaxAttentionDepth = 256;

// y[(i c + k) T + t] = x[...] + table[k length + t]: one thread per element.
// x, y, dy and dx below are stored as `stored` (stored_cuda.h); tables,
// saved statistics and sums float32.
void LaunchPositionsForward(Stored stored, int64_t images, int64_t channels, int64_t steps,
                            int64_t length, const void* x, const float* table, void* y,
                            cudaStream_t stream);
// dtable[k length + t] += the images' dy, image by image in order: one
// thread per (k, t), so a call over a slice continues each sum.
void LaunchPositionsTableGrad(Stored stored, int64_t images, int64_t channels, int64_t steps,
                              int64_t length, const void* dy, float* dtable, cudaStream_t stream);

// Multi-head attention over x (N x 3C x 1 x T, queries, keys, values along
// the channels; layers/attention_layer.h), d = C / heads <= kMaxAttentionDepth.
struct AttentionShape {
  int64_t images = 0, channels = 0, steps = 0, heads = 0;
  bool causal = false;
  bool tiled = true;  // saved: 2 floats per query (tiled) or T (naive)
};
// One thread per query: y (N x C x 1 x T) and what backward reads, in
// `saved` (N x heads x T x 2, or x T).
void LaunchAttentionForward(Stored stored, const AttentionShape& s, const void* x, void* y,
                            float* saved, cudaStream_t stream);
// dx (N x 3C x 1 x T) from dy: a thread per query forms dQ and the row's
// sum(P dP) (into `rows`, N x heads x T floats of workspace), then a
// thread per key forms dK and dV over the queries in order. `add`: dx
// accumulates.
void LaunchAttentionBackward(Stored stored, const AttentionShape& s, const void* x, const void* dy,
                             const float* saved, float* rows, void* dx, bool add,
                             cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_SEQUENCE_KERNELS_CUDA_H_
