// BatchNorm on the CPU. Channels are spread over threads; each channel's
// statistics are reduced by one thread in a fixed order, so results are
// deterministic. Sums accumulate in double: the bias gradient is a sum that
// cancels heavily, and float accumulation loses digits there that every
// earlier layer's gradient inherits.
#include <cmath>

#include "framework/layer_registry.h"
#include "layers/batch_norm_layer.h"
#include "layers/cpu/batch_norm_sync.h"

namespace spill {
namespace {

// Sum of one plane, in double lanes the compiler vectorizes.
inline double PlaneSum(const float* p, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += p[j];
  return s;
}

inline double PlaneSquares(const float* p, int64_t n, double mean) {
  double s = 0;
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
    // Synchronized across data-parallel replicas (framework/replica_sum.h).
    const bool synced = train && !args.recompute && GetReplicaSum();
    if (synced) cpu::SyncedBatchNormStatistics(args, eps_, momentum_, GetReplicaSum());
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      if (train && !args.recompute && !synced) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; ++i) sum += PlaneSum(x + (i * c + ch) * plane, plane);
        const double mu = sum / count;
        for (int64_t i = 0; i < n; ++i) sq += PlaneSquares(x + (i * c + ch) * plane, plane, mu);
        const double var = sq / count;
        mean[ch] = static_cast<float>(mu);
        inv_std[ch] = static_cast<float>(1.0 / std::sqrt(var + eps_));
        const double unbiased = count > 1 ? var * count / (count - 1) : var;
        running_mean[ch] = static_cast<float>((1 - momentum_) * running_mean[ch] + momentum_ * mu);
        running_var[ch] =
            static_cast<float>((1 - momentum_) * running_var[ch] + momentum_ * unbiased);
      } else if (!train) {
        mean[ch] = running_mean[ch];
        inv_std[ch] =
            static_cast<float>(1.0 / std::sqrt(static_cast<double>(running_var[ch]) + eps_));
      }
      // Output from the saved statistics: a recomputation gives the same bits.
      // (x - mean) first: folding the mean into the shift would cancel digits
      // whenever the mean is large next to the deviation.
      const float scale = gamma[ch] * inv_std[ch], shift = beta[ch], mu = mean[ch];
      for (int64_t i = 0; i < n; ++i) {
        const float* p = x + (i * c + ch) * plane;
        float* q = y + (i * c + ch) * plane;
#pragma omp simd
        for (int64_t j = 0; j < plane; ++j) q[j] = (p[j] - mu) * scale + shift;
      }
    }
  }

  // dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat))
  void Backward(const BackwardArgs& args) const override {
    if (GetReplicaSum()) return cpu::SyncedBatchNormBackward(args, GetReplicaSum());
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
#pragma omp simd reduction(+ : sum_dy, sum_dy_xc)
        for (int64_t j = 0; j < plane; ++j) {
          sum_dy += g[j];
          sum_dy_xc += static_cast<double>(g[j]) * (p[j] - mu);
        }
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
