#include "layers/lrn_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

LrnLayer::LrnLayer(LayerParams& params)
    : size_(params.Int("size", 5, 1, kMaxLayerExtent)),
      alpha_(params.Float("alpha", 1e-4, Bounds::Closed(0, 1e3))),
      beta_(params.Float("beta", 0.75, Bounds::Closed(0, 1e3))),
      k_(params.Float("k", 1.0, Bounds::AboveTo(0, 1e6))) {
  if (size_ % 2 == 0) params.Fail("size", "must be a positive odd number");
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
