// pad: surrounds each plane with a constant border, each side its own width
// (the asymmetric padding of TensorFlow's and Keras's SAME convolutions and
// pools, which spill's convolution and pooling pad symmetrically). A negative
// amount crops, as ONNX's Pad does: it removes that many rows or columns from
// its side, and signs may differ from side to side. Output (i, j) is input
// (i - top, j - left) where that lies in the input, else `value`; the input
// gradient of a cropped position is zero. Cheap to recompute; backward reads
// neither input nor output.
//
//   - {name: p, type: pad, pad: [0, 0, 1, 1]}            top, left, bottom, right
//   - {name: p, type: pad, pad: [1, 2], value: -1e30}    [h, w]: both sides alike
//   - {name: p, type: pad, pad: [0, 0, -1, -1]}          crops the last row and column
#ifndef SPILL_LAYERS_PAD_LAYER_H_
#define SPILL_LAYERS_PAD_LAYER_H_

#include <array>

#include "layers/rearranging_layer.h"

namespace spill {

class PadLayer : public RearrangingLayer {
 public:
  explicit PadLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;

 protected:
  std::array<int64_t, 4> pad_{};  // top, left, bottom, right; negative crops
  float value_ = 0;
};

}  // namespace spill

#endif  // SPILL_LAYERS_PAD_LAYER_H_
