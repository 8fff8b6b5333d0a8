// Batch norm's sweeps over tensors in the blocked layout (framework/device/tensor.h),
// for layers/cpu/batch_norm_cpu.cc. Each (image, channel block) is one run of
// plane x 16 floats, and the 16 channels of a block are the vector lanes, so
// every sweep vectorizes across channels with no reduction between lanes.
//
// Reductions keep the plain code's promises: sums in double, and added into
// the carried sums image by image in batch order, so a step run over slices
// of the batch gives the bits of the whole batch. Each image's share is
// computed in parallel into `partial` (the layer's workspace, PartialDoubles
// long), then added in order.
#ifndef SPILL_LAYERS_CPU_BATCH_NORM_BLOCKED_H_
#define SPILL_LAYERS_CPU_BATCH_NORM_BLOCKED_H_

#include <cstddef>

#include "framework/device/tensor.h"

namespace spill {
namespace cpu {

// Doubles of `partial` that a sweep over the images of `shape` needs.
inline size_t BlockedPartialDoubles(const Shape& shape) {
  return 2 * static_cast<size_t>(shape.n() * shape.c());
}

// sums[ch] += the channel's values.
void BlockedSums(const float* x, const Shape& shape, double* partial, double* sums);
// squares[ch] += (x - mean[ch])^2.
void BlockedSquares(const float* x, const Shape& shape, const double* mean, double* partial,
                    double* squares);
// y = (x - mean[ch]) * scale[ch] + shift[ch].
void BlockedNormalize(const float* x, const Shape& shape, const float* mean, const float* scale,
                      const float* shift, float* y);
// sum_dy[ch] += dy; sum_dy_xc[ch] += dy * (x - mean[ch]).
void BlockedGradientSums(const float* x, const float* dy, const Shape& shape, const float* mean,
                         double* partial, double* sum_dy, double* sum_dy_xc);
// dx (=, or += when accumulate) k[ch] * (dy - mean_dy[ch] - (x - mean[ch]) * coef[ch]).
void BlockedInputGradient(const float* x, const float* dy, const Shape& shape, const float* mean,
                          const float* k, const float* mean_dy, const float* coef, float* dx,
                          bool accumulate);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_BATCH_NORM_BLOCKED_H_
