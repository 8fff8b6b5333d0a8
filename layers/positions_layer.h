// positions: a learned embedding of each position along the width, added to
// the input - GPT-2's wpe, a ViT's position embedding:
//   y[n, c, 0, t] = x[n, c, 0, t] + table[c, t]
// `length` is the longest sequence the table holds (a transformer's block
// size): a longer input is an error naming the layer, a shorter one uses the
// table's first positions (so a network whose sequence length changes from
// batch to batch keeps one table). The table, 1 x C x 1 x length, starts
// normal with standard deviation 0.02, as GPT-2's does, without weight
// decay.
//
//   - {name: pos, type: positions, length: 256}
#ifndef SPILL_LAYERS_POSITIONS_LAYER_H_
#define SPILL_LAYERS_POSITIONS_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class PositionsLayer : public Layer {
 public:
  explicit PositionsLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  BackwardNeeds backward_needs() const override { return {{false}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }

 protected:
  int64_t length_ = 0;
  int64_t channels_ = 0;
};

}  // namespace spill

#endif  // SPILL_LAYERS_POSITIONS_LAYER_H_
