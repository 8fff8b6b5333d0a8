// input: the network's entry point. Outputs the images (N x C x H x W) and
// the labels (as `name:1`) of the batch the executor feeds, copied from host
// memory to the device on the compute queue. Labels are one class per image
// (N x 1 x 1 x 1), or with `labels: pixels` one per pixel (N x 1 x H x W,
// segmentation).
//
//   - {name: data, type: input, shape: [3, 224, 224]}
//   - {name: data, type: input, shape: [1, 64, 64], labels: pixels}
#ifndef SPILL_LAYERS_INPUT_LAYER_H_
#define SPILL_LAYERS_INPUT_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class InputLayer : public Layer {
 public:
  explicit InputLayer(LayerParams& params);

  int min_inputs() const override { return 0; }
  int max_inputs() const override { return 0; }
  int num_outputs() const override { return 2; }
  bool is_input() const override { return true; }
  bool supports_slices() const override { return true; }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  // The width of `shape` becomes `length`, within [1, kMaxLayerExtent].
  Status SetSequenceLength(int64_t length) override;
  BackwardNeeds backward_needs() const override { return {}; }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }
  // The batch comes from host memory.
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

  void Forward(const ForwardArgs& args) const override;
  void Backward(const BackwardArgs&) const override {}

 private:
  std::vector<int64_t> shape_;
  bool pixel_labels_ = false;
};

}  // namespace spill

#endif  // SPILL_LAYERS_INPUT_LAYER_H_
