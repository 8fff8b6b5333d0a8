// class_token and token on the CPU. The token's gradient adds the images one
// after the other from zero (the first slice of a batch starts it), so a
// step over slices gives the bits of the whole batch.
#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/token_layers.h"

namespace spill {
namespace {

class CpuClassTokenLayer : public ClassTokenLayer {
 public:
  using ClassTokenLayer::ClassTokenLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t steps = s.w();
    const float* x = args.inputs[0].data();
    const float* token = args.params[0].data();
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < s.n() * channels_; ++row) {
      float* out = y + row * (steps + 1);
      out[0] = token[row % channels_];
      std::copy(x + row * steps, x + (row + 1) * steps, out + 1);
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.output_grads[0].shape();
    const int64_t steps = s.w() - 1;
    const float* dy = args.output_grads[0].data();
    if (args.input_grads[0].valid()) {
      float* dx = args.input_grads[0].data();
      const bool add = args.accumulate[0];
#pragma omp parallel for schedule(static)
      for (int64_t row = 0; row < s.n() * channels_; ++row) {
        const float* g = dy + row * (steps + 1) + 1;
        float* d = dx + row * steps;
        for (int64_t t = 0; t < steps; ++t) d[t] = add ? d[t] + g[t] : g[t];
      }
    }
    if (!args.param_grads[0].valid()) return;
    float* dtoken = args.param_grads[0].data();
    if (args.slice.first()) std::fill(dtoken, dtoken + channels_, 0.0f);
    for (int64_t i = 0; i < s.n(); ++i) {
      for (int64_t c = 0; c < channels_; ++c) dtoken[c] += dy[(i * channels_ + c) * (steps + 1)];
    }
  }
};

class CpuTokenLayer : public TokenLayer {
 public:
  using TokenLayer::TokenLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    for (int64_t row = 0; row < s.n() * s.c(); ++row) y[row] = x[row * s.w() + position_];
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const Shape& s = args.input_grads[0].shape();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    if (!args.accumulate[0]) std::fill(dx, dx + s.numel(), 0.0f);
    for (int64_t row = 0; row < s.n() * s.c(); ++row) dx[row * s.w() + position_] += dy[row];
  }
};

}  // namespace

SPILL_REGISTER_LAYER(class_token, kCpu, CpuClassTokenLayer);
SPILL_REGISTER_LAYER(token, kCpu, CpuTokenLayer);

}  // namespace spill
