// The base of layers that move their input's values (channel_shuffle,
// slice, pad, space_to_depth) or mix them with weights fixed by the shapes
// (upsample): cheap to recompute, and backward reads neither their inputs
// nor their outputs, only the output gradient.
#ifndef SPILL_LAYERS_REARRANGING_LAYER_H_
#define SPILL_LAYERS_REARRANGING_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class RearrangingLayer : public Layer {
 public:
  BackwardNeeds backward_needs() const override { return {{false}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
};

}  // namespace spill

#endif  // SPILL_LAYERS_REARRANGING_LAYER_H_
