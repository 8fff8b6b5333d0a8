#include "layers/broadcast_layers.h"

#include "framework/config/layer_params.h"

namespace spill {

BroadcastLayer::BroadcastLayer(LayerParams& params) : multiply_(params.spec().type == "multiply") {}

Status BroadcastLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape &a = inputs[0], &b = inputs[1];
  const Shape& big = a.h() * a.w() >= b.h() * b.w() ? a : b;
  for (int i = 0; i < 2; ++i) {
    const Shape& s = inputs[i];
    spread_[i] = s != big;
    const bool fits =
        s.n() == big.n() && s.c() == big.c() && (s == big || (s.h() == 1 && s.w() == 1));
    if (!fits) {
      return InvalidArgument(
          "the inputs " + a.ToString() + " and " + b.ToString() +
          " do not broadcast: each must be N x C x H x W or N x C x 1 x 1 with the same N and C "
          "(" +
          type() + " spreads per-channel values over the plane, nothing else)");
    }
  }
  *outputs = {big};
  return Status::Ok();
}

// One operation per output element; backward of multiply two (each input's
// gradient), reading both inputs again.
LayerWork BroadcastLayer::work(Pass pass, const std::vector<Shape>& inputs,
                               const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs), out = TotalElements(outputs);
  LayerWork w;
  if (pass == Pass::kForward) {
    w.flops = out;
    w.bytes = sizeof(float) * (in + out);
  } else {
    w.flops = multiply_ ? 2 * out : out;
    w.bytes = sizeof(float) * (2 * in + out + (multiply_ ? in : 0));
  }
  return w;
}

}  // namespace spill
