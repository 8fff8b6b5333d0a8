// dropout: in training, zeroes each element with probability `ratio` and
// scales the survivors by 1 / (1 - ratio); identity in evaluation. Cheap to
// recompute: the mask is saved (aux) and reused, so a recomputation gives the
// same output. The mask is drawn from (seed, iteration, layer), never from a
// running generator.
//
//   - {name: drop6, type: dropout, ratio: 0.5}
#ifndef SPILL_LAYERS_DROPOUT_LAYER_H_
#define SPILL_LAYERS_DROPOUT_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class DropoutLayer : public Layer {
 public:
  explicit DropoutLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    shape_ = inputs[0];
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  std::vector<AuxSpec> aux() const override { return {{"mask", shape_}}; }
  BackwardNeeds backward_needs() const override { return {{false}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::SmallOutputs(); }

 protected:
  Shape shape_;
  float ratio_ = 0.5f;
};

}  // namespace spill

#endif  // SPILL_LAYERS_DROPOUT_LAYER_H_
