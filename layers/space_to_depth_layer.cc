#include "layers/space_to_depth_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

SpaceToDepthLayer::SpaceToDepthLayer(LayerParams& params)
    : block_(params.Int("block_size", 2, 1, kMaxLayerStride)) {}

Status SpaceToDepthLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  if (in.h() % block_ != 0 || in.w() % block_ != 0) {
    return InvalidArgument("height " + std::to_string(in.h()) + " and width " +
                           std::to_string(in.w()) + " must both be multiples of block_size (" +
                           std::to_string(block_) + ")");
  }
  *outputs = {Shape(in.n(), block_ * block_ * in.c(), in.h() / block_, in.w() / block_)};
  return Status::Ok();
}

// A copy: every element read and written once.
LayerWork SpaceToDepthLayer::work(Pass, const std::vector<Shape>& inputs,
                                  const std::vector<Shape>& outputs) const {
  LayerWork w;
  w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs));
  return w;
}

SpaceToDepthShape SpaceToDepthLayer::Geometry(const Shape& in) const {
  SpaceToDepthShape s;
  s.n = in.n();
  s.c = in.c();
  s.h = in.h();
  s.w = in.w();
  s.block = block_;
  return s;
}

}  // namespace spill
