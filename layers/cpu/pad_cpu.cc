// pad on the CPU: row copies into the border, and back for the gradient.
#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/pad_layer.h"

namespace spill {
namespace {

class CpuPadLayer : public PadLayer {
 public:
  using PadLayer::PadLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& in = args.inputs[0].shape();
    const Shape& out = args.outputs[0].shape();
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const float value = value_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < in.n() * in.c(); ++p) {
      float* plane = y + p * out.h() * out.w();
      std::fill_n(plane, out.h() * out.w(), value);
      for (int64_t h = 0; h < in.h(); ++h) {
        std::copy_n(x + (p * in.h() + h) * in.w(), in.w(),
                    plane + (h + pad_[0]) * out.w() + pad_[1]);
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const Shape& in = args.input_grads[0].shape();
    const Shape& out = args.output_grads[0].shape();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < in.n() * in.c(); ++p) {
      for (int64_t h = 0; h < in.h(); ++h) {
        const float* src = dy + (p * out.h() + h + pad_[0]) * out.w() + pad_[1];
        float* dst = dx + (p * in.h() + h) * in.w();
        for (int64_t w = 0; w < in.w(); ++w) dst[w] = accumulate ? dst[w] + src[w] : src[w];
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(pad, kCpu, CpuPadLayer);

}  // namespace spill
