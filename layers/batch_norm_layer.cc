#include "layers/batch_norm_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

BatchNormLayer::BatchNormLayer(LayerParams& params)
    : eps_(params.Float("eps", 1e-5, Bounds::AboveTo(0, 1))),
      momentum_(params.Float("momentum", 0.1, Bounds::Closed(0, 1))) {}

std::vector<ParamSpec> BatchNormLayer::params() const {
  Shape s(1, channels_, 1, 1);
  ParamSpec gamma{"gamma", s, Initializer::Constant(1)};
  ParamSpec beta{"beta", s, Initializer::Constant(0)};
  ParamSpec mean{"running_mean", s, Initializer::Constant(0)};
  ParamSpec var{"running_var", s, Initializer::Constant(1)};
  var.non_negative = true;
  gamma.decay_mult = beta.decay_mult = 0;
  mean.trainable = var.trainable = false;
  return {gamma, beta, mean, var};
}

std::vector<AuxSpec> BatchNormLayer::aux() const {
  Shape s(1, channels_, 1, 1);
  return {{"mean", s}, {"inv_std", s}};
}

// Training forward reads the input twice (statistics, then normalisation)
// and writes once; backward reads input and gradient twice (two
// reductions, then the input gradient) and writes once.
LayerWork BatchNormLayer::work(Pass pass, const std::vector<Shape>& inputs,
                               const std::vector<Shape>& outputs) const {
  const double n = TotalElements(inputs);
  constexpr double kForwardFlopsPerElement = 6, kBackwardFlopsPerElement = 10;
  LayerWork w;
  w.flops = n * (pass == Pass::kForward ? kForwardFlopsPerElement : kBackwardFlopsPerElement);
  w.bytes = sizeof(float) * n * (pass == Pass::kForward ? 3 : 5);
  return w;
}

}  // namespace spill
