// batch_norm: normalizes each channel over the batch and the image, then
// scales and shifts (PyTorch's BatchNorm2d semantics). Cheap to recompute.
//
//   - {name: bn1, type: batch_norm}
//   eps: 1e-5; momentum: 0.1 (running = (1 - m) * running + m * batch)
//
// Training uses batch statistics (biased variance to normalize, unbiased for
// the running variance); evaluation uses the running statistics. Forward
// saves the batch mean and inverse standard deviation (aux) and computes its
// output from them, so a recomputing forward reproduces the output exactly
// without touching the running statistics. Backward reads the input.
#ifndef SPILL_LAYERS_BATCH_NORM_LAYER_H_
#define SPILL_LAYERS_BATCH_NORM_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class BatchNormLayer : public Layer {
 public:
  explicit BatchNormLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    channels_ = inputs[0].c();
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  std::vector<ParamSpec> params() const override;
  std::vector<AuxSpec> aux() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  int64_t channels_ = 0;
  double eps_ = 1e-5;
  double momentum_ = 0.1;
};

}  // namespace spill

#endif  // SPILL_LAYERS_BATCH_NORM_LAYER_H_
