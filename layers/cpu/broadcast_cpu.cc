// multiply and broadcast_add on the CPU. Each image and channel is one plane;
// a spread input contributes one value to the whole plane, and its gradient
// is the plane's sum (in double, in element order).
#include "framework/graph/layer_registry.h"
#include "layers/broadcast_layers.h"

namespace spill {
namespace {

class CpuBroadcastLayer : public BroadcastLayer {
 public:
  using BroadcastLayer::BroadcastLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& out = args.outputs[0].shape();
    const int64_t planes = out.n() * out.c(), plane = out.h() * out.w();
    const float* a = args.inputs[0].data();
    const float* b = args.inputs[1].data();
    float* y = args.outputs[0].data();
    const int64_t sa = spread_[0] ? 1 : plane, sb = spread_[1] ? 1 : plane;
    const int64_t ia = spread_[0] ? 0 : 1, ib = spread_[1] ? 0 : 1;
    const bool multiply = multiply_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const float* pa = a + p * sa;
      const float* pb = b + p * sb;
      float* py = y + p * plane;
      for (int64_t j = 0; j < plane; ++j) {
        py[j] = multiply ? pa[j * ia] * pb[j * ib] : pa[j * ia] + pb[j * ib];
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    for (int i = 0; i < 2; ++i) {
      if (args.input_grads[i].valid()) InputGradient(args, i);
    }
  }

 private:
  // The gradient of input i: dy times the other input (multiply) or dy,
  // summed over the plane when input i is spread.
  void InputGradient(const BackwardArgs& args, int i) const {
    const Shape& out = args.output_grads[0].shape();
    const int64_t planes = out.n() * out.c(), plane = out.h() * out.w();
    const float* dy = args.output_grads[0].data();
    const float* other = multiply_ ? args.inputs[1 - i].data() : nullptr;
    const int64_t so = spread_[1 - i] ? 1 : plane, io = spread_[1 - i] ? 0 : 1;
    float* dx = args.input_grads[i].data();
    const bool accumulate = args.accumulate[i], spread = spread_[i];
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const float* g = dy + p * plane;
      const float* po = other != nullptr ? other + p * so : nullptr;
      if (spread) {
        double sum = 0;
        for (int64_t j = 0; j < plane; ++j) sum += po != nullptr ? g[j] * po[j * io] : g[j];
        dx[p] = accumulate ? dx[p] + static_cast<float>(sum) : static_cast<float>(sum);
        continue;
      }
      float* d = dx + p * plane;
      for (int64_t j = 0; j < plane; ++j) {
        const float v = po != nullptr ? g[j] * po[j * io] : g[j];
        d[j] = accumulate ? d[j] + v : v;
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(multiply, kCpu, CpuBroadcastLayer);
SPILL_REGISTER_LAYER(broadcast_add, kCpu, CpuBroadcastLayer);

}  // namespace spill
