#include "layers/dropout_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

DropoutLayer::DropoutLayer(LayerParams& params)
    : ratio_(static_cast<float>(params.Float("ratio", 0.5, Bounds::FromBelow(0, 1)))) {}

}  // namespace spill
