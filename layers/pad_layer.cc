#include "layers/pad_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

PadLayer::PadLayer(LayerParams& params) {
  const std::vector<int64_t> pad = params.RequiredIntList("pad", 0, kMaxLayerStride, 4);
  if (pad.size() == 2) {
    pad_ = {pad[0], pad[1], pad[0], pad[1]};
  } else if (pad.size() == 4) {
    pad_ = {pad[0], pad[1], pad[2], pad[3]};
  } else if (params.ok()) {
    params.Fail("pad", "must be [h, w] or [top, left, bottom, right]");
  }
  constexpr double kMaxValue = 3.4e38;  // within float's range
  value_ = static_cast<float>(params.Float("value", 0.0, Bounds::Closed(-kMaxValue, kMaxValue)));
}

Status PadLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  *outputs = {Shape(in.n(), in.c(), in.h() + pad_[0] + pad_[2], in.w() + pad_[1] + pad_[3])};
  return Status::Ok();
}

}  // namespace spill
