// Convolution on the CPU: im2col per image, then one GEMM per group.
#include <cstring>

#include "framework/layer_registry.h"
#include "layers/convolution_layer.h"
#include "layers/cpu/cpu_math.h"
#include "layers/cpu/im2col.h"

namespace spill {
namespace {

class CpuConvolutionLayer : public ConvolutionLayer {
 public:
  using ConvolutionLayer::ConvolutionLayer;

  // One image's column matrix; none for pointwise convolutions.
  size_t workspace_bytes(Pass) const override {
    if (cpu::IsPointwise(geom_)) return 0;
    return static_cast<size_t>(geom_.channels * geom_.kernel[0] * geom_.kernel[1] *
                               geom_.out_plane()) * sizeof(float);
  }

  void Forward(const ForwardArgs& args) override {
    const ConvGeometry& g = geom_;
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const float* w = args.params[0].data();
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), plane = g.out_plane();
    float* col = static_cast<float*>(args.workspace.data);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* image = x + n * g.channels * g.in_plane();
      const float* columns = image;
      if (!cpu::IsPointwise(g)) {
        cpu::Im2Col(image, g, col);
        columns = col;
      }
      float* out = y + n * g.filters * plane;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        cpu::Gemm(false, false, fg, plane, k, 1.0f, w + grp * fg * k, k, columns + grp * k * plane,
                  plane, 0.0f, out + grp * fg * plane, plane);
      }
      if (bias_) AddBias(args.params[1].data(), out);
    }
  }

  void Backward(const BackwardArgs& args) override {
    const Tensor& dw = args.param_grads[0];
    if (dw.valid()) WeightGradient(args);
    if (bias_ && args.param_grads[1].valid()) BiasGradient(args);
    if (args.input_grads[0].valid()) InputGradient(args);
  }

 private:
  void AddBias(const float* bias, float* out) const {
    const int64_t plane = geom_.out_plane();
#pragma omp parallel for schedule(static)
    for (int64_t f = 0; f < geom_.filters; ++f) {
      float* p = out + f * plane;
      for (int64_t i = 0; i < plane; ++i) p[i] += bias[f];
    }
  }

  void WeightGradient(const BackwardArgs& args) const {
    const ConvGeometry& g = geom_;
    const float* x = args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    float* dw = args.param_grads[0].data();
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), plane = g.out_plane();
    float* col = static_cast<float*>(args.workspace.data);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* image = x + n * g.channels * g.in_plane();
      const float* columns = image;
      if (!cpu::IsPointwise(g)) {
        cpu::Im2Col(image, g, col);
        columns = col;
      }
      const float* grad = dy + n * g.filters * plane;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        cpu::Gemm(false, true, fg, k, plane, 1.0f, grad + grp * fg * plane, plane,
                  columns + grp * k * plane, plane, n == 0 ? 0.0f : 1.0f, dw + grp * fg * k, k);
      }
    }
  }

  void BiasGradient(const BackwardArgs& args) const {
    const ConvGeometry& g = geom_;
    const float* dy = args.output_grads[0].data();
    float* db = args.param_grads[1].data();
    const int64_t plane = g.out_plane();
#pragma omp parallel for schedule(static)
    for (int64_t f = 0; f < g.filters; ++f) {
      double sum = 0;
      for (int64_t n = 0; n < g.batch; ++n) {
        const float* p = dy + (n * g.filters + f) * plane;
        for (int64_t i = 0; i < plane; ++i) sum += p[i];
      }
      db[f] = static_cast<float>(sum);
    }
  }

  void InputGradient(const BackwardArgs& args) const {
    const ConvGeometry& g = geom_;
    const float* dy = args.output_grads[0].data();
    const float* w = args.params[0].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), plane = g.out_plane();
    const int64_t image_size = g.channels * g.in_plane();
    float* col = static_cast<float*>(args.workspace.data);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* grad = dy + n * g.filters * plane;
      float* image = dx + n * image_size;
      if (cpu::IsPointwise(g)) {
        for (int64_t grp = 0; grp < g.groups; ++grp) {
          cpu::Gemm(true, false, k, plane, fg, 1.0f, w + grp * fg * k, k, grad + grp * fg * plane,
                    plane, accumulate ? 1.0f : 0.0f, image + grp * k * plane, plane);
        }
        continue;
      }
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        cpu::Gemm(true, false, k, plane, fg, 1.0f, w + grp * fg * k, k, grad + grp * fg * plane,
                  plane, 0.0f, col + grp * k * plane, plane);
      }
      if (!accumulate) cpu::Fill(image, image_size, 0.0f);
      cpu::Col2ImAdd(col, g, image);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(convolution, kCpu, CpuConvolutionLayer);

}  // namespace spill
