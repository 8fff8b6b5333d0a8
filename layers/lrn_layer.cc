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

}  // namespace spill
