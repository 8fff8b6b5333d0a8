// fully_connected: y = x W^T + b, with x flattened to N x (C*H*W). Output
// N x outputs x 1 x 1. A checkpoint layer; backward reads the input.
//
//   - {name: fc8, type: fully_connected, outputs: 1000}
//   bias: true; weight_init: xavier | he
#ifndef SPILL_LAYERS_FULLY_CONNECTED_LAYER_H_
#define SPILL_LAYERS_FULLY_CONNECTED_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class FullyConnectedLayer : public Layer {
 public:
  explicit FullyConnectedLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    batch_size_ = inputs[0].n();
    in_features_ = inputs[0].sample_size();
    *outputs = {Shape(batch_size_, outputs_, 1, 1)};
    return Status::Ok();
  }
  std::vector<ParamSpec> params() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }
  MemoryTraits memory_traits() const override { return MemoryTraits::SmallOutputs(); }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  int64_t outputs_ = 0;
  int64_t batch_size_ = 0;
  int64_t in_features_ = 0;
  bool bias_ = true;
  std::string weight_init_;
};

}  // namespace spill

#endif  // SPILL_LAYERS_FULLY_CONNECTED_LAYER_H_
