#include "layers/lrn_layer.h"

namespace spill {

LrnLayer::LrnLayer(LayerParams& params)
    : size_(params.Int("size", 5, 1, kMaxLayerExtent)),
      alpha_(params.Float("alpha", 1e-4, Bounds::Closed(0, 1e3))),
      beta_(params.Float("beta", 0.75, Bounds::Closed(0, 1e3))),
      k_(params.Float("k", 1.0, Bounds::AboveTo(0, 1e6))) {
  if (size_ % 2 == 0) params.Fail("size", "must be a positive odd number");
}

}  // namespace spill
