#include "layers/channel_layers.h"

#include "framework/config/layer_params.h"

namespace spill {

ChannelShuffleLayer::ChannelShuffleLayer(LayerParams& params)
    : groups_(params.RequiredInt("groups", 1, kMaxLayerExtent)) {}

Status ChannelShuffleLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  if (inputs[0].c() % groups_ != 0) {
    return InvalidArgument("groups (" + std::to_string(groups_) + ") must divide the " +
                           std::to_string(inputs[0].c()) + " input channels");
  }
  *outputs = {inputs[0]};
  return Status::Ok();
}

// A copy: every element read and written once.
LayerWork ChannelShuffleLayer::work(Pass, const std::vector<Shape>& inputs,
                                    const std::vector<Shape>& outputs) const {
  LayerWork w;
  w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs));
  return w;
}

SliceLayer::SliceLayer(LayerParams& params)
    : begin_(params.Int("begin", 0, 0, kMaxLayerExtent - 1)),
      end_(params.RequiredInt("end", 1, kMaxLayerExtent)) {
  if (end_ <= begin_) params.Fail("end", "must be greater than begin");
}

Status SliceLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  channels_ = in.c();
  if (end_ > in.c()) {
    return InvalidArgument("channels [" + std::to_string(begin_) + ", " + std::to_string(end_) +
                           ") are not all in the input's " + std::to_string(in.c()));
  }
  *outputs = {Shape(in.n(), end_ - begin_, in.h(), in.w())};
  return Status::Ok();
}

// Forward copies the slice; backward writes the whole input gradient (zeros
// outside the slice).
LayerWork SliceLayer::work(Pass pass, const std::vector<Shape>& inputs,
                           const std::vector<Shape>& outputs) const {
  LayerWork w;
  w.bytes =
      sizeof(float) * (pass == Pass::kForward ? 2 * TotalElements(outputs)
                                              : TotalElements(outputs) + TotalElements(inputs));
  return w;
}

}  // namespace spill
