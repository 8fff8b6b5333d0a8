// BatchNorm on the CPU. Channels are spread over threads; each channel's
// statistics are reduced by one thread in a fixed order - plane by plane in
// float, planes combined in double - so results are deterministic.
#include <cmath>

#include "framework/layer_registry.h"
#include "layers/batch_norm_layer.h"

namespace spill {
namespace {

// Sum of one plane, in float lanes the compiler vectorizes.
inline float PlaneSum(const float* p, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += p[j];
  return s;
}

inline float PlaneSquares(const float* p, int64_t n, float mean) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += (p[j] - mean) * (p[j] - mean);
  return s;
}

class CpuBatchNormLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const float* gamma = args.params[0].data();
    const float* beta = args.params[1].data();
    float* running_mean = args.params[2].data();
    float* running_var = args.params[3].data();
    float* mean = args.aux[0].data();
    float* inv_std = args.aux[1].data();
    const bool train = args.phase == Phase::kTrain;
    const double count = static_cast<double>(n * plane);
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      if (train && !args.recompute) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; ++i) sum += PlaneSum(x + (i * c + ch) * plane, plane);
        const float mu = static_cast<float>(sum / count);
        for (int64_t i = 0; i < n; ++i) sq += PlaneSquares(x + (i * c + ch) * plane, plane, mu);
        const double var = sq / count;
        mean[ch] = mu;
        inv_std[ch] = static_cast<float>(1.0 / std::sqrt(var + eps_));
        const double unbiased = count > 1 ? var * count / (count - 1) : var;
        running_mean[ch] = static_cast<float>((1 - momentum_) * running_mean[ch] + momentum_ * mu);
        running_var[ch] = static_cast<float>((1 - momentum_) * running_var[ch] + momentum_ * unbiased);
      } else if (!train) {
        mean[ch] = running_mean[ch];
        inv_std[ch] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_var[ch]) + eps_));
      }
      // Output from the saved statistics: a recomputation gives the same bits.
      const float scale = gamma[ch] * inv_std[ch];
      const float shift = beta[ch] - mean[ch] * scale;
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * plane;
        float* q = y + (i * c + ch) * plane;
#pragma omp simd
        for (int64_t j = 0; j < plane; ++j) q[j] = p[j] * scale + shift;
      }
    }
  }

  // dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat))
  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const float* x = args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    const float* gamma = args.params[0].data();
    const float* mean = args.aux[0].data();
    const float* inv_std = args.aux[1].data();
    float* dgamma = args.param_grads[0].data();
    float* dbeta = args.param_grads[1].data();
    float* dx = args.input_grads[0].valid() ? args.input_grads[0].data() : nullptr;
    const bool accumulate = args.accumulate[0];
    const double count = static_cast<double>(n * plane);
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float mu = mean[ch], istd = inv_std[ch];
      double sum_dy = 0, sum_dy_xc = 0;  // xc = x - mu
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * plane;
        const float* g = dy + (i * c + ch) * plane;
        float a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
        for (int64_t j = 0; j < plane; ++j) {
          a += g[j];
          b += g[j] * (p[j] - mu);
        }
        sum_dy += a;
        sum_dy_xc += b;
      }
      const double sum_dy_xhat = sum_dy_xc * istd;
      if (dgamma) dgamma[ch] = static_cast<float>(sum_dy_xhat);
      if (dbeta) dbeta[ch] = static_cast<float>(sum_dy);
      if (!dx) continue;
      const float k = gamma[ch] * istd;
      const float mean_dy = static_cast<float>(sum_dy / count);
      const float coef = static_cast<float>(sum_dy_xhat / count) * istd;  // per unit of xc
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * plane;
        const float* g = dy + (i * c + ch) * plane;
        float* q = dx + (i * c + ch) * plane;
        if (accumulate) {
#pragma omp simd
          for (int64_t j = 0; j < plane; ++j) q[j] += k * (g[j] - mean_dy - (p[j] - mu) * coef);
        } else {
#pragma omp simd
          for (int64_t j = 0; j < plane; ++j) q[j] = k * (g[j] - mean_dy - (p[j] - mu) * coef);
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(batch_norm, kCpu, CpuBatchNormLayer);

}  // namespace spill
