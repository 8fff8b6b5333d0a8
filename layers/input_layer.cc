#include "layers/input_layer.h"

#include "framework/config/layer_params.h"
#include "framework/graph/layer_registry.h"

namespace spill {

InputLayer::InputLayer(LayerParams& params)
    : shape_(params.RequiredIntList("shape", 1, kMaxLayerExtent, 3)) {
  if (shape_.size() != 3) {
    params.Fail("shape", "must be [channels, height, width]");
    shape_ = {1, 1, 1};  // the layer is never used: Finish() reports the error
  }
  pixel_labels_ = params.Choice("labels", {"image", "pixels"}, "image") == "pixels";
}

Status InputLayer::Reshape(const std::vector<Shape>&, std::vector<Shape>* outputs) {
  *outputs = {Shape(batch(), shape_[0], shape_[1], shape_[2]),
              pixel_labels_ ? Shape(batch(), 1, shape_[1], shape_[2]) : Shape(batch(), 1, 1, 1)};
  return Status::Ok();
}

Status InputLayer::SetSequenceLength(int64_t length) {
  if (length < 1 || length > kMaxLayerExtent) {
    return InvalidArgument("layer '" + name() + "': a sequence length of " +
                           std::to_string(length) + " is outside [1, " +
                           std::to_string(kMaxLayerExtent) + "]");
  }
  shape_[2] = length;
  return Status::Ok();
}

void InputLayer::Forward(const ForwardArgs& args) const {
  SPILL_CHECK(args.batch != nullptr && args.batch->images != nullptr)
      << "no batch fed to " << name();
  const Tensor& images = args.outputs[0];
  const Tensor& labels = args.outputs[1];
  Queue& queue = args.device->compute_queue();
  // A slice of the batch takes its images (memory.chunk).
  const int64_t first = args.slice.begin;
  args.device->CopyAsync(images.data(), args.batch->images + first * images.shape().sample_size(),
                         images.bytes(), CopyKind::kHostToDevice, queue);
  if (args.batch->labels != nullptr) {
    args.device->CopyAsync(labels.data(), args.batch->labels + first * labels.shape().sample_size(),
                           labels.bytes(), CopyKind::kHostToDevice, queue);
  }
}

// The layer only copies through the device interface, so one class serves
// every device.
SPILL_REGISTER_LAYER(input, kCpu, InputLayer);
SPILL_REGISTER_LAYER(input, kCuda, InputLayer);

LayerWork InputLayer::work(Pass pass, const std::vector<Shape>& inputs,
                           const std::vector<Shape>& outputs) const {
  LayerWork w;
  if (pass == Pass::kForward) w.host_bytes = sizeof(float) * TotalElements(outputs);
  return w;
}

}  // namespace spill
