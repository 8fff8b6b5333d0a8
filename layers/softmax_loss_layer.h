// softmax_loss: softmax over the scores' channels, then mean cross-entropy
// against the labels. Its output is the probabilities (N x classes x 1 x 1);
// the loss value is read from them. When only the scores are named, the
// labels of the network's input layer are wired in.
//
// Scores of a map (N x classes x H x W) with labels of one class per pixel
// (N x 1 x H x W: an input layer with `labels: pixels`) give a per-pixel
// loss, segmentation's: a softmax over the channels at every pixel, and the
// mean cross-entropy over every pixel of the batch.
//
// With `ignore_label: L` (PyTorch's ignore_index) a sample labeled L - the
// padding of sequences shorter than the batch's - adds nothing to the loss,
// its gradient or the accuracy, and the mean is over the other samples of
// the batch (backward then sweeps a sliced batch twice: the samples kept,
// then the gradients).
//
//   - {name: loss, type: softmax_loss}
//   - {name: loss, type: softmax_loss, inputs: [fc8, data:1], weight: 1.0}
//   - {name: loss, type: softmax_loss, ignore_label: -1}
#ifndef SPILL_LAYERS_SOFTMAX_LOSS_LAYER_H_
#define SPILL_LAYERS_SOFTMAX_LOSS_LAYER_H_

#include <algorithm>
#include <vector>

#include "framework/graph/layer.h"

namespace spill {

class SoftmaxLossLayer : public Layer {
 public:
  explicit SoftmaxLossLayer(LayerParams& params);

  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 2; }
  bool wants_labels() const override { return true; }
  bool is_loss() const override { return true; }
  bool propagates_to(int input) const override { return input == 0; }
  int64_t ignored_label() const override { return ignored_; }
  bool ignores() const { return ignored_ != kNoIgnoredLabel; }
  // Ignoring: sweep 0 counts the samples kept, sweep 1 writes gradients.
  int slice_sweeps(Pass pass) const override {
    return pass == Pass::kBackward && ignores() ? 2 : 1;
  }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward && ignores() ? 1 : 0;
  }

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override { return {{false, true}, true}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::SmallOutputs(); }

 protected:
  // The gradient's factor, weight x the loss scale / the samples scored over
  // the whole batch: N x pixels, or with an ignored label the samples kept,
  // counted in sweep 0 by `kept_in_call()` (this call's labels that are not
  // ignored). False: the call is sweep 0 alone, with no gradient to write.
  // The loss scale is a power of two: the factor is the unscaled one times
  // it, exactly.
  template <typename KeptInCall>
  bool GradientScale(const BatchSlice& slice, int64_t images, float loss_scale,
                     KeptInCall kept_in_call, float* scale) const {
    const float weight = weight_ * loss_scale;
    *scale = weight / static_cast<float>(slice.total(images) * pixels_);
    if (!ignores()) return true;
    std::vector<double> local;
    double* kept = SliceSums(slice, 1, &local);
    if (slice.runs(0)) *kept += kept_in_call();
    if (!slice.runs(1)) return false;
    *scale = weight / static_cast<float>(std::max(*kept, 1.0));
    return true;
  }

  int64_t batch_size_ = 0;
  int64_t classes_ = 0;
  int64_t pixels_ = 1;  // scored pixels per image: H x W of a map, else 1
  float weight_ = 1.0f;
  int64_t ignored_ = kNoIgnoredLabel;
};

}  // namespace spill

#endif  // SPILL_LAYERS_SOFTMAX_LOSS_LAYER_H_
