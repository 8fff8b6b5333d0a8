#include "layers/softmax_loss_layer.h"

namespace spill {

SoftmaxLossLayer::SoftmaxLossLayer(LayerParams& params)
    : weight_(static_cast<float>(params.Float("weight", 1.0, Bounds::Closed(0, 1e6)))) {}

Status SoftmaxLossLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& scores = inputs[0];
  const Shape& labels = inputs[1];
  if (scores.h() != 1 || scores.w() != 1) {
    return InvalidArgument("scores must be N x classes x 1 x 1, got the map " + scores.ToString() +
                           " (put a fully_connected or global_average_pool layer before the loss)");
  }
  if (labels.n() != scores.n() || labels.sample_size() != 1) {
    return InvalidArgument("labels must be N x 1 x 1 x 1 for scores " + scores.ToString() +
                           ", got " + labels.ToString());
  }
  batch_size_ = scores.n();
  classes_ = scores.sample_size();
  *outputs = {Shape(scores.n(), classes_, 1, 1)};
  return Status::Ok();
}

}  // namespace spill
