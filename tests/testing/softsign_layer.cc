// softsign: y = x / (1 + |x|), a layer type added in the tests alone - this
// file and its BUILD target are all a new layer type costs. It says what it
// is to the memory policies (cheap to recompute, feature maps worth moving)
// in its own declarations, so Dymem's offload set and the recomputation
// policies treat it as they treat ReLU without a list anywhere naming it.
// Backward reads the output: dy / (1 + |x|)^2 = dy * (1 - |y|)^2.
#include <cmath>

#include "framework/graph/layer.h"
#include "framework/graph/layer_registry.h"

namespace spill {
namespace {

class SoftsignLayer : public Layer {
 public:
  explicit SoftsignLayer(LayerParams&) {}
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    *outputs = {inputs[0]};
    return Status::Ok();
  }
  BackwardNeeds backward_needs() const override { return {{false}, true}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }

  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t n = args.inputs[0].numel();
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::fabs(x[i]));
  }

  void Backward(const BackwardArgs& args) const override {
    const float* y = args.outputs[0].data();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t n = args.output_grads[0].numel();
    for (int64_t i = 0; i < n; ++i) {
      const float slope = (1.0f - std::fabs(y[i])) * (1.0f - std::fabs(y[i]));
      dx[i] = (args.accumulate[0] ? dx[i] : 0.0f) + dy[i] * slope;
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(softsign, kCpu, SoftsignLayer);

}  // namespace spill
