#include "framework/graph/layer_registry.h"
#include "layers/cpu/elementwise_kernels.h"
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

  // The loops are built to vectorize (elementwise_kernels.h).
  void Forward(const ForwardArgs& args) const override {
    const float slope = negative_slope_;
    cpu::ForEachFloatBlock(
        {{&args.inputs[0], true, false}, {&args.outputs[0], false, true}}, args.inputs[0].numel(),
        [slope](int64_t n, float* const* f) { cpu::ReluBlock(f[0], f[1], n, slope); });
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
                             cpu::ReluGradBlock(f[0], f[1], f[2], n, slope, accumulate);
                           });
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu, kCpu, CpuReluLayer);

}  // namespace spill
