#include "framework/graph/layer_registry.h"
#include "layers/cpu/typed_blocks.h"
#include "layers/relu_layer.h"

namespace spill {
namespace {

class CpuReluLayer : public ReluLayer {
 public:
  using ReluLayer::ReluLayer;

  // Elementwise: the same in any layout.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  // Any element type (layers/cpu/typed_blocks.h).
  bool computes_16_bit(Pass) const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const float slope = negative_slope_;
    cpu::ForEachFloatBlock({{&args.inputs[0], true, false}, {&args.outputs[0], false, true}},
                           args.inputs[0].numel(), [slope](int64_t n, float* const* f) {
                             const float* x = f[0];
                             float* y = f[1];
                             for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : x[i] * slope;
                           });
  }

  // With a positive slope, y > 0 exactly where x > 0, so y decides.
  void Backward(const BackwardArgs& args) const override {
    const float slope = negative_slope_;
    const bool accumulate = args.accumulate[0];
    cpu::ForEachFloatBlock({{&args.outputs[0], true, false},
                            {&args.output_grads[0], true, false},
                            {&args.input_grads[0], accumulate, true}},
                           args.output_grads[0].numel(),
                           [slope, accumulate](int64_t n, float* const* f) {
                             const float *y = f[0], *dy = f[1];
                             float* dx = f[2];
                             if (accumulate) {
                               for (int64_t i = 0; i < n; ++i)
                                 dx[i] += y[i] > 0 ? dy[i] : dy[i] * slope;
                             } else {
                               for (int64_t i = 0; i < n; ++i)
                                 dx[i] = y[i] > 0 ? dy[i] : dy[i] * slope;
                             }
                           });
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu, kCpu, CpuReluLayer);

}  // namespace spill
