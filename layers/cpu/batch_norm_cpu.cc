// BatchNorm on the CPU. Channels are spread over threads; each channel's
// statistics are reduced by one thread in a fixed order, so results are
// deterministic. Sums accumulate in double: the bias gradient is a sum that
// cancels heavily, and float accumulation loses digits there that every
// earlier layer's gradient inherits. Every reduction adds image by image in
// batch order, so a step run over slices of the batch (memory.chunk) gives
// the same bits. Blocked and channels-last tensors go through
// layers/cpu/batch_norm_blocked.h,
// whose per-image partial sums live in the workspace. Activations stored in
// 16 bits are read and written as they are (layers/cpu/typed_elements.h):
// the bits of float32 copies, with no copies.
#include <cmath>
#include <vector>

#include "framework/distributed/replica_sum.h"
#include "framework/graph/layer_registry.h"
#include "layers/batch_norm_layer.h"
#include "layers/cpu/batch_norm_blocked.h"
#include "layers/cpu/typed_elements.h"

namespace spill {
namespace {

// Sum of one plane, in double lanes the compiler vectorizes.
template <typename E>
inline double PlaneSum(const typename E::T* p, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += E::Load(p[j]);
  return s;
}

template <typename E>
inline double PlaneSquares(const typename E::T* p, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) {
    const float v = E::Load(p[j]);
    s += (v - mean) * (v - mean);
  }
  return s;
}

class CpuBatchNormLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;

  LayoutRule layout_rule() const override { return LayoutRule::kTied; }
  // x and y (so dx and dy) of one type; otherwise float32 copies.
  bool computes_16_bit(Pass) const override { return input_dtype(0) == output_dtype(0); }
  size_t workspace_bytes(Pass) const override {
    if (input_layout(0) == Layout::kPlain) return 0;
    return cpu::BlockedPartialDoubles(Shape(batch(), channels_, 1, 1)) * sizeof(double);
  }

  bool supports_slices() const override { return true; }
  // Forward: sums, squares about the mean, normalization. Backward: the two
  // sums, then the input gradient.
  int slice_sweeps(Pass pass) const override { return pass == Pass::kForward ? 3 : 2; }
  size_t slice_sums(Pass) const override { return 2 * static_cast<size_t>(channels_); }

