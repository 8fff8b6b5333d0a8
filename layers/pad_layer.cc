#include "layers/pad_layer.h"

#include <string>

#include "framework/config/layer_params.h"

namespace spill {

PadLayer::PadLayer(LayerParams& params) {
  const std::vector<int64_t> pad =
      params.RequiredIntList("pad", -kMaxLayerStride, kMaxLayerStride, 4);
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
  const int64_t out_h = in.h() + pad_[0] + pad_[2], out_w = in.w() + pad_[1] + pad_[3];
  if (out_h < 1 || out_w < 1) {
    return InvalidArgument("pad [" + std::to_string(pad_[0]) + ", " + std::to_string(pad_[1]) +
                           ", " + std::to_string(pad_[2]) + ", " + std::to_string(pad_[3]) +
                           "] crops the input's " + std::to_string(in.h()) + "x" +
                           std::to_string(in.w()) + " to " + std::to_string(out_h) + "x" +
                           std::to_string(out_w) + " (the output needs a row and a column)");
  }
  *outputs = {Shape(in.n(), in.c(), out_h, out_w)};
  return Status::Ok();
}

}  // namespace spill
