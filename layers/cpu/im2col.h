// im2col / col2im for one image, with padding, stride, dilation.
// The column matrix has C*kh*kw rows and out_h*out_w columns; a group's rows
// are contiguous.
#ifndef SPILL_LAYERS_CPU_IM2COL_H_
#define SPILL_LAYERS_CPU_IM2COL_H_

#include "layers/convolution_layer.h"

namespace spill {
namespace cpu {

void Im2Col(const float* image, const ConvGeometry& g, float* col);
// Adds the columns back into `image` (which the caller zeroes or keeps).
void Col2ImAdd(const float* col, const ConvGeometry& g, float* image);
// True when the column matrix of an image equals the image itself (1x1
// kernel, stride 1, no padding), so im2col can be skipped.
bool IsPointwise(const ConvGeometry& g);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_IM2COL_H_
