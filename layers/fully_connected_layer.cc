#include "layers/fully_connected_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

FullyConnectedLayer::FullyConnectedLayer(LayerParams& params)
    : outputs_(params.RequiredInt("outputs", 1, kMaxLayerExtent)),
      bias_(params.Bool("bias", true)),
      weight_init_(params.Choice("weight_init", {"xavier", "he"}, "xavier")) {}

std::vector<ParamSpec> FullyConnectedLayer::params() const {
  ParamSpec weight{"weight", Shape(outputs_, in_features_, 1, 1),
                   weight_init_ == "he" ? Initializer::HeNormal(in_features_)
                                        : Initializer::XavierUniform(in_features_, outputs_)};
  std::vector<ParamSpec> specs = {weight};
  if (bias_) {
    ParamSpec bias{"bias", Shape(1, outputs_, 1, 1), Initializer::Constant(0)};
    bias.decay_mult = 0;
    specs.push_back(bias);
  }
  return specs;
}

// A matrix product: 2*N*In*Out forward; the weight gradient and, where
// wanted, the input gradient backward.
LayerWork FullyConnectedLayer::work(Pass pass, const std::vector<Shape>& inputs,
                                    const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs), out = TotalElements(outputs);
  const double weights = static_cast<double>(in_features_) * static_cast<double>(outputs_);
  const double products = 2.0 * static_cast<double>(batch_size_) * weights;
  LayerWork w;
  if (pass == Pass::kForward) {
    w.flops = products + (bias_ ? out : 0);
    w.bytes = sizeof(float) * (in + out + weights);
  } else {
    const bool data_grad = propagate_down(0);
    w.flops = (data_grad ? 2 : 1) * products + (bias_ ? out : 0);
    w.bytes = sizeof(float) * ((data_grad ? 2 : 1) * in + out + 2 * weights);
  }
  return w;
}

}  // namespace spill
