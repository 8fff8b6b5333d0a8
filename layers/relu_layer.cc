#include "layers/relu_layer.h"

namespace spill {

ReluLayer::ReluLayer(LayerParams& params)
    : negative_slope_(static_cast<float>(params.Float("negative_slope", 0.0))) {
  if (negative_slope_ < 0) params.Fail("negative_slope", "must not be negative");
}

}  // namespace spill
