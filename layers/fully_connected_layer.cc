#include "layers/fully_connected_layer.h"

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

}  // namespace spill
