#include "layers/relu_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

ReluLayer::ReluLayer(LayerParams& params)
    : negative_slope_(
          static_cast<float>(params.Float("negative_slope", 0.0, Bounds::Closed(0, 1e3)))) {}

}  // namespace spill
