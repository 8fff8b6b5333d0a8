#include "framework/base/random.h"
#include "framework/graph/layer_registry.h"
#include "layers/dropout_layer.h"

namespace spill {
namespace {

class CpuDropoutLayer : public DropoutLayer {
 public:
  using DropoutLayer::DropoutLayer;

  // Elementwise: the same in any layout.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  // The mask holds 0 or 1 / (1 - ratio) per element, drawn at the element's
  // index in the whole batch (a slice draws its part of the same mask).
  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    float* mask = args.aux[0].data();
    const int64_t n = args.inputs[0].numel();
    const int64_t first = args.slice.begin * args.inputs[0].shape().sample_size();
    if (args.phase == Phase::kEval) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    }
    if (!args.recompute) {
      const float keep = 1.0f / (1.0f - ratio_);
      const uint64_t seed = args.seed;
      const float ratio = ratio_;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) mask[i] = UniformAt(seed, first + i) < ratio ? 0.0f : keep;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * mask[i];
  }

  void Backward(const BackwardArgs& args) const override {
    const float* dy = args.output_grads[0].data();
    const float* mask = args.aux[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t n = args.output_grads[0].numel();
    const bool accumulate = args.accumulate[0];
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dx[i] = (accumulate ? dx[i] : 0.0f) + dy[i] * mask[i];
  }
};

}  // namespace

SPILL_REGISTER_LAYER(dropout, kCpu, CpuDropoutLayer);

}  // namespace spill
