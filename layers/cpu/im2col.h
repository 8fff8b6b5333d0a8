// im2col / col2im for one image, with padding, stride, dilation.
// The column matrix has C*kh*kw rows and out_h*out_w columns; a group's rows
// are contiguous.
#ifndef SPILL_LAYERS_CPU_IM2COL_H_
#define SPILL_LAYERS_CPU_IM2COL_H_

#include "layers/convolution_layer.h"

namespace spill {
namespace cpu {

void Im2Col(const float* image, const ConvGeometry& g, float* col);
// One row of an image's column matrix: kernel tap (ki, kj) of one input
// plane, out_h*out_w values.
void Im2ColRow(const ConvGeometry& g, const float* plane, int64_t ki, int64_t kj, float* out);
// The inverse of Im2ColRow: adds one row of columns back into a plane.
void Col2ImRowAdd(const ConvGeometry& g, const float* in, int64_t ki, int64_t kj, float* plane);
// Adds the columns back into `image` (which the caller zeroes or keeps).
void Col2ImAdd(const float* col, const ConvGeometry& g, float* image);
// True when the column matrix of an image equals the image itself (1x1
// kernel, stride 1, no padding), so im2col can be skipped.
bool IsPointwise(const ConvGeometry& g);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_IM2COL_H_
