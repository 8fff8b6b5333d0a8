// relu: y = max(x, 0), or x * negative_slope below zero (leaky). Cheap.
// Backward reads the output only (y > 0 exactly where x > 0).
//
//   - {name: relu1, type: relu}
//   - {name: lrelu, type: relu, negative_slope: 0.1}
#ifndef SPILL_LAYERS_RELU_LAYER_H_
#define SPILL_LAYERS_RELU_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class ReluLayer : public Layer {
 public:
  explicit ReluLayer(LayerParams& params);
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  BackwardNeeds backward_needs() const override { return {{false}, true}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }

 protected:
  float negative_slope_ = 0;
};

}  // namespace spill

#endif  // SPILL_LAYERS_RELU_LAYER_H_
