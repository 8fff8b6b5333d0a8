// layer_norm and scale on the CPU. Per-pixel statistics and per-channel
// parameter gradients are summed in double in a fixed order; the parameter
// gradients add image by image into sums carried from slice to slice, so a
// step over slices of the batch gives the bits of the whole batch. Layer norm
// reads and writes 16-bit tensors as they are (layers/cpu/typed_elements.h):
// the bits of float32 copies.
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/cpu/typed_elements.h"
#include "layers/layer_norm_math.h"
#include "layers/norm_layers.h"

namespace spill {
namespace {

// dgamma[k] = the sum of dy * xhat(e, pixel), dbeta[k] the sum of dy, over
// channel k's values e (pixel: the image's pixel index), image by image in
// double from the slice's carried sums (2c: gamma's, then beta's), which
// then hold the new sums. Null gradients are not written.
template <typename E, typename Xhat>
void AffineParamGradients(int64_t n, int64_t c, int64_t plane, const typename E::T* dy, Xhat xhat,
                          double* sums, float* dgamma, float* dbeta) {
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < c; ++k) {
    double sum_gamma = sums[k], sum_beta = sums[c + k];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t base = (i * c + k) * plane;
      for (int64_t q = 0; q < plane; ++q) {
        const float d = E::Load(dy[base + q]);
        sum_gamma += d * xhat(base + q, i * plane + q);
        sum_beta += d;
      }
    }
    sums[k] = sum_gamma;
    sums[c + k] = sum_beta;
    if (dgamma != nullptr) dgamma[k] = static_cast<float>(sum_gamma);
    if (dbeta != nullptr) dbeta[k] = static_cast<float>(sum_beta);
  }
}

class CpuLayerNormLayer : public LayerNormLayer {
 public:
  using LayerNormLayer::LayerNormLayer;

  bool supports_slices() const override { return true; }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward ? 2 * static_cast<size_t>(shape_.c()) : 0;
  }

  // x and y (so dx and dy) of one type; otherwise float32 copies.
  bool computes_16_bit(Pass) const override { return input_dtype(0) == output_dtype(0); }

  void Forward(const ForwardArgs& args) const override {
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) { ForwardAs<decltype(e)>(args); });
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t pixels = s.n() * s.h() * s.w();
    PixelStats* stats = static_cast<PixelStats*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= static_cast<size_t>(pixels) * sizeof(PixelStats));
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) {
      using E = decltype(e);
      InputGradient<E>(args, stats);
      if (args.param_grads[0].valid() || args.param_grads[1].valid()) {
        ParamGradients<E>(args, stats);
      }
    });
  }

 private:
  template <typename E>
  void ForwardAs(const ForwardArgs& args) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    const float* gamma = args.params[0].data();
    const float* beta = args.params[1].data();
    auto* y = cpu::ElementsOf<E>(args.outputs[0]);
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < s.n() * plane; ++p) {
      const int64_t offset = (p / plane) * c * plane + p % plane;
      LayerNormPixel<E>(x + offset, gamma, beta, c, plane, eps, y + offset);
    }
  }

  // Fills `stats` and, where wanted, dx = inv_std * (g - mean(g) - xhat *
  // mean(g * xhat)) with g = dy * gamma, means over the pixel's channels.
  template <typename E>
  void InputGradient(const BackwardArgs& args, PixelStats* stats) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    const auto* dy = cpu::ElementsOf<E>(args.output_grads[0]);
    const float* gamma = args.params[0].data();
    auto* dx = args.input_grads[0].valid() ? cpu::ElementsOf<E>(args.input_grads[0]) : nullptr;
    const bool accumulate = args.accumulate[0];
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < s.n() * plane; ++p) {
      const int64_t offset = (p / plane) * c * plane + p % plane;
      const PixelStats st = PixelStatistics<E>(x + offset, c, plane, eps);
      stats[p] = st;
      if (dx != nullptr) {
        LayerNormPixelGrad<E>(x + offset, dy + offset, gamma, c, plane, st, dx + offset,
                              accumulate);
      }
    }
  }

  // dgamma = sum dy * xhat, dbeta = sum dy, per channel over the pixels.
  template <typename E>
  void ParamGradients(const BackwardArgs& args, const PixelStats* stats) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    const auto* dy = cpu::ElementsOf<E>(args.output_grads[0]);
    std::vector<double> local;
    double* sums = SliceSums(args.slice, 2 * c, &local);
    float* dgamma = args.param_grads[0].valid() ? args.param_grads[0].data() : nullptr;
    float* dbeta = args.param_grads[1].valid() ? args.param_grads[1].data() : nullptr;
    AffineParamGradients<E>(
        s.n(), c, plane, dy,
        [x, stats](int64_t e, int64_t pixel) { return Normalized(E::Load(x[e]), stats[pixel]); },
        sums, dgamma, dbeta);
  }
};

class CpuScaleLayer : public ScaleLayer {
 public:
  using ScaleLayer::ScaleLayer;

  bool supports_slices() const override { return true; }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward ? 2 * static_cast<size_t>(channels_) : 0;
  }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    const float* gamma = args.params[0].data();
    const float* beta = bias_ ? args.params[1].data() : nullptr;
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < s.n() * c; ++p) {
      const int64_t k = p % c;
      for (int64_t q = 0; q < plane; ++q) {
        const float v = x[p * plane + q] * gamma[k];
        y[p * plane + q] = beta != nullptr ? v + beta[k] : v;
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    const float* gamma = args.params[0].data();
    if (args.input_grads[0].valid()) {
      float* dx = args.input_grads[0].data();
      const bool accumulate = args.accumulate[0];
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < s.n() * c; ++p) {
        for (int64_t q = 0; q < plane; ++q) {
          const float v = dy[p * plane + q] * gamma[p % c];
          dx[p * plane + q] = accumulate ? dx[p * plane + q] + v : v;
        }
      }
    }
    std::vector<double> local;
    double* sums = SliceSums(args.slice, 2 * c, &local);
    float* dgamma = args.param_grads[0].valid() ? args.param_grads[0].data() : nullptr;
    float* dbeta = bias_ && args.param_grads[1].valid() ? args.param_grads[1].data() : nullptr;
    AffineParamGradients<cpu::Float32Elements>(
        s.n(), c, plane, dy, [x](int64_t e, int64_t) { return x[e]; }, sums, dgamma, dbeta);
  }
};

}  // namespace

SPILL_REGISTER_LAYER(layer_norm, kCpu, CpuLayerNormLayer);
SPILL_REGISTER_LAYER(scale, kCpu, CpuScaleLayer);

}  // namespace spill
