// Runs one layer on host buffers, outside any network: builds it from a YAML
// entry, shapes it, and gives direct access to every tensor. Used by the
// gradient checks and the known-value tests.
#ifndef SPILL_TESTS_TESTING_LAYER_HARNESS_H_
#define SPILL_TESTS_TESTING_LAYER_HARNESS_H_

#include <memory>
#include <string>
#include <vector>

#include "framework/device/cpu_device.h"
#include "framework/device/tensor.h"
#include "framework/graph/layer.h"

namespace spill {
namespace testing {

class LayerHarness {
 public:
  // `entry` is a YAML map such as "{type: convolution, filters: 2, kernel: 3}".
  LayerHarness(const std::string& entry, const std::vector<Shape>& input_shapes,
               DeviceType device = DeviceType::kCpu);

  Layer& layer() { return *layer_; }
  const std::vector<Shape>& output_shapes() const { return output_shapes_; }

  // Hands the layer its tensors in `layout` (blocked or channels-last)
  // wherever a network would if convolutions computing in it surrounded it
  // (framework/graph/layouts.h: the layer's rule allows it, channels in whole
  // blocks, planes larger than 1x1). The buffers below stay plain: the
  // harness converts on the way in and out, so every check reads the same
  // values in every layout.
  void UseLayouts(Layout layout);
  void UseBlockedLayouts() { UseLayouts(Layout::kBlocked16); }

  void Forward(Phase phase = Phase::kTrain, bool recompute = false, uint64_t seed = 7);
  // Uses output_grads as dy; writes input_grads and param_grads.
  void Backward(const std::vector<bool>& accumulate = {});
  // Fills inputs and params with reproducible values in [-1, 1).
  void Randomize(uint64_t seed);

  std::vector<std::vector<float>> inputs, outputs, params, aux;
  std::vector<std::vector<float>> input_grads, output_grads, param_grads;
  std::vector<ParamSpec> param_specs;
  // Layers reduce over the batch image by image (BatchSlice::image_order).
  bool image_order = false;
  // When positive, Forward and Backward compute the batch in slices of this
  // many images (BatchSlice), as a streamed step does: every sweep over
  // every slice in order, the tensors views of the slice, the carried sums
  // kept from slice to slice. Plain layouts only.
  int64_t slice_images = 0;

 private:
  // A view of `values` in the layer's layout: the buffer itself when plain,
  // else a copy in that layout in `staging` (copied back by Unstage).
  Tensor Stage(const Shape& shape, Layout layout, std::vector<float>& values,
               std::vector<std::vector<float>>* staging);
  void Unstage(const Tensor& staged, std::vector<float>& values);

  // Calls `run` with args restricted to each slice (or once, unsliced).
  template <typename Args, typename Run>
  void RunSlices(Pass pass, Args& args, Run run);

  std::unique_ptr<Layer> layer_;
  std::vector<Shape> input_shapes_, output_shapes_;
  std::vector<Layout> input_layouts_, output_layouts_;
  std::vector<float> workspace_;
  CpuDevice device_;
};

struct GradientCheckOptions {
  float step = 1e-3f;
  float tolerance = 1e-2f;  // relative, with an absolute floor of `tolerance`
  Phase phase = Phase::kTrain;
  // Inputs whose values are labels (not differentiated).
  std::vector<int> skip_inputs;
};

// Compares analytic gradients of L = sum(y * r) (r fixed random weights; for
// loss layers L is the mean cross-entropy) with central differences, in
// double, for every differentiable input and trainable parameter. Returns
// the failures, one per line; empty when all agree.
std::string CheckGradients(LayerHarness& harness, const GradientCheckOptions& options = {});

// Input 0's gradient added when asked: after Forward, with output_grads set,
// Backward once overwriting, then again adding into a known base. Returns
// the first position whose sum is not base + the fresh gradient (within
// 1e-5); empty when every one is.
std::string CheckInputGradientAdds(LayerHarness& harness);

}  // namespace testing
}  // namespace spill

#endif  // SPILL_TESTS_TESTING_LAYER_HARNESS_H_
