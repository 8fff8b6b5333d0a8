// tokens: an image's pixels as a sequence, N x C x H x W viewed as
// N x C x 1 x (H W), row after row - a vision transformer's patches, after
// the strided convolution that embeds them (C channels per patch, one
// position per patch), become the tokens attention reads. The values do not
// change, only the shape; backward passes the gradient back the same way.
//
//   - {name: seq, type: tokens}
#ifndef SPILL_LAYERS_TOKENS_LAYER_H_
#define SPILL_LAYERS_TOKENS_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class TokensLayer : public Layer {
 public:
  explicit TokensLayer(LayerParams&) {}

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    const Shape& x = inputs[0];
    *outputs = {Shape(x.n(), x.c(), 1, x.h() * x.w())};
    return Status::Ok();
  }
  BackwardNeeds backward_needs() const override { return {{false}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
};

}  // namespace spill

#endif  // SPILL_LAYERS_TOKENS_LAYER_H_
