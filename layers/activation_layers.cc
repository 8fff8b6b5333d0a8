#include "layers/activation_layers.h"

#include "framework/base/check.h"
#include "framework/config/layer_params.h"

namespace spill {

ActivationLayer::ActivationLayer(LayerParams& params) {
  const std::string& type = params.spec().type;
  ActivationConstants& k = constants_;
  if (type == "relu6" || type == "clip") {
    k.function = ActivationFunction::kClip;
    if (type == "clip") {
      constexpr double kMaxBound = 1e30;  // finite bounds, far beyond any activation
      k.min = static_cast<float>(params.Float("min", 0.0, Bounds::Closed(-kMaxBound, kMaxBound)));
      k.max = static_cast<float>(params.Float("max", 6.0, Bounds::Closed(-kMaxBound, kMaxBound)));
      if (!(k.min < k.max)) params.Fail("max", "must be greater than min");
    }
  } else if (type == "hard_sigmoid") {
    k.function = ActivationFunction::kHardSigmoid;
    constexpr double kMaxSlope = 1e3;
    k.alpha = static_cast<float>(params.Float("alpha", 1.0 / 6, Bounds::AboveTo(0, kMaxSlope)));
    k.beta = static_cast<float>(params.Float("beta", 0.5, Bounds::Closed(-kMaxSlope, kMaxSlope)));
  } else if (type == "hard_swish") {
    k.function = ActivationFunction::kHardSwish;
  } else if (type == "sigmoid") {
    k.function = ActivationFunction::kSigmoid;
  } else if (type == "silu") {
    k.function = ActivationFunction::kSilu;
  } else if (type == "tanh") {
    k.function = ActivationFunction::kTanh;
  } else {
    SPILL_CHECK(type == "gelu") << "activation registered under an unknown type '" << type << "'";
    k.function = ActivationFunction::kGelu;
  }
}

// A handful of operations per element (an exp or erf counted as several).
LayerWork ActivationLayer::work(Pass pass, const std::vector<Shape>& inputs,
                                const std::vector<Shape>& outputs) const {
  constexpr double kTranscendentalFlops = 8, kPiecewiseFlops = 3;
  const bool transcendental = constants_.function == ActivationFunction::kSigmoid ||
                              constants_.function == ActivationFunction::kSilu ||
                              constants_.function == ActivationFunction::kGelu ||
                              constants_.function == ActivationFunction::kTanh;
  const double n = TotalElements(outputs);
  LayerWork w;
  w.flops = n * (transcendental ? kTranscendentalFlops : kPiecewiseFlops);
  w.bytes = sizeof(float) * n * (pass == Pass::kForward ? 2 : 3);
  return w;
}

}  // namespace spill
