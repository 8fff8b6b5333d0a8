// pad on the CPU: row copies into the border, and back for the gradient.
// Negative amounts crop: only the input rows and columns that land inside
// the output are copied (forward) or read back (backward).
#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/pad_layer.h"

namespace spill {
namespace {

// The input indices [begin, end) of one axis that land inside an output of
// `out` along it, when `before` is that axis's leading amount.
struct Span {
  int64_t begin, end;
};
Span Inside(int64_t in, int64_t out, int64_t before) {
  const int64_t begin = std::max<int64_t>(0, -before);
  return {begin, std::max(begin, std::min(in, out - before))};
}

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
    const Span rows = Inside(in.h(), out.h(), pad_[0]), cols = Inside(in.w(), out.w(), pad_[1]);
    // A pure crop covers every output position with the copies below.
    const bool border = *std::max_element(pad_.begin(), pad_.end()) > 0;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < in.n() * in.c(); ++p) {
      float* plane = y + p * out.h() * out.w();
      if (border) std::fill_n(plane, out.h() * out.w(), value);
      for (int64_t h = rows.begin; h < rows.end; ++h) {
        std::copy_n(x + (p * in.h() + h) * in.w() + cols.begin, cols.end - cols.begin,
                    plane + (h + pad_[0]) * out.w() + cols.begin + pad_[1]);
      }
    }
  }

  // Cropped input positions get a zero gradient (nothing, when adding).
  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const Shape& in = args.input_grads[0].shape();
    const Shape& out = args.output_grads[0].shape();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const Span rows = Inside(in.h(), out.h(), pad_[0]), cols = Inside(in.w(), out.w(), pad_[1]);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < in.n() * in.c(); ++p) {
      for (int64_t h = 0; h < in.h(); ++h) {
        float* dst = dx + (p * in.h() + h) * in.w();
        if (h < rows.begin || h >= rows.end) {
          if (!accumulate) std::fill_n(dst, in.w(), 0.0f);
          continue;
        }
        const float* src = dy + (p * out.h() + h + pad_[0]) * out.w();
        if (!accumulate) {
          std::fill(dst, dst + cols.begin, 0.0f);
          std::fill(dst + cols.end, dst + in.w(), 0.0f);
        }
        for (int64_t w = cols.begin; w < cols.end; ++w) {
          const float g = src[w + pad_[1]];
          dst[w] = accumulate ? dst[w] + g : g;
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(pad, kCpu, CpuPadLayer);

}  // namespace spill
