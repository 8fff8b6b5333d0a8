#include <algorithm>
#include <cmath>
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/softmax_loss_layer.h"

namespace spill {
namespace {

// The scores of one image and pixel are `classes_` values `pixels_` apart
// (one apart, a row, for N x classes x 1 x 1 scores).
class CpuSoftmaxLossLayer : public SoftmaxLossLayer {
 public:
  using SoftmaxLossLayer::SoftmaxLossLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* p = args.outputs[0].data();
    const int64_t c = classes_, pixels = pixels_, n = args.inputs[0].shape().n();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n * pixels; ++r) {
      const int64_t base = (r / pixels) * c * pixels + r % pixels;
      float top = x[base];
      for (int64_t j = 1; j < c; ++j) top = std::max(top, x[base + j * pixels]);
      double sum = 0;
      for (int64_t j = 0; j < c; ++j)
        sum += std::exp(static_cast<double>(x[base + j * pixels] - top));
      for (int64_t j = 0; j < c; ++j) {
        const int64_t i = base + j * pixels;
        p[i] = static_cast<float>(std::exp(static_cast<double>(x[i] - top)) / sum);
      }
    }
  }

  // d(mean loss)/dx = weight * (p - onehot(label)) / (N * pixels), N the
  // whole batch; ignoring a label, / the samples kept, and 0 for the others.
  void Backward(const BackwardArgs& args) const override {
    const float* p = args.outputs[0].data();
    const float* labels = args.inputs[1].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const int64_t c = classes_, pixels = pixels_, n = args.outputs[0].shape().n();
    const auto kept_in_call = [&] {
      double kept = 0;
      for (int64_t r = 0; r < n * pixels; ++r) kept += static_cast<int64_t>(labels[r]) != ignored_;
      return kept;
    };
    float scale = 0;
    if (!GradientScale(args.slice, n, args.loss_scale, kept_in_call, &scale)) return;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n * pixels; ++r) {
      const int64_t base = (r / pixels) * c * pixels + r % pixels;
      const int64_t label = static_cast<int64_t>(labels[r]);
      if (label == ignored_) {
        for (int64_t j = 0; j < c; ++j) {
          float& d = dx[base + j * pixels];
          d = accumulate ? d : 0.0f;
        }
        continue;
      }
      for (int64_t j = 0; j < c; ++j) {
        const int64_t i = base + j * pixels;
        const float g = (p[i] - (j == label ? 1.0f : 0.0f)) * scale;
        dx[i] = accumulate ? dx[i] + g : g;
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(softmax_loss, kCpu, CpuSoftmaxLossLayer);

}  // namespace spill
