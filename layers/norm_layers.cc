#include "layers/norm_layers.h"

#include "framework/config/layer_params.h"

namespace spill {

LayerNormLayer::LayerNormLayer(LayerParams& params)
    : eps_(params.Float("eps", 1e-5, Bounds::AboveTo(0, 1))) {}

Status LayerNormLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  shape_ = inputs[0];
  if (shape_.c() < 2) {
    return InvalidArgument(
        "layer_norm normalizes over the channels (axis 1), and the input " + shape_.ToString() +
        " has one: every output would be beta. Normalize a tensor with channels (for a norm over "
        "another axis, rearrange the tensor first)");
  }
  *outputs = {inputs[0]};
  return Status::Ok();
}

std::vector<ParamSpec> LayerNormLayer::params() const {
  Shape s(1, shape_.c(), 1, 1);
  ParamSpec gamma{"gamma", s, Initializer::Constant(1)};
  ParamSpec beta{"beta", s, Initializer::Constant(0)};
  gamma.decay_mult = beta.decay_mult = 0;
  return {gamma, beta};
}

// Backward keeps each pixel's mean and inverse deviation (doubles) for the
// parameter gradients, which sum over pixels per channel.
size_t LayerNormLayer::workspace_bytes(Pass pass) const {
  if (pass == Pass::kForward) return 0;
  return static_cast<size_t>(shape_.n() * shape_.h() * shape_.w()) * 2 * sizeof(double);
}

LayerWork LayerNormLayer::work(Pass pass, const std::vector<Shape>& inputs,
                               const std::vector<Shape>& outputs) const {
  const double n = TotalElements(inputs);
  constexpr double kForwardFlopsPerElement = 6, kBackwardFlopsPerElement = 12;
  LayerWork w;
  w.flops = n * (pass == Pass::kForward ? kForwardFlopsPerElement : kBackwardFlopsPerElement);
  w.bytes = sizeof(float) * n * (pass == Pass::kForward ? 3 : 5);
  return w;
}

ScaleLayer::ScaleLayer(LayerParams& params)
    : bias_(params.Bool("bias", false)),
      value_(static_cast<float>(params.Float("value", 1.0, Bounds::Closed(-1e6, 1e6)))) {}

std::vector<ParamSpec> ScaleLayer::params() const {
  Shape s(1, channels_, 1, 1);
  std::vector<ParamSpec> specs = {{"gamma", s, Initializer::Constant(value_)}};
  if (bias_) {
    ParamSpec beta{"beta", s, Initializer::Constant(0)};
    beta.decay_mult = 0;
    specs.push_back(beta);
  }
  return specs;
}

}  // namespace spill
