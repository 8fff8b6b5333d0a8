// Elementwise activations, one family: the function comes from the layer
// type. All are cheap to recompute and keep the shape.
//
//   - {name: a, type: relu6}                          min(max(x, 0), 6)
//   - {name: a, type: clip, min: -1, max: 1}          min(max(x, min), max)
//   - {name: a, type: hard_sigmoid}                   clamp(alpha x + beta, 0, 1);
//                                                     alpha: 1/6, beta: 0.5 (PyTorch's)
//   - {name: a, type: hard_swish}                     x relu6(x + 3) / 6 (MobileNetV3)
//   - {name: a, type: sigmoid}                        1 / (1 + e^-x)
//   - {name: a, type: silu}                           x sigmoid(x) (swish; EfficientNet)
//   - {name: a, type: gelu}                           x Phi(x), exact (erf; ConvNeXt)
//   - {name: a, type: tanh}                           tanh(x) (MaxViT's classifier)
//
// Backward reads the output where the output alone decides the gradient
// (relu6, clip, hard_sigmoid, sigmoid, tanh), so the input may be freed after
// forward; hard_swish, silu and gelu read the input.
#ifndef SPILL_LAYERS_ACTIVATION_LAYERS_H_
#define SPILL_LAYERS_ACTIVATION_LAYERS_H_

#include "framework/graph/layer.h"
#include "layers/activation_math.h"

namespace spill {

class ActivationLayer : public Layer {
 public:
  // Reads the function from the layer's type and its constants, if any.
  explicit ActivationLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  BackwardNeeds backward_needs() const override {
    const bool output = ActivationReadsOutput(constants_.function);
    return {{!output}, output};
  }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

  const ActivationConstants& constants() const { return constants_; }

 protected:
  ActivationConstants constants_;
};

}  // namespace spill

#endif  // SPILL_LAYERS_ACTIVATION_LAYERS_H_
