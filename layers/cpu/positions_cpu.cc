// positions on the CPU. The table's gradient adds the images one after the
// other from zero (the first slice of a batch starts it), so a step over
// slices gives the bits of the whole batch.
#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/positions_layer.h"

namespace spill {
namespace {

class CpuPositionsLayer : public PositionsLayer {
 public:
  using PositionsLayer::PositionsLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t steps = s.w();
    const float* x = args.inputs[0].data();
    const float* table = args.params[0].data();
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < s.n() * channels_; ++row) {
      const float* position = table + (row % channels_) * length_;
      for (int64_t t = 0; t < steps; ++t) y[row * steps + t] = x[row * steps + t] + position[t];
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.output_grads[0].shape();
    const int64_t steps = s.w();
    const float* dy = args.output_grads[0].data();
    if (args.input_grads[0].valid()) {
      float* dx = args.input_grads[0].data();
      const bool add = args.accumulate[0];
#pragma omp parallel for schedule(static)
      for (int64_t e = 0; e < s.numel(); ++e) dx[e] = add ? dx[e] + dy[e] : dy[e];
    }
    if (!args.param_grads[0].valid()) return;
    float* dtable = args.param_grads[0].data();
    if (args.slice.first()) std::fill(dtable, dtable + channels_ * length_, 0.0f);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < channels_; ++c) {
      for (int64_t i = 0; i < s.n(); ++i) {
        const float* g = dy + (i * channels_ + c) * steps;
        for (int64_t t = 0; t < steps; ++t) dtable[c * length_ + t] += g[t];
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(positions, kCpu, CpuPositionsLayer);

}  // namespace spill
