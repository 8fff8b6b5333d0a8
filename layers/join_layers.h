// Join layers: several inputs into one output. Both are cheap to recompute
// and their backward reads neither inputs nor outputs.
//
//   concat: stacks inputs along channels (Inception, DenseNet).
//     - {name: mixed, type: concat, inputs: [b1, b2, b3]}
//   add: elementwise sum of same-shaped inputs (ResNet).
//     - {name: sum, type: add, inputs: [bn2, $in]}
#ifndef SPILL_LAYERS_JOIN_LAYERS_H_
#define SPILL_LAYERS_JOIN_LAYERS_H_

#include <limits>

#include "framework/graph/layer.h"

namespace spill {

class ConcatLayer : public Layer {
 public:
  explicit ConcatLayer(LayerParams&) {}
  int min_inputs() const override { return 1; }
  int max_inputs() const override { return std::numeric_limits<int>::max(); }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override {
    return {std::vector<bool>(inputs_.size(), false), false};
  }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  std::vector<Shape> inputs_;
};

class AddLayer : public Layer {
 public:
  explicit AddLayer(LayerParams&) {}
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return std::numeric_limits<int>::max(); }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override {
    return {std::vector<bool>(num_inputs_, false), false};
  }
  LayerCost cost() const override { return LayerCost::kCheap; }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  size_t num_inputs_ = 0;
};

}  // namespace spill

#endif  // SPILL_LAYERS_JOIN_LAYERS_H_
