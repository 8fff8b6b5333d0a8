#include "layers/positions_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

PositionsLayer::PositionsLayer(LayerParams& params)
    : length_(params.RequiredInt("length", 1, kMaxLayerExtent)) {}

Status PositionsLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  if (x.h() != 1) {
    return InvalidArgument("positions takes a sequence N x C x 1 x T, got " + x.ToString());
  }
  if (x.w() > length_) {
    return InvalidArgument("a sequence of " + std::to_string(x.w()) +
                           " positions is longer than the table's length: " +
                           std::to_string(length_) + " (the block size)");
  }
  channels_ = x.c();
  *outputs = {x};
  return Status::Ok();
}

std::vector<ParamSpec> PositionsLayer::params() const {
  ParamSpec table{"table", Shape(1, channels_, 1, length_), Initializer::Normal(0.02f)};
  table.decay_mult = 0;
  return {table};
}

}  // namespace spill
