// LRN on the CPU. Each image is one task; the channel window sum slides along
// the channels of each pixel. The workspace holds one image's scale (and, in
// backward, one image's dy * y / scale).
#include <cmath>

#include "framework/graph/layer_registry.h"
#include "layers/lrn_layer.h"

namespace spill {
namespace {

class CpuLrnLayer : public LrnLayer {
 public:
  using LrnLayer::LrnLayer;

  bool supports_slices() const override { return true; }

  size_t workspace_bytes(Pass pass) const override {
    return static_cast<size_t>(shape_.sample_size()) * sizeof(float) *
           (pass == Pass::kForward ? 1 : 2);
  }

  void Forward(const ForwardArgs& args) const override {
    const int64_t image = shape_.sample_size(), images = args.inputs[0].shape().n();
    float* scale = static_cast<float*>(args.workspace.data);
    for (int64_t n = 0; n < images; ++n) {
      const float* x = args.inputs[0].data() + n * image;
      float* y = args.outputs[0].data() + n * image;
      Scale(x, scale);
      const int64_t count = image;
      const float neg_beta = static_cast<float>(-beta_);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < count; ++i) y[i] = x[i] * std::pow(scale[i], neg_beta);
    }
  }

  // dx = dy * scale^-beta - 2 alpha beta / size * x * sum_window(dy * y / scale)
  void Backward(const BackwardArgs& args) const override {
    const int64_t image = shape_.sample_size(), plane = shape_.h() * shape_.w(), c = shape_.c();
    const int64_t images = args.output_grads[0].shape().n();
    float* scale = static_cast<float*>(args.workspace.data);
    float* ratio = scale + image;
    const float coeff = static_cast<float>(2.0 * alpha_ * beta_ / size_);
    const float neg_beta = static_cast<float>(-beta_);
    const bool accumulate = args.accumulate[0];
    for (int64_t n = 0; n < images; ++n) {
      const float* x = args.inputs[0].data() + n * image;
      const float* y = args.outputs[0].data() + n * image;
      const float* dy = args.output_grads[0].data() + n * image;
      float* dx = args.input_grads[0].data() + n * image;
      Scale(x, scale);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < image; ++i) ratio[i] = dy[i] * y[i] / scale[i];
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < plane; ++p) {
        const int64_t half = (size_ - 1) / 2;
        // Window sum over channels [ch - half, ch + half], sliding along ch.
        double window = 0;
        for (int64_t j = 0; j < std::min<int64_t>(half, c); ++j) window += ratio[j * plane + p];
        for (int64_t ch = 0; ch < c; ++ch) {
          if (ch + half < c) window += ratio[(ch + half) * plane + p];
          if (ch - half - 1 >= 0) window -= ratio[(ch - half - 1) * plane + p];
          const int64_t i = ch * plane + p;
          const float v =
              dy[i] * std::pow(scale[i], neg_beta) - coeff * x[i] * static_cast<float>(window);
          dx[i] = accumulate ? dx[i] + v : v;
        }
      }
    }
  }

 private:
  // scale[i] = k + alpha / size * sum of x^2 over the channel window.
  void Scale(const float* x, float* scale) const {
    const int64_t plane = shape_.h() * shape_.w(), c = shape_.c(), half = (size_ - 1) / 2;
    const double a = alpha_ / size_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t ch = 0; ch < c; ++ch) {
        double sum = 0;
        const int64_t lo = std::max<int64_t>(0, ch - half),
                      hi = std::min<int64_t>(c - 1, ch + half);
        for (int64_t j = lo; j <= hi; ++j) {
          const double v = x[j * plane + p];
          sum += v * v;
        }
        scale[ch * plane + p] = static_cast<float>(k_ + a * sum);
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(lrn, kCpu, CpuLrnLayer);

}  // namespace spill
