// Where bilinear upsampling samples its input, one definition for the CPU
// and the CUDA kernels (host and device code alike), computed as PyTorch's
// upsample_bilinear2d does: with align_corners false, output pixel centres
// map to (o + 0.5) * in / out - 0.5 (clamped at 0); with true, the corner
// pixels of input and output align.
#ifndef SPILL_LAYERS_UPSAMPLE_MATH_H_
#define SPILL_LAYERS_UPSAMPLE_MATH_H_

#include <cstdint>

#include "layers/activation_math.h"  // SPILL_HOST_DEVICE

namespace spill {

// Output coordinate `o` along one axis reads rows (or columns) i0 and i1
// with weights w0 and w1.
struct LinearTap {
  int64_t i0 = 0, i1 = 0;
  float w0 = 1, w1 = 0;
};

SPILL_HOST_DEVICE inline LinearTap BilinearTap(int64_t o, int64_t in, int64_t out,
                                               bool align_corners) {
  float source;
  if (align_corners) {
    const float scale = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
    source = scale * static_cast<float>(o);
  } else {
    const float scale = static_cast<float>(in) / static_cast<float>(out);
    source = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
    source = source < 0.0f ? 0.0f : source;
  }
  LinearTap t;
  t.i0 = static_cast<int64_t>(source);
  if (t.i0 > in - 1) t.i0 = in - 1;
  t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
  t.w1 = source - static_cast<float>(t.i0);
  t.w0 = 1.0f - t.w1;
  return t;
}

}  // namespace spill

#endif  // SPILL_LAYERS_UPSAMPLE_MATH_H_
