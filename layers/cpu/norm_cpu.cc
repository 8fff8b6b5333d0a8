// layer_norm and scale on the CPU. Per-pixel statistics and per-channel
// parameter gradients are summed in double in a fixed order; the parameter
// gradients add image by image into sums carried from slice to slice, so a
// step over slices of the batch gives the bits of the whole batch.
#include <cmath>
#include <vector>

#include "framework/layer_registry.h"
#include "layers/norm_layers.h"

namespace spill {
namespace {

struct PixelStats {
  double mean = 0, inv_std = 0;
};

// The statistics of the C values at `x`, `stride` apart.
PixelStats Statistics(const float* x, int64_t c, int64_t stride, double eps) {
  double sum = 0;
  for (int64_t k = 0; k < c; ++k) sum += x[k * stride];
  const double mean = sum / static_cast<double>(c);
  double squares = 0;
  for (int64_t k = 0; k < c; ++k) {
    const double d = x[k * stride] - mean;
    squares += d * d;
  }
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(c) + eps)};
}

inline float Normalized(float x, const PixelStats& s) {
  return static_cast<float>((x - s.mean) * s.inv_std);
}

class CpuLayerNormLayer : public LayerNormLayer {
 public:
  using LayerNormLayer::LayerNormLayer;

  bool supports_slices() const override { return true; }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward ? 2 * static_cast<size_t>(shape_.c()) : 0;
  }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    const float* gamma = args.params[0].data();
    const float* beta = args.params[1].data();
    float* y = args.outputs[0].data();
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < s.n() * plane; ++p) {
      const int64_t offset = (p / plane) * c * plane + p % plane;
      const PixelStats st = Statistics(x + offset, c, plane, eps);
      for (int64_t k = 0; k < c; ++k) {
        const int64_t i = offset + k * plane;
        y[i] = Normalized(x[i], st) * gamma[k] + beta[k];
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t pixels = s.n() * s.h() * s.w();
    PixelStats* stats = static_cast<PixelStats*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= static_cast<size_t>(pixels) * sizeof(PixelStats));
    InputGradient(args, stats);
    if (args.param_grads[0].valid() || args.param_grads[1].valid()) ParamGradients(args, stats);
  }

 private:
  // Fills `stats` and, where wanted, dx = inv_std * (g - mean(g) - xhat *
  // mean(g * xhat)) with g = dy * gamma, means over the pixel's channels.
  void InputGradient(const BackwardArgs& args, PixelStats* stats) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    const float* gamma = args.params[0].data();
    float* dx = args.input_grads[0].valid() ? args.input_grads[0].data() : nullptr;
    const bool accumulate = args.accumulate[0];
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < s.n() * plane; ++p) {
      const int64_t offset = (p / plane) * c * plane + p % plane;
      const PixelStats st = Statistics(x + offset, c, plane, eps);
      stats[p] = st;
      if (dx == nullptr) continue;
      double sum_g = 0, sum_gx = 0;
      for (int64_t k = 0; k < c; ++k) {
        const int64_t i = offset + k * plane;
        const float g = dy[i] * gamma[k];
        sum_g += g;
        sum_gx += static_cast<double>(g) * Normalized(x[i], st);
      }
      const double mean_g = sum_g / static_cast<double>(c);
      const double mean_gx = sum_gx / static_cast<double>(c);
      for (int64_t k = 0; k < c; ++k) {
        const int64_t i = offset + k * plane;
        const float g = dy[i] * gamma[k];
        const float v =
            static_cast<float>(st.inv_std * (g - mean_g - Normalized(x[i], st) * mean_gx));
        dx[i] = accumulate ? dx[i] + v : v;
      }
    }
  }

  // dgamma = sum dy * xhat, dbeta = sum dy, per channel over the pixels.
  void ParamGradients(const BackwardArgs& args, const PixelStats* stats) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    std::vector<double> local;
    double* sums = SliceSums(args.slice, 2 * c, &local);
    float* dgamma = args.param_grads[0].valid() ? args.param_grads[0].data() : nullptr;
    float* dbeta = args.param_grads[1].valid() ? args.param_grads[1].data() : nullptr;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < c; ++k) {
      double sum_gamma = sums[k], sum_beta = sums[c + k];
      for (int64_t n = 0; n < s.n(); ++n) {
        const int64_t base = (n * c + k) * plane;
        for (int64_t q = 0; q < plane; ++q) {
          sum_gamma += dy[base + q] * Normalized(x[base + q], stats[n * plane + q]);
          sum_beta += dy[base + q];
        }
      }
      sums[k] = sum_gamma;
      sums[c + k] = sum_beta;
      if (dgamma != nullptr) dgamma[k] = static_cast<float>(sum_gamma);
      if (dbeta != nullptr) dbeta[k] = static_cast<float>(sum_beta);
    }
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
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < c; ++k) {
      double sum_gamma = sums[k], sum_beta = sums[c + k];
      for (int64_t n = 0; n < s.n(); ++n) {
        const int64_t base = (n * c + k) * plane;
        for (int64_t q = 0; q < plane; ++q) {
          sum_gamma += dy[base + q] * x[base + q];
          sum_beta += dy[base + q];
        }
      }
      sums[k] = sum_gamma;
      sums[c + k] = sum_beta;
      if (dgamma != nullptr) dgamma[k] = static_cast<float>(sum_gamma);
      if (dbeta != nullptr) dbeta[k] = static_cast<float>(sum_beta);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(layer_norm, kCpu, CpuLayerNormLayer);
SPILL_REGISTER_LAYER(scale, kCpu, CpuScaleLayer);

}  // namespace spill
