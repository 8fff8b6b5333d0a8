#include "layers/dropout_layer.h"

namespace spill {

DropoutLayer::DropoutLayer(LayerParams& params)
    : ratio_(static_cast<float>(params.Float("ratio", 0.5))) {
  if (ratio_ < 0 || ratio_ >= 1) params.Fail("ratio", "must be in [0, 1)");
}

}  // namespace spill
