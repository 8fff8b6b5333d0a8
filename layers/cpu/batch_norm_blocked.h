// Batch norm's sweeps over tensors in the blocked or the channels-last layout
// (framework/device/tensor.h), for layers/cpu/batch_norm_cpu.cc. Each (image,
// channel block) is one run of plane x 16 elements (layers/cpu/blocked.h:
// Lanes), and the 16 channels of a block are the vector lanes, so every sweep
// vectorizes across channels with no reduction between lanes.
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

// Each sweep reads x and dy, and writes y and dx, as elements of E
// (layers/cpu/typed_elements.h): float32, or 16 bits widened and rounded in
// place. Instantiated for the three element types.

// sums[ch] += the channel's values.
template <typename E>
void BlockedSums(const typename E::T* x, const Shape& shape, Layout layout, double* partial,
                 double* sums);
// squares[ch] += (x - mean[ch])^2.
template <typename E>
void BlockedSquares(const typename E::T* x, const Shape& shape, Layout layout, const double* mean,
                    double* partial, double* squares);
// y = (x - mean[ch]) * scale[ch] + shift[ch].
template <typename E>
void BlockedNormalize(const typename E::T* x, const Shape& shape, Layout layout, const float* mean,
                      const float* scale, const float* shift, typename E::T* y);
// sum_dy[ch] += dy; sum_dy_xc[ch] += dy * (x - mean[ch]).
template <typename E>
void BlockedGradientSums(const typename E::T* x, const typename E::T* dy, const Shape& shape,
                         Layout layout, const float* mean, double* partial, double* sum_dy,
                         double* sum_dy_xc);
// dx (=, or += when accumulate) k[ch] * (dy - mean_dy[ch] - (x - mean[ch]) * coef[ch]).
template <typename E>
void BlockedInputGradient(const typename E::T* x, const typename E::T* dy, const Shape& shape,
                          Layout layout, const float* mean, const float* k, const float* mean_dy,
                          const float* coef, typename E::T* dx, bool accumulate);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_BATCH_NORM_BLOCKED_H_
