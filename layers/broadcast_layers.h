// Elementwise layers of two inputs that broadcast over the spatial axes:
// each input is N x C x H x W or N x C x 1 x 1 (one value per image and
// channel, spread over the plane), and the output has the larger shape.
// Cheap to recompute.
//
//   multiply: a * b. Squeeze-and-excitation scales a feature map by per-channel
//     weights computed from it (MobileNetV3, EfficientNet, RegNet-Y):
//     - {name: se.scale, type: multiply, inputs: [block.conv2, se.gate]}
//     Backward reads both inputs.
//   broadcast_add: a + b, e.g. a feature map plus a per-image channel bias.
//     Backward reads neither.
#ifndef SPILL_LAYERS_BROADCAST_LAYERS_H_
#define SPILL_LAYERS_BROADCAST_LAYERS_H_

#include "framework/graph/layer.h"

namespace spill {

class BroadcastLayer : public Layer {
 public:
  // The operation comes from the layer's type (multiply, broadcast_add).
  explicit BroadcastLayer(LayerParams& params);

  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 2; }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override { return {{multiply_, multiply_}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  bool multiply_ = true;
  // Whether input i is spread over the plane (N x C x 1 x 1 against a map).
  bool spread_[2] = {false, false};
};

}  // namespace spill

#endif  // SPILL_LAYERS_BROADCAST_LAYERS_H_
