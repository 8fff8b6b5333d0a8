// Launchers of window_attention's kernels (window_attention_kernels.cu). As
// in layer_kernels_cuda.h, each enqueues its work on `stream`, launches
// nothing when there is nothing to do, and is deterministic (no atomics:
// every sum has one writer, in a fixed order).
#ifndef SPILL_LAYERS_CUDA_WINDOW_ATTENTION_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_WINDOW_ATTENTION_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/cuda/stored_cuda.h"
#include "layers/window_attention_math.h"

namespace spill {
namespace cuda {

// Shifted-window attention over x (N x 3C x H x W, queries, keys, values
// along the channels; layers/window_attention_layer.h). A unit is one head
// of one window of one image, in the order (image, window, head); a head's
// depth d = C / heads lives in registers (at most kMaxAttentionDepth,
// sequence_kernels_cuda.h).
struct WindowAttentionShape {
  int64_t images = 0, channels = 0, heads = 0;
  WindowGrid grid;
  float scale = 1;      // d^-1/2, as the layer forms it
  bool cosine = false;  // Swin V2's cosine attention, scaled by logit_scale
};

// One thread per query of each unit: y (N x C x H x W) and the
// probabilities, `saved` (N x (windows heads) x T x T). logit_scale: a
// float per head with cosine attention, else unread.
void LaunchWindowAttentionForward(Stored stored, const WindowAttentionShape& s, const void* x,
                                  const float* table, const float* logit_scale, void* y,
                                  float* saved, cudaStream_t stream);
// From dy: a thread per query forms the row's sum(P dP) (into `rows`, a
// float per query of every unit: workspace) and, where dx is not null, dQ;
// then a thread per key forms dK and dV over the queries in order. `add`:
// dx accumulates. Where dtable is not null, a thread per table entry adds
// to it the units' dS of its head, unit by unit in order, each unit's sum
// formed from zero (a call over a slice continues the sums). With cosine
// attention and dlogit not null, the query threads also put each row's
// sum(dS cos) after the means (`rows` then holds two floats per query), and
// a thread per head adds to dlogit each unit's sum times the head's scale,
// unit by unit in order.
void LaunchWindowAttentionBackward(Stored stored, const WindowAttentionShape& s, const void* x,
                                   const void* dy, const float* saved, const float* logit_scale,
                                   float* rows, void* dx, bool add, float* dtable, float* dlogit,
                                   cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_WINDOW_ATTENTION_KERNELS_CUDA_H_
