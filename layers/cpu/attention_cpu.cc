// attention on the CPU. Heads are computed kHeadsInFlight at a time, each in
// its own part of the workspace (its Q, K and V gathered into rows of d
// contiguous floats), rows in order and every sum in a fixed order, so the
// bits depend neither on the thread count nor on where the memory policies
// put the tensors - and a slice of the batch computes its images as the
// whole batch does (no reduction crosses images).
#include <cmath>
#include <limits>
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/attention_layer.h"

namespace spill {
namespace {

float Dot(const float* a, const float* b, int64_t d) {
  float sum = 0;
  for (int64_t i = 0; i < d; ++i) sum += a[i] * b[i];
  return sum;
}

class CpuAttentionLayer : public AttentionLayer {
 public:
  using AttentionLayer::AttentionLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n();
    float* work = static_cast<float*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kForward)) << name();
    ForEachHead(n, [&](int64_t image, int64_t head, int64_t slot) {
      ForwardHead(args, image, head, work + slot * HeadWorkspace(Pass::kForward));
    });
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const int64_t n = args.inputs[0].shape().n();
    float* work = static_cast<float*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kBackward)) << name();
    ForEachHead(n, [&](int64_t image, int64_t head, int64_t slot) {
      BackwardHead(args, image, head, work + slot * HeadWorkspace(Pass::kBackward));
    });
  }

 private:
  // f(image, head, slot) for every head of `n` images, InFlight() at a time.
  template <typename F>
  void ForEachHead(int64_t n, F f) const {
    const int64_t total = n * heads_, group = InFlight();
    for (int64_t first = 0; first < total; first += group) {
      const int64_t count = std::min(group, total - first);
#pragma omp parallel for schedule(static)
      for (int64_t slot = 0; slot < count; ++slot) {
        const int64_t pair = first + slot;
        f(pair / heads_, pair % heads_, slot);
      }
    }
  }

  // Rows of d floats, one per position, of channels [first, first + d) of
  // image `image` of an N x C' x 1 x T tensor.
  void Gather(const float* x, int64_t channels, int64_t image, int64_t first, float* rows) const {
    const float* base = x + (image * channels + first) * steps_;
    for (int64_t i = 0; i < depth_; ++i) {
      for (int64_t t = 0; t < steps_; ++t) rows[t * depth_ + i] = base[i * steps_ + t];
    }
  }
  void Scatter(const float* rows, int64_t channels, int64_t image, int64_t first, bool add,
               float* x) const {
    float* base = x + (image * channels + first) * steps_;
    for (int64_t i = 0; i < depth_; ++i) {
      for (int64_t t = 0; t < steps_; ++t) {
        const float v = rows[t * depth_ + i];
        base[i * steps_ + t] = add ? base[i * steps_ + t] + v : v;
      }
    }
  }

  int64_t RowEnd(int64_t t) const { return causal_ ? t + 1 : steps_; }
  float Scale() const { return 1.0f / std::sqrt(static_cast<float>(depth_)); }

  // Row t's scores (Q[t] . K[s] / sqrt(d), s < RowEnd(t)) into `row`.
  void Scores(const float* q, const float* k, int64_t t, float* row) const {
    const float scale = Scale();
    for (int64_t s = 0; s < RowEnd(t); ++s) {
      row[s] = Dot(q + t * depth_, k + s * depth_, depth_) * scale;
    }
  }
  // The scores of row t made probabilities in place, given the row's maximum
  // and 1 / sum (what tiled keeps): exp(s - max) * inverse.
  void Probabilities(int64_t t, float max, float inverse, float* row) const {
    for (int64_t s = 0; s < RowEnd(t); ++s) row[s] = std::exp(row[s] - max) * inverse;
  }

  void ForwardHead(const ForwardArgs& args, int64_t image, int64_t head, float* work) const {
    const int64_t td = steps_ * depth_;
    float *q = work, *k = q + td, *v = k + td, *row = v + td;
    const float* x = args.inputs[0].data();
    Gather(x, 3 * channels_, image, head * depth_, q);
    Gather(x, 3 * channels_, image, channels_ + head * depth_, k);
    Gather(x, 3 * channels_, image, 2 * channels_ + head * depth_, v);
    float* y = args.outputs[0].data() + (image * channels_ + head * depth_) * steps_;
    float* saved = args.aux[0].data() + (image * heads_ + head) * steps_ * (tiled_ ? 2 : steps_);
    for (int64_t t = 0; t < steps_; ++t) {
      const int64_t end = RowEnd(t);
      Scores(q, k, t, row);
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t s = 0; s < end; ++s) max = std::max(max, row[s]);
      double sum = 0;
      for (int64_t s = 0; s < end; ++s) sum += std::exp(row[s] - max);
      const float inverse = static_cast<float>(1.0 / sum);
      Probabilities(t, max, inverse, row);
      for (int64_t i = 0; i < depth_; ++i) {
        float o = 0;
        for (int64_t s = 0; s < end; ++s) o += row[s] * v[s * depth_ + i];
        y[i * steps_ + t] = o;
      }
      if (tiled_) {
        saved[2 * t] = max;
        saved[2 * t + 1] = inverse;
      } else {
        std::copy(row, row + end, saved + t * steps_);
        std::fill(saved + t * steps_ + end, saved + (t + 1) * steps_, 0.0f);
      }
    }
  }

  // dP = dO V^T, dS = P (dP - sum(P dP)), dQ = dS K / sqrt(d),
  // dK = dS^T Q / sqrt(d), dV = P^T dO - row by row, t ascending.
  void BackwardHead(const BackwardArgs& args, int64_t image, int64_t head, float* work) const {
    const int64_t td = steps_ * depth_;
    float *q = work, *k = q + td, *v = k + td, *dout = v + td;
    float *dq = dout + td, *dk = dq + td, *dv = dk + td;
    float *row = dv + td, *drow = row + steps_;
    const float* x = args.inputs[0].data();
    Gather(x, 3 * channels_, image, head * depth_, q);
    Gather(x, 3 * channels_, image, channels_ + head * depth_, k);
    Gather(x, 3 * channels_, image, 2 * channels_ + head * depth_, v);
    Gather(args.output_grads[0].data(), channels_, image, head * depth_, dout);
    std::fill(dk, dk + 2 * td, 0.0f);  // dK and dV add over the rows
    const float* saved =
        args.aux[0].data() + (image * heads_ + head) * steps_ * (tiled_ ? 2 : steps_);
    const float scale = Scale();
    for (int64_t t = 0; t < steps_; ++t) {
      const int64_t end = RowEnd(t);
      if (tiled_) {
        Scores(q, k, t, row);
        Probabilities(t, saved[2 * t], saved[2 * t + 1], row);
      } else {
        std::copy(saved + t * steps_, saved + t * steps_ + end, row);
      }
      const float* g = dout + t * depth_;
      double total = 0;
      for (int64_t s = 0; s < end; ++s) {
        drow[s] = Dot(g, v + s * depth_, depth_);
        total += static_cast<double>(row[s]) * drow[s];
      }
      const float mean = static_cast<float>(total);
      for (int64_t s = 0; s < end; ++s) drow[s] = row[s] * (drow[s] - mean) * scale;
      for (int64_t i = 0; i < depth_; ++i) {
        float sum = 0;
        for (int64_t s = 0; s < end; ++s) sum += drow[s] * k[s * depth_ + i];
        dq[t * depth_ + i] = sum;
      }
      for (int64_t s = 0; s < end; ++s) {
        for (int64_t i = 0; i < depth_; ++i) {
          dk[s * depth_ + i] += drow[s] * q[t * depth_ + i];
          dv[s * depth_ + i] += row[s] * g[i];
        }
      }
    }
    float* dx = args.input_grads[0].data();
    const bool add = args.accumulate[0];
    Scatter(dq, 3 * channels_, image, head * depth_, add, dx);
    Scatter(dk, 3 * channels_, image, channels_ + head * depth_, add, dx);
    Scatter(dv, 3 * channels_, image, 2 * channels_ + head * depth_, add, dx);
  }
};

}  // namespace

SPILL_REGISTER_LAYER(attention, kCpu, CpuAttentionLayer);

}  // namespace spill
