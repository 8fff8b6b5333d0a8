#include "layers/softmax_loss_layer.h"

#include "framework/config/layer_params.h"

namespace spill {

namespace {
// Labels are stored as floats: integers beyond 2^24 are not all representable.
constexpr int64_t kLargestLabel = 1 << 24;
}  // namespace

SoftmaxLossLayer::SoftmaxLossLayer(LayerParams& params)
    : weight_(static_cast<float>(params.Float("weight", 1.0, Bounds::Closed(0, 1e6)))) {
  if (params.Has("ignore_label")) {
    ignored_ = params.Int("ignore_label", -1, -kLargestLabel, kLargestLabel);
  }
}

Status SoftmaxLossLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& scores = inputs[0];
  const Shape& labels = inputs[1];
  batch_size_ = scores.n();
  if (labels.h() * labels.w() > 1) {  // one class per pixel
    if (labels != Shape(scores.n(), 1, scores.h(), scores.w())) {
      return InvalidArgument("labels of one class per pixel, " + labels.ToString() +
                             ", must be N x 1 x H x W of the scores " + scores.ToString());
    }
    classes_ = scores.c();
    pixels_ = scores.h() * scores.w();
    *outputs = {scores};
    return Status::Ok();
  }
  if (scores.h() != 1 || scores.w() != 1) {
    return InvalidArgument("scores must be N x classes x 1 x 1, got the map " + scores.ToString() +
                           " (put a fully_connected or global_average_pool layer before the " +
                           "loss, or give the input layer labels: pixels for a loss per pixel)");
  }
  if (labels.n() != scores.n() || labels.sample_size() != 1) {
    return InvalidArgument("labels must be N x 1 x 1 x 1 for scores " + scores.ToString() +
                           ", got " + labels.ToString());
  }
  classes_ = scores.sample_size();
  *outputs = {Shape(scores.n(), classes_, 1, 1)};
  return Status::Ok();
}

}  // namespace spill
