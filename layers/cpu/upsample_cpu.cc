// upsample on the CPU. Nearest: each output copies input (o / factor).
// Bilinear: each output weighs two rows and two columns (BilinearTap); its
// backward adds each output gradient back into them, plane by plane in
// output order, so the sums are deterministic.
#include <algorithm>
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/upsample_layer.h"

namespace spill {
namespace {

class CpuUpsampleLayer : public UpsampleLayer {
 public:
  using UpsampleLayer::UpsampleLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& in = args.inputs[0].shape();
    const Shape& out = args.outputs[0].shape();
    const std::vector<LinearTap> rows = Taps(in.h(), out.h(), 0);
    const std::vector<LinearTap> cols = Taps(in.w(), out.w(), 1);
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t in_plane = in.h() * in.w(), out_plane = out.h() * out.w();
    const bool bilinear = bilinear_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < in.n() * in.c(); ++p) {
      const float* src = x + p * in_plane;
      float* dst = y + p * out_plane;
      for (int64_t oh = 0; oh < out.h(); ++oh) {
        const LinearTap& r = rows[oh];
        const float* top = src + r.i0 * in.w();
        const float* bottom = src + r.i1 * in.w();
        for (int64_t ow = 0; ow < out.w(); ++ow) {
          const LinearTap& c = cols[ow];
          if (!bilinear) {
            dst[oh * out.w() + ow] = top[c.i0];
            continue;
          }
          dst[oh * out.w() + ow] = r.w0 * (c.w0 * top[c.i0] + c.w1 * top[c.i1]) +
                                   r.w1 * (c.w0 * bottom[c.i0] + c.w1 * bottom[c.i1]);
        }
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const Shape& in = args.input_grads[0].shape();
    const Shape& out = args.output_grads[0].shape();
    const std::vector<LinearTap> rows = Taps(in.h(), out.h(), 0);
    const std::vector<LinearTap> cols = Taps(in.w(), out.w(), 1);
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const int64_t in_plane = in.h() * in.w(), out_plane = out.h() * out.w();
    const bool bilinear = bilinear_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < in.n() * in.c(); ++p) {
      float* grad = dx + p * in_plane;
      if (!accumulate) std::fill_n(grad, in_plane, 0.0f);
      const float* g = dy + p * out_plane;
      for (int64_t oh = 0; oh < out.h(); ++oh) {
        const LinearTap& r = rows[oh];
        float* top = grad + r.i0 * in.w();
        float* bottom = grad + r.i1 * in.w();
        for (int64_t ow = 0; ow < out.w(); ++ow) {
          const LinearTap& c = cols[ow];
          const float v = g[oh * out.w() + ow];
          if (!bilinear) {
            top[c.i0] += v;
            continue;
          }
          top[c.i0] += r.w0 * c.w0 * v;
          top[c.i1] += r.w0 * c.w1 * v;
          bottom[c.i0] += r.w1 * c.w0 * v;
          bottom[c.i1] += r.w1 * c.w1 * v;
        }
      }
    }
  }

 private:
  // The taps of every output coordinate along one axis; nearest sampling is
  // a tap of weight 1 on input o / factor.
  std::vector<LinearTap> Taps(int64_t in, int64_t out, int axis) const {
    std::vector<LinearTap> taps(out);
    for (int64_t o = 0; o < out; ++o) {
      if (bilinear_) {
        taps[o] = BilinearTap(o, in, out, align_corners_);
      } else {
        taps[o].i0 = taps[o].i1 = o / factor_[axis];
      }
    }
    return taps;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(upsample, kCpu, CpuUpsampleLayer);

}  // namespace spill
