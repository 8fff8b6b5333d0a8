// attention on the CPU. Heads are computed kHeadsInFlight at a time, each in
// its own part of the workspace (its Q, K and V gathered into rows of d
// contiguous floats), rows in order and every sum in a fixed order, so the
// bits depend neither on the thread count nor on where the memory policies
// put the tensors - and a slice of the batch computes its images as the
// whole batch does (no reduction crosses images). Inputs and outputs stored
// in 16 bits are widened as they are gathered and rounded as they are
// scattered (layers/cpu/typed_elements.h): the bits of float32 copies.
#include <cmath>
#include <limits>
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/attention_layer.h"
#include "layers/cpu/typed_elements.h"

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
  // x and y (so dx and dy) of one type; otherwise float32 copies.
  bool computes_16_bit(Pass) const override { return input_dtype(0) == output_dtype(0); }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n();
    float* work = static_cast<float*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kForward)) << name();
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) {
      ForEachHead(n, [&](int64_t image, int64_t head, int64_t slot) {
        ForwardHead<decltype(e)>(args, image, head, work + slot * HeadWorkspace(Pass::kForward));
      });
    });
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const int64_t n = args.inputs[0].shape().n();
    float* work = static_cast<float*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kBackward)) << name();
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) {
      ForEachHead(n, [&](int64_t image, int64_t head, int64_t slot) {
        BackwardHead<decltype(e)>(args, image, head, work + slot * HeadWorkspace(Pass::kBackward));
      });
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
  template <typename E>
  void Gather(const typename E::T* x, int64_t channels, int64_t image, int64_t first,
              float* rows) const {
    const typename E::T* base = x + (image * channels + first) * steps_;
    for (int64_t i = 0; i < depth_; ++i) {
      for (int64_t t = 0; t < steps_; ++t) rows[t * depth_ + i] = E::Load(base[i * steps_ + t]);
    }
  }
  template <typename E>
  void Scatter(const float* rows, int64_t channels, int64_t image, int64_t first, bool add,
               typename E::T* x) const {
    typename E::T* base = x + (image * channels + first) * steps_;
    for (int64_t i = 0; i < depth_; ++i) {
      for (int64_t t = 0; t < steps_; ++t) {
        const float v = rows[t * depth_ + i];
        base[i * steps_ + t] = E::Store(add ? E::Load(base[i * steps_ + t]) + v : v);
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

  template <typename E>
  void ForwardHead(const ForwardArgs& args, int64_t image, int64_t head, float* work) const {
    const int64_t td = steps_ * depth_;
    float *q = work, *k = q + td, *v = k + td, *row = v + td;
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    Gather<E>(x, 3 * channels_, image, head * depth_, q);
    Gather<E>(x, 3 * channels_, image, channels_ + head * depth_, k);
    Gather<E>(x, 3 * channels_, image, 2 * channels_ + head * depth_, v);
    auto* y = cpu::ElementsOf<E>(args.outputs[0]) + (image * channels_ + head * depth_) * steps_;
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
        y[i * steps_ + t] = E::Store(o);
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
  template <typename E>
  void BackwardHead(const BackwardArgs& args, int64_t image, int64_t head, float* work) const {
    const int64_t td = steps_ * depth_;
    float *q = work, *k = q + td, *v = k + td, *dout = v + td;
    float *dq = dout + td, *dk = dq + td, *dv = dk + td;
    float *row = dv + td, *drow = row + steps_;
    const auto* x = cpu::ElementsOf<E>(args.inputs[0]);
    Gather<E>(x, 3 * channels_, image, head * depth_, q);
    Gather<E>(x, 3 * channels_, image, channels_ + head * depth_, k);
    Gather<E>(x, 3 * channels_, image, 2 * channels_ + head * depth_, v);
    Gather<E>(cpu::ElementsOf<E>(args.output_grads[0]), channels_, image, head * depth_, dout);
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
    auto* dx = cpu::ElementsOf<E>(args.input_grads[0]);
    const bool add = args.accumulate[0];
    Scatter<E>(dq, 3 * channels_, image, head * depth_, add, dx);
    Scatter<E>(dk, 3 * channels_, image, channels_ + head * depth_, add, dx);
    Scatter<E>(dv, 3 * channels_, image, 2 * channels_ + head * depth_, add, dx);
  }
};

}  // namespace

SPILL_REGISTER_LAYER(attention, kCpu, CpuAttentionLayer);

}  // namespace spill
