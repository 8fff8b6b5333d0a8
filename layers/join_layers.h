// Join layers: several inputs into one output. Both are cheap to recompute
// and their backward reads neither inputs nor outputs.
//
//   concat: stacks inputs along channels (Inception, DenseNet).
//     - {name: mixed, type: concat, inputs: [b1, b2, b3]}
//   add: elementwise sum of same-shaped inputs (ResNet).
//     - {name: sum, type: add, inputs: [bn2, $in]}
//     With `survival: p` (in (0, 1], default 1) the first input is a residual
//     branch with stochastic depth (Huang et al., 2016): in a training
//     iteration it is dropped with probability 1 - p, drawn from the run's
//     seed, the iteration and the layer - the sum is then the other inputs
//     alone and the executor computes none of the layers that reach the loss
//     only through the branch - and in evaluation the branch is scaled by p.
//     - {name: sum, type: add, inputs: [bn2, $in], survival: 0.75}
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
  explicit AddLayer(LayerParams& params);
  int min_inputs() const override { return 2; }
  int max_inputs() const override { return std::numeric_limits<int>::max(); }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override {
    return {std::vector<bool>(num_inputs_, false), false};
  }
  LayerCost cost() const override { return LayerCost::kCheap; }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;
  int DroppedInput(Phase phase, uint64_t seed) const override;
  // Every input's gradient is the sum's, except a branch that may be dropped.
  bool passes_gradient_to(int input) const override { return survival_ >= 1; }
  double drop_probability() const override { return 1.0 - survival_; }

  float survival() const { return survival_; }

 protected:
  // The branch's weight in this pass: 0 when dropped, p in evaluation, else 1.
  float BranchWeight(Phase phase, uint64_t seed) const;

  size_t num_inputs_ = 0;
  float survival_ = 1;
};

}  // namespace spill

#endif  // SPILL_LAYERS_JOIN_LAYERS_H_
