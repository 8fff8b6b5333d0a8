// lrn: local response normalization across channels (AlexNet, Caffe's
// ACROSS_CHANNELS and PyTorch's LocalResponseNorm):
//   scale = k + alpha / size * sum over the `size` neighbouring channels of x^2
//   y = x * scale^-beta
// Cheap to recompute. Backward reads the input and the output (as cuDNN does).
//
//   - {name: norm1, type: lrn, size: 5, alpha: 0.0001, beta: 0.75, k: 1}
#ifndef SPILL_LAYERS_LRN_LAYER_H_
#define SPILL_LAYERS_LRN_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class LrnLayer : public Layer {
 public:
  explicit LrnLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    shape_ = inputs[0];
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  BackwardNeeds backward_needs() const override { return {{true}, true}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  Shape shape_;
  int64_t size_ = 5;
  double alpha_ = 1e-4, beta_ = 0.75, k_ = 1.0;
};

}  // namespace spill

#endif  // SPILL_LAYERS_LRN_LAYER_H_
