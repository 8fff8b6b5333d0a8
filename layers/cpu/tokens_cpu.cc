// tokens on the CPU: the same values in the same order (N x C x H x W and
// N x C x 1 x HW share their memory layout), copied forward and back.
#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/tokens_layer.h"

namespace spill {
namespace {

class CpuTokensLayer : public TokensLayer {
 public:
  using TokensLayer::TokensLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    std::copy(x, x + args.inputs[0].shape().numel(), args.outputs[0].data());
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t count = args.output_grads[0].shape().numel();
    if (args.accumulate[0]) {
      for (int64_t e = 0; e < count; ++e) dx[e] += dy[e];
    } else {
      std::copy(dy, dy + count, dx);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(tokens, kCpu, CpuTokensLayer);

}  // namespace spill
