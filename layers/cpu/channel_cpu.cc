// channel_shuffle and slice on the CPU: plane copies.
#include "framework/graph/layer_registry.h"
#include "layers/channel_layers.h"
#include "layers/cpu/cpu_math.h"

namespace spill {
namespace {

class CpuChannelShuffleLayer : public ChannelShuffleLayer {
 public:
  using ChannelShuffleLayer::ChannelShuffleLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    Shuffle(args.inputs[0].data(), args.outputs[0].data(), args.inputs[0].shape(), false, false);
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    Shuffle(args.output_grads[0].data(), args.input_grads[0].data(), args.output_grads[0].shape(),
            true, args.accumulate[0]);
  }

 private:
  // Forward moves input channel i * per + j to output channel j * groups + i;
  // `inverse` moves it back.
  void Shuffle(const float* from, float* to, const Shape& s, bool inverse, bool accumulate) const {
    const int64_t c = s.c(), plane = s.h() * s.w(), groups = groups_, per = c / groups;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < s.n() * c; ++p) {
      const int64_t n = p / c, src = p % c;  // forward: src = i * per + j
      const int64_t dst = (src % per) * groups + src / per;
      const int64_t a = inverse ? dst : src, b = inverse ? src : dst;
      cpu::CopyOrAdd(from + (n * c + a) * plane, to + (n * c + b) * plane, plane, accumulate);
    }
  }
};

class CpuSliceLayer : public SliceLayer {
 public:
  using SliceLayer::SliceLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& out = args.outputs[0].shape();
    const int64_t block = out.c() * out.h() * out.w(), plane = out.h() * out.w();
    for (int64_t n = 0; n < out.n(); ++n) {
      cpu::CopyOrAdd(args.inputs[0].data() + (n * channels_ + begin_) * plane,
                     args.outputs[0].data() + n * block, block, false);
    }
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const Shape& out = args.output_grads[0].shape();
    const int64_t plane = out.h() * out.w(), block = out.c() * plane;
    const bool accumulate = args.accumulate[0];
    for (int64_t n = 0; n < out.n(); ++n) {
      float* image = args.input_grads[0].data() + n * channels_ * plane;
      if (!accumulate) {
        cpu::Fill(image, begin_ * plane, 0.0f);
        cpu::Fill(image + end_ * plane, (channels_ - end_) * plane, 0.0f);
      }
      cpu::CopyOrAdd(args.output_grads[0].data() + n * block, image + begin_ * plane, block,
                     accumulate);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(channel_shuffle, kCpu, CpuChannelShuffleLayer);
SPILL_REGISTER_LAYER(slice, kCpu, CpuSliceLayer);

}  // namespace spill
