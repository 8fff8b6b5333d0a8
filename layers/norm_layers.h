// Per-channel affine layers that are not batch norm. Cheap to recompute.
//
//   layer_norm: normalizes each pixel's C channel values (mean 0, variance 1,
//     biased), then scales and shifts per channel with gamma and beta -
//     ConvNeXt's LayerNorm over channels (PyTorch's LayerNorm2d, or LayerNorm
//     on the channels-last view). Statistics come from the pixel alone, so
//     training and evaluation compute the same thing.
//     - {name: norm, type: layer_norm, eps: 1e-6}
//     Backward reads the input; the per-pixel statistics are recomputed into
//     its workspace (2 doubles per pixel).
//   scale: y = gamma * x (+ beta with bias: true), per channel - ConvNeXt's
//     layer scale, or an affine transform after a normalization.
//     - {name: ls, type: scale, value: 1e-6}        gamma starts at `value` (1)
//     Backward reads the input (for gamma's gradient).
#ifndef SPILL_LAYERS_NORM_LAYERS_H_
#define SPILL_LAYERS_NORM_LAYERS_H_

#include "framework/graph/layer.h"

namespace spill {

class LayerNormLayer : public Layer {
 public:
  explicit LayerNormLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  size_t workspace_bytes(Pass pass) const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  Shape shape_;
  double eps_ = 1e-5;
};

class ScaleLayer : public Layer {
 public:
  explicit ScaleLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    channels_ = inputs[0].c();
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  std::vector<ParamSpec> params() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }

 protected:
  int64_t channels_ = 0;
  bool bias_ = false;
  float value_ = 1;
};

}  // namespace spill

#endif  // SPILL_LAYERS_NORM_LAYERS_H_
