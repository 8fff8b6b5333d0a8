// Synchronized batch norm on the CPU (see batch_norm_sync.h). Per-channel
// sums accumulate in double, one thread per channel in a fixed order, as in
// batch_norm_cpu.cc; the cross-replica sums are in double too.
#include <cmath>
#include <vector>

#include "layers/cpu/batch_norm_sync.h"

namespace spill {
namespace cpu {

void SyncedBatchNormStatistics(const ForwardArgs& args, double eps, double momentum,
                               const ReplicaSum& sum) {
  const Shape& s = args.inputs[0].shape();
  const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
  const float* x = args.inputs[0].data();
  float* running_mean = args.params[2].data();
  float* running_var = args.params[3].data();
  float* mean = args.aux[0].data();
  float* inv_std = args.aux[1].data();
  // [per-channel sums..., example count]: the count makes uneven shards exact.
  std::vector<double> sums(c + 1, 0.0);
  sums[c] = static_cast<double>(n * plane);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) total += p[j];
    }
    sums[ch] = total;
  }
  sum(sums.data(), c + 1);
  const double count = sums[c];
  std::vector<double> squares(c, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mu = sums[ch] / count;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) total += (p[j] - mu) * (p[j] - mu);
    }
    squares[ch] = total;
  }
  sum(squares.data(), c);
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mu = sums[ch] / count, var = squares[ch] / count;
    mean[ch] = static_cast<float>(mu);
    inv_std[ch] = static_cast<float>(1.0 / std::sqrt(var + eps));
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    running_mean[ch] = static_cast<float>((1 - momentum) * running_mean[ch] + momentum * mu);
    running_var[ch] = static_cast<float>((1 - momentum) * running_var[ch] + momentum * unbiased);
  }
}

// dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), the means
// over the global batch.
void SyncedBatchNormBackward(const BackwardArgs& args, const ReplicaSum& sum) {
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
  // [sum dy per channel..., sum dy * (x - mean) per channel..., count]
  std::vector<double> sums(2 * c + 1, 0.0);
  sums[2 * c] = static_cast<double>(n * plane);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = mean[ch];
    double sum_dy = 0, sum_dy_xc = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * plane;
      const float* g = dy + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) {
        sum_dy += g[j];
        sum_dy_xc += static_cast<double>(g[j]) * (p[j] - mu);
      }
    }
    sums[ch] = sum_dy;
    sums[c + ch] = sum_dy_xc;
    // This replica's share of the parameter gradients.
    if (dgamma) dgamma[ch] = static_cast<float>(sum_dy_xc * inv_std[ch]);
    if (dbeta) dbeta[ch] = static_cast<float>(sum_dy);
  }
  if (!dx) return;
  sum(sums.data(), 2 * c + 1);
  const double count = sums[2 * c];
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = mean[ch], istd = inv_std[ch];
    const float k = gamma[ch] * istd;
    const float mean_dy = static_cast<float>(sums[ch] / count);
    const float coef = static_cast<float>(sums[c + ch] * istd / count) * istd;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = x + (i * c + ch) * plane;
      const float* g = dy + (i * c + ch) * plane;
      float* q = dx + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) {
        const float v = k * (g[j] - mean_dy - (p[j] - mu) * coef);
        q[j] = accumulate ? q[j] + v : v;
      }
    }
  }
}

}  // namespace cpu
}  // namespace spill
