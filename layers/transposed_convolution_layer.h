// transposed_convolution: the gradient of a convolution with respect to its
// input, used as a learned upsampling (PyTorch's ConvTranspose2d, ONNX's
// ConvTranspose; U-Net's up-convolutions). A checkpoint layer.
//
//   - {name: up1, type: transposed_convolution, filters: 64, kernel: 2, stride: 2}
//   filters (output channels), kernel, stride: 1, pad: 0, output_pad: 0,
//   dilation: 1 (each an integer or [h, w]); groups: 1; bias: true;
//   weight_init: he | xavier; algorithm: pins one CPU convolution algorithm.
//
// Output size: (in - 1) * stride - 2 * pad + dilation * (kernel - 1) +
// output_pad + 1. The weight is C_in x filters/groups x kh x kw, PyTorch's
// layout. The layer is the convolution of `geometry()` run backwards: its
// forward is that convolution's data gradient, its data gradient the
// convolution's forward, and its weight gradient the convolution's with the
// roles of input and output swapped - so every convolution algorithm
// computes it. Backward reads the input (for the weight gradient).
#ifndef SPILL_LAYERS_TRANSPOSED_CONVOLUTION_LAYER_H_
#define SPILL_LAYERS_TRANSPOSED_CONVOLUTION_LAYER_H_

#include <array>

#include "layers/convolution_layer.h"

namespace spill {

class TransposedConvolutionLayer : public ConvolutionBaseLayer {
 public:
  explicit TransposedConvolutionLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  // geometry() is the convolution this layer transposes: its input is this
  // layer's output (channels = filters), its output this layer's input
  // (filters = C_in).
  int64_t out_channels_ = 0;
  std::array<int64_t, 2> output_pad_{0, 0};
};

}  // namespace spill

#endif  // SPILL_LAYERS_TRANSPOSED_CONVOLUTION_LAYER_H_
