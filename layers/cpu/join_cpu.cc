#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/cpu/cpu_math.h"
#include "layers/cpu/typed_blocks.h"
#include "layers/join_layers.h"

namespace spill {
namespace {

class CpuConcatLayer : public ConcatLayer {
 public:
  using ConcatLayer::ConcatLayer;

  // A blocked tensor's channels fill whole blocks, so each image's channels
  // from one input are one contiguous run in the plain and the blocked
  // layout; in channels-last, each pixel's are.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  // Any element type: values are copied as they are, added in float32.
  bool computes_16_bit(Pass) const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Tensor& y = args.outputs[0];
    const Rows rows(y);
#pragma omp parallel for schedule(static) if (rows.count > 64)
    for (int64_t r = 0; r < rows.count; ++r) {
      int64_t channel = 0;
      for (const Tensor& in : args.inputs) {
        const int64_t count = in.shape().c() * rows.pixels;
        cpu::CopyOrAdd(Run(in, r * count, count),
                       Run(y, (r * y.shape().c() + channel) * rows.pixels, count), false);
        channel += in.shape().c();
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Tensor& dy = args.output_grads[0];
    const Rows rows(dy);
#pragma omp parallel for schedule(static) if (rows.count > 64)
    for (int64_t r = 0; r < rows.count; ++r) {
      int64_t channel = 0;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        const int64_t count = inputs_[i].c() * rows.pixels;
        const Tensor& dx = args.input_grads[i];
        if (dx.valid()) {
          cpu::CopyOrAdd(Run(dy, (r * dy.shape().c() + channel) * rows.pixels, count),
                         Run(dx, r * count, count), args.accumulate[i]);
        }
        channel += inputs_[i].c();
      }
    }
  }

 private:
  // The runs that hold each input's channels whole: an image of planes
  // (plain, blocked) or a pixel (channels-last); `pixels` per channel.
  struct Rows {
    explicit Rows(const Tensor& t)
        : count(t.shape().n() *
                (t.layout() == Layout::kChannelsLast ? t.shape().h() * t.shape().w() : 1)),
          pixels(t.layout() == Layout::kChannelsLast ? 1 : t.shape().h() * t.shape().w()) {}
    int64_t count, pixels;
  };

  // `count` elements of `t` from element `begin`, as a tensor of their own.
  static Tensor Run(const Tensor& t, int64_t begin, int64_t count) {
    char* data = static_cast<char*>(t.raw()) + begin * static_cast<int64_t>(DTypeSize(t.dtype()));
    return Tensor(Shape(1, count, 1, 1), data, t.dtype(), Layout::kPlain);
  }
};

class CpuAddLayer : public AddLayer {
 public:
  using AddLayer::AddLayer;

  // Elementwise: the same in any layout.
  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  bool supports_slices() const override { return true; }

  // Any element type (layers/cpu/typed_blocks.h).
  bool computes_16_bit(Pass) const override { return true; }

  // The first input, the branch, enters with its weight (BranchWeight): left
  // out at 0; below 1 scaled first (w * branch + in1 + in2 ..., ONNX's Mul
  // then Adds); the inputs are summed in order.
  void Forward(const ForwardArgs& args) const override {
    const float weight = BranchWeight(args.phase, args.seed);
    std::vector<cpu::BlockOperand> operands;
    for (const Tensor& in : args.inputs) operands.push_back({&in, true, false});
    operands.push_back({&args.outputs[0], false, true});
    const size_t inputs = args.inputs.size();
    cpu::ForEachFloatBlock(operands, args.outputs[0].numel(), [&](int64_t n, float* const* f) {
      float* y = f[inputs];
      size_t next = 1;
      if (weight == 0) {
        std::copy_n(f[1], n, y);
        next = 2;
      } else if (weight == 1) {
        std::copy_n(f[0], n, y);
      } else {
        for (int64_t j = 0; j < n; ++j) y[j] = weight * f[0][j];
      }
      for (size_t i = next; i < inputs; ++i) {
        for (int64_t j = 0; j < n; ++j) y[j] += f[i][j];
      }
    });
  }

  // A dropped branch gets a zero gradient (Layer::DroppedInput).
  void Backward(const BackwardArgs& args) const override {
    for (size_t i = 0; i < args.input_grads.size(); ++i) {
      const Tensor& dx = args.input_grads[i];
      if (!dx.valid() || dx.raw() == args.output_grads[0].raw()) continue;  // shared, in place
      const bool accumulate = args.accumulate[i];
      if (static_cast<int>(i) == args.dropped_input) {
        if (!accumulate) cpu::Zero(dx);
        continue;
      }
      cpu::CopyOrAdd(args.output_grads[0], dx, accumulate);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(concat, kCpu, CpuConcatLayer);
SPILL_REGISTER_LAYER(add, kCpu, CpuAddLayer);

}  // namespace spill