  void Forward(const ForwardArgs& args) const override {
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) { ForwardAs<decltype(e)>(args); });
  }

  void Backward(const BackwardArgs& args) const override {
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) { BackwardAs<decltype(e)>(args); });
  }

 private:
  template <typename E>
  void ForwardAs(const ForwardArgs& args) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const BatchSlice& slice = args.slice;
    const bool statistics = args.phase == Phase::kTrain && !args.recompute;
    if (statistics && GetReplicaSum() && !slice.sliced()) return SyncedForward<E>(args);
    std::vector<double> local;
    double* sums = SliceSums(slice, 2 * c, &local);  // per channel: sum, then squares
    const double count = static_cast<double>(slice.total(n) * plane);
    if (statistics && slice.runs(0)) AddSums<E>(args, sums);
    if (statistics && slice.runs(1)) {
      AddSquares<E>(args, sums, count);
      if (slice.last(n)) SetStatistics(args, sums, count);
    }
    if (args.phase == Phase::kEval && slice.runs(1) && slice.last(n)) {
      for (int64_t ch = 0; ch < c; ++ch) {
        args.aux[0].data()[ch] = args.params[2].data()[ch];
        args.aux[1].data()[ch] = static_cast<float>(
            1.0 / std::sqrt(static_cast<double>(args.params[3].data()[ch]) + eps_));
      }
    }
    if (slice.runs(2)) Normalize<E>(args);
  }

  // dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat))
  template <typename E>
  void BackwardAs(const BackwardArgs& args) const {
    const BatchSlice& slice = args.slice;
    if (GetReplicaSum() && !slice.sliced()) return SyncedBackward<E>(args);
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    std::vector<double> local;
    double* sums = SliceSums(slice, 2 * c, &local);  // per channel: sum dy, sum dy * (x - mu)
    if (slice.runs(0)) {
      AddGradientSums<E>(args, sums);
      if (slice.last(n)) ParamGradients(args, sums);
    }
    if (slice.runs(1) && args.input_grads[0].valid()) {
      InputGradient<E>(args, sums, static_cast<double>(slice.total(n) * plane));
    }
  }

  // Synchronized across data-parallel replicas (framework/distributed/replica_sum.h;
  // PyTorch's SyncBatchNorm): the sums of each sweep, and the example counts,
  // are added over the replicas before they are used, so every replica
  // normalizes with the global batch's statistics. Whole batches only (a
  // data-parallel run refuses memory.chunk with sync_batch_norm).
  // Buffers: [count, sums per channel..., second sums per channel...].
  template <typename E>
  void SyncedForward(const ForwardArgs& args) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c();
    const ReplicaSum& replicas = GetReplicaSum();
    std::vector<double> buffer(2 * c + 1, 0.0);
    buffer[0] = static_cast<double>(s.n() * s.h() * s.w());
    double* sums = buffer.data() + 1;
    AddSums<E>(args, sums);
    replicas(buffer.data(), c + 1);
    AddSquares<E>(args, sums, buffer[0]);
    replicas(sums + c, c);
    SetStatistics(args, sums, buffer[0]);
    Normalize<E>(args);
  }

  // The parameter gradients stay this replica's share: the gradient
  // allreduce averages them like every other gradient.
  template <typename E>
  void SyncedBackward(const BackwardArgs& args) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t c = s.c();
    std::vector<double> buffer(2 * c + 1, 0.0);
    buffer[0] = static_cast<double>(s.n() * s.h() * s.w());
    double* sums = buffer.data() + 1;
    AddGradientSums<E>(args, sums);
    ParamGradients(args, sums);
    if (!args.input_grads[0].valid()) return;
    GetReplicaSum()(buffer.data(), 2 * c + 1);
    InputGradient<E>(args, sums, buffer[0]);
  }

  // The blocked sweeps' per-image partial sums.
  static double* Partial(const Workspace& workspace) {
    return static_cast<double*>(workspace.data);
  }

  // sums[ch] += the channel's values, image by image.
  template <typename E>
  void AddSums(const ForwardArgs& args, double* sums) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    if (args.inputs[0].layout() != Layout::kPlain) {
      return cpu::BlockedSums<E>(x, s, args.inputs[0].layout(), Partial(args.workspace), sums);
    }
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t i = 0; i < n; ++i) sums[ch] += PlaneSum<E>(x + (i * c + ch) * plane, plane);
    }
  }

  // sums[c + ch] += squared deviations from the mean sums[ch] / count.
  template <typename E>
  void AddSquares(const ForwardArgs& args, double* sums, double count) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    if (args.inputs[0].layout() != Layout::kPlain) {
      std::vector<double> mean(c);
      for (int64_t ch = 0; ch < c; ++ch) mean[ch] = sums[ch] / count;
      return cpu::BlockedSquares<E>(x, s, args.inputs[0].layout(), mean.data(),
                                    Partial(args.workspace), sums + c);
    }
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const double mu = sums[ch] / count;
      for (int64_t i = 0; i < n; ++i) {
        sums[c + ch] += PlaneSquares<E>(x + (i * c + ch) * plane, plane, mu);
      }
    }
  }

  // sums[ch] += dy, sums[c + ch] += dy * (x - mean), image by image.
  template <typename E>
  void AddGradientSums(const BackwardArgs& args, double* sums) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    const auto* dy = cpu::ElementsOf<E>(args.output_grads[0]);
    const float* mean = args.aux[0].data();
    if (args.inputs[0].layout() != Layout::kPlain) {
      return cpu::BlockedGradientSums<E>(x, dy, s, args.inputs[0].layout(), mean,
                                         Partial(args.workspace), sums, sums + c);
    }
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float mu = mean[ch];
      double sum_dy = sums[ch], sum_dy_xc = sums[c + ch];
      for (int64_t i = 0; i < n; ++i) {
        const auto* p = x + (i * c + ch) * plane;
        const auto* g = dy + (i * c + ch) * plane;
#pragma omp simd reduction(+ : sum_dy, sum_dy_xc)
        for (int64_t j = 0; j < plane; ++j) {
          const float d = E::Load(g[j]);
          sum_dy += d;
          sum_dy_xc += static_cast<double>(d) * (E::Load(p[j]) - mu);
        }
      }
      sums[ch] = sum_dy;
      sums[c + ch] = sum_dy_xc;
    }
  }

  void ParamGradients(const BackwardArgs& args, const double* sums) const {
    const int64_t c = channels_;
    const float* inv_std = args.aux[1].data();
    for (int64_t ch = 0; ch < c; ++ch) {
      if (args.param_grads[0].valid()) {
        args.param_grads[0].data()[ch] = static_cast<float>(sums[c + ch] * inv_std[ch]);
      }
      if (args.param_grads[1].valid())
        args.param_grads[1].data()[ch] = static_cast<float>(sums[ch]);
    }
  }

  // The batch statistics from the sums, and the running ones updated.
  void SetStatistics(const ForwardArgs& args, const double* sums, double count) const {
    const int64_t c = channels_;
    float* running_mean = args.params[2].data();
    float* running_var = args.params[3].data();
    for (int64_t ch = 0; ch < c; ++ch) {
      const double mu = sums[ch] / count, var = sums[c + ch] / count;
      args.aux[0].data()[ch] = static_cast<float>(mu);
      args.aux[1].data()[ch] = static_cast<float>(1.0 / std::sqrt(var + eps_));
      const double unbiased = count > 1 ? var * count / (count - 1) : var;
      running_mean[ch] = static_cast<float>((1 - momentum_) * running_mean[ch] + momentum_ * mu);
      running_var[ch] =
          static_cast<float>((1 - momentum_) * running_var[ch] + momentum_ * unbiased);
    }
  }

  // Output from the saved statistics: a recomputation gives the same bits.
  // (x - mean) first: folding the mean into the shift would cancel digits
  // whenever the mean is large next to the deviation.
  template <typename E>
  void Normalize(const ForwardArgs& args) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    auto* y = cpu::ElementsOf<E>(args.outputs[0]);
    const float* gamma = args.params[0].data();
    const float* beta = args.params[1].data();
    const float* mean = args.aux[0].data();
    const float* inv_std = args.aux[1].data();
    if (args.inputs[0].layout() != Layout::kPlain) {
      std::vector<float> scale(c);
      for (int64_t ch = 0; ch < c; ++ch) scale[ch] = gamma[ch] * inv_std[ch];
      return cpu::BlockedNormalize<E>(x, s, args.inputs[0].layout(), mean, scale.data(), beta, y);
    }
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float scale = gamma[ch] * inv_std[ch], shift = beta[ch], mu = mean[ch];
      for (int64_t i = 0; i < n; ++i) {
        const auto* p = x + (i * c + ch) * plane;
        auto* q = y + (i * c + ch) * plane;
#pragma omp simd
        for (int64_t j = 0; j < plane; ++j) q[j] = E::Store((E::Load(p[j]) - mu) * scale + shift);
      }
    }
  }

  template <typename E>
  void InputGradient(const BackwardArgs& args, const double* sums, double count) const {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    const auto* dy = cpu::ElementsOf<E>(args.output_grads[0]);
    const float* gamma = args.params[0].data();
    const float* mean = args.aux[0].data();
    const float* inv_std = args.aux[1].data();
    auto* dx = cpu::ElementsOf<E>(args.input_grads[0]);
    const bool accumulate = args.accumulate[0];
    if (args.inputs[0].layout() != Layout::kPlain) {
      std::vector<float> k(c), mean_dy(c), coef(c);
      for (int64_t ch = 0; ch < c; ++ch) {
        const float istd = inv_std[ch];
        k[ch] = gamma[ch] * istd;
        mean_dy[ch] = static_cast<float>(sums[ch] / count);
        coef[ch] = static_cast<float>(sums[c + ch] * istd / count) * istd;
      }
      return cpu::BlockedInputGradient<E>(x, dy, s, args.inputs[0].layout(), mean, k.data(),
                                          mean_dy.data(), coef.data(), dx, accumulate);
    }
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float mu = mean[ch], istd = inv_std[ch];
      const double sum_dy_xhat = sums[c + ch] * istd;
      const float k = gamma[ch] * istd;
      const float mean_dy = static_cast<float>(sums[ch] / count);
      const float coef = static_cast<float>(sum_dy_xhat / count) * istd;  // per unit of xc
      for (int64_t i = 0; i < n; ++i) {
        const auto* p = x + (i * c + ch) * plane;
        const auto* g = dy + (i * c + ch) * plane;
        auto* q = dx + (i * c + ch) * plane;
        if (accumulate) {
#pragma omp simd
          for (int64_t j = 0; j < plane; ++j) {
            q[j] = E::Store(E::Load(q[j]) +
                            k * (E::Load(g[j]) - mean_dy - (E::Load(p[j]) - mu) * coef));
          }
        } else {
#pragma omp simd
          for (int64_t j = 0; j < plane; ++j) {
            q[j] = E::Store(k * (E::Load(g[j]) - mean_dy - (E::Load(p[j]) - mu) * coef));
          }
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(batch_norm, kCpu, CpuBatchNormLayer);

}  // namespace spill
