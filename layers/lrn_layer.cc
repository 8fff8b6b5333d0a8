#include "layers/lrn_layer.h"

namespace spill {

LrnLayer::LrnLayer(LayerParams& params)
    : size_(params.Int("size", 5)),
      alpha_(params.Float("alpha", 1e-4)),
      beta_(params.Float("beta", 0.75)),
      k_(params.Float("k", 1.0)) {
  if (size_ < 1 || size_ % 2 == 0) params.Fail("size", "must be a positive odd number");
  if (k_ <= 0) params.Fail("k", "must be positive");
}

// A sum over `size` neighbouring channels and a power per element.
LayerWork LrnLayer::work(Pass pass, const std::vector<Shape>& inputs,
                         const std::vector<Shape>& outputs) const {
  const double n = TotalElements(inputs);
  constexpr double kPowerFlops = 4;
  LayerWork w;
  w.flops = n * ((pass == Pass::kForward ? 1 : 2) * static_cast<double>(size_) + kPowerFlops);
  w.bytes = sizeof(float) * n * (pass == Pass::kForward ? 2 : 4);
  return w;
}

}  // namespace spill
