// BatchNorm on the CPU. Channels are spread over threads; each channel's
// reductions run in one thread in a fixed order, in double precision.
#include <cmath>

#include "framework/layer_registry.h"
#include "layers/batch_norm_layer.h"

namespace spill {
namespace {

class CpuBatchNormLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;

  void Forward(const ForwardArgs& args) override {
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
        for (int64_t i = 0; i < n; ++i) {
          const float* p = x + (i * c + ch) * plane;
          for (int64_t j = 0; j < plane; ++j) sum += p[j];
        }
        const double mu = sum / count;
        for (int64_t i = 0; i < n; ++i) {
          const float* p = x + (i * c + ch) * plane;
          for (int64_t j = 0; j < plane; ++j) sq += (p[j] - mu) * (p[j] - mu);
        }
        const double var = sq / count;
        mean[ch] = static_cast<float>(mu);
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
        for (int64_t j = 0; j < plane; ++j) q[j] = p[j] * scale + shift;
      }
    }
  }

  void Backward(const BackwardArgs& args) override {
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
      const double mu = mean[ch], istd = inv_std[ch];
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * plane;
        const float* g = dy + (i * c + ch) * plane;
        for (int64_t j = 0; j < plane; ++j) {
          sum_dy += g[j];
          sum_dy_xhat += g[j] * (p[j] - mu) * istd;
        }
      }
      if (dgamma) dgamma[ch] = static_cast<float>(sum_dy_xhat);
      if (dbeta) dbeta[ch] = static_cast<float>(sum_dy);
      if (!dx) continue;
      // dx = gamma * istd * (dy - mean(dy) - xhat * mean(dy * xhat))
      const double k = gamma[ch] * istd;
      const double mean_dy = sum_dy / count, mean_dy_xhat = sum_dy_xhat / count;
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * plane;
        const float* g = dy + (i * c + ch) * plane;
        float* q = dx + (i * c + ch) * plane;
        for (int64_t j = 0; j < plane; ++j) {
          const double xhat = (p[j] - mu) * istd;
          const float v = static_cast<float>(k * (g[j] - mean_dy - xhat * mean_dy_xhat));
          q[j] = accumulate ? q[j] + v : v;
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(batch_norm, kCpu, CpuBatchNormLayer);

}  // namespace spill
