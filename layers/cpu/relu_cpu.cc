#include "framework/graph/layer_registry.h"
#include "layers/relu_layer.h"

namespace spill {
namespace {

class CpuReluLayer : public ReluLayer {
 public:
  using ReluLayer::ReluLayer;

  // Elementwise: the same in any layout.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t n = args.inputs[0].numel();
    const float slope = negative_slope_;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : x[i] * slope;
  }

  // With a positive slope, y > 0 exactly where x > 0, so y decides.
  void Backward(const BackwardArgs& args) const override {
    const float* y = args.outputs[0].data();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t n = args.output_grads[0].numel();
    const float slope = negative_slope_;
    if (args.accumulate[0]) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] += y[i] > 0 ? dy[i] : dy[i] * slope;
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : dy[i] * slope;
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu, kCpu, CpuReluLayer);

}  // namespace spill
