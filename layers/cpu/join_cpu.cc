#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/cpu/cpu_math.h"
#include "layers/join_layers.h"

namespace spill {
namespace {

class CpuConcatLayer : public ConcatLayer {
 public:
  using ConcatLayer::ConcatLayer;

  // A blocked tensor's channels fill whole blocks, so each image's channels
  // from one input are one contiguous run in either layout.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& out = args.outputs[0].shape();
    const int64_t plane = out.h() * out.w();
    for (int64_t n = 0; n < out.n(); ++n) {
      int64_t channel = 0;
      for (const Tensor& in : args.inputs) {
        const int64_t count = in.shape().c() * plane;
        cpu::CopyOrAdd(in.data() + n * count,
                       args.outputs[0].data() + (n * out.c() + channel) * plane, count, false);
        channel += in.shape().c();
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& out = args.output_grads[0].shape();
    const int64_t plane = out.h() * out.w();
    for (int64_t n = 0; n < out.n(); ++n) {
      int64_t channel = 0;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        const int64_t count = inputs_[i].c() * plane;
        if (args.input_grads[i].valid()) {
          cpu::CopyOrAdd(args.output_grads[0].data() + (n * out.c() + channel) * plane,
                         args.input_grads[i].data() + n * count, count, args.accumulate[i]);
        }
        channel += inputs_[i].c();
      }
    }
  }
};

class CpuAddLayer : public AddLayer {
 public:
  using AddLayer::AddLayer;

  // Elementwise: the same in any layout.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  // The first input, the branch, enters with its weight (BranchWeight): left
  // out at 0; below 1 scaled first (w * branch + in1 + in2 ..., ONNX's Mul
  // then Adds); the inputs are summed in order.
  void Forward(const ForwardArgs& args) const override {
    float* y = args.outputs[0].data();
    const int64_t n = args.outputs[0].numel();
    const float weight = BranchWeight(args.phase, args.seed);
    size_t next = 1;
    if (weight == 0) {
      cpu::CopyOrAdd(args.inputs[1].data(), y, n, false);
      next = 2;
    } else if (weight == 1) {
      cpu::CopyOrAdd(args.inputs[0].data(), y, n, false);
    } else {
      const float* branch = args.inputs[0].data();
      for (int64_t j = 0; j < n; ++j) y[j] = weight * branch[j];
    }
    for (size_t i = next; i < args.inputs.size(); ++i) cpu::Add(args.inputs[i].data(), y, n);
  }

  // A dropped branch gets a zero gradient (Layer::DroppedInput).
  void Backward(const BackwardArgs& args) const override {
    const int64_t n = args.output_grads[0].numel();
    for (size_t i = 0; i < args.input_grads.size(); ++i) {
      if (!args.input_grads[i].valid()) continue;
      if (static_cast<int>(i) == args.dropped_input) {
        if (!args.accumulate[i]) std::fill_n(args.input_grads[i].data(), n, 0.0f);
        continue;
      }
      cpu::CopyOrAdd(args.output_grads[0].data(), args.input_grads[i].data(), n,
                     args.accumulate[i]);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(concat, kCpu, CpuConcatLayer);
SPILL_REGISTER_LAYER(add, kCpu, CpuAddLayer);

}  // namespace spill
