// window_attention on the CPU. Units - one head of one window of one image,
// in the order (image, window, head) - are computed kUnitsInFlight at a
// time, each in its own part of the workspace (its Q, K and V gathered from
// the window's pixels into rows of d contiguous floats), rows in order and
// every sum in a fixed order, so the bits depend neither on the thread
// count nor on where the memory policies put the tensors. The table's
// gradient (and with `cosine` logit_scale's) is each unit's own sum, added
// into the parameter's gradient unit by unit in that order once its group
// is done, from zero on the first slice of the batch - so a step over
// slices of the batch gives the whole batch's bits.
// Inputs and outputs stored in 16 bits are widened as they are gathered and
// rounded as they are scattered (layers/cpu/typed_elements.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/graph/layer_registry.h"
#include "layers/cpu/typed_elements.h"
#include "layers/window_attention_layer.h"

namespace spill {
namespace {

float Dot(const float* a, const float* b, int64_t d) {
  float sum = 0;
  for (int64_t i = 0; i < d; ++i) sum += a[i] * b[i];
  return sum;
}

// One head of one window of one image; `index` counts units from the
// first image of the call.
struct Unit {
  int64_t index, image, window, head;
};

class CpuWindowAttentionLayer : public WindowAttentionLayer {
 public:
  using WindowAttentionLayer::WindowAttentionLayer;

  bool supports_slices() const override { return true; }
  // x and y (so dx and dy) of one type; otherwise float32 copies.
  bool computes_16_bit(Pass) const override { return input_dtype(0) == output_dtype(0); }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n();
    float* work = static_cast<float*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kForward)) << name();
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) {
      ForEachUnit(
          n,
          [&](const Unit& unit, int64_t slot) {
            ForwardUnit<decltype(e)>(args, unit, work + slot * UnitWorkspace(Pass::kForward));
          },
          [](int64_t, int64_t) {});
    });
  }

  void Backward(const BackwardArgs& args) const override {
    float* dtable = args.param_grads[0].valid() ? args.param_grads[0].data() : nullptr;
    float* dlogit = cosine_ && args.param_grads[1].valid() ? args.param_grads[1].data() : nullptr;
    if (!args.input_grads[0].valid() && dtable == nullptr && dlogit == nullptr) return;
    if (args.slice.first()) {
      if (dtable != nullptr) std::fill(dtable, dtable + grid_.table_rows() * heads_, 0.0f);
      if (dlogit != nullptr) std::fill(dlogit, dlogit + heads_, 0.0f);
    }
    const int64_t n = args.inputs[0].shape().n();
    float* work = static_cast<float*>(args.workspace.data);
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kBackward)) << name();
    const int64_t stride = UnitWorkspace(Pass::kBackward);
    cpu::WithElements(args.inputs[0].dtype(), [&](auto e) {
      ForEachUnit(
          n,
          [&](const Unit& unit, int64_t slot) {
            BackwardUnit<decltype(e)>(args, unit, work + slot * stride);
          },
          [&](int64_t first, int64_t count) {
            if (dtable != nullptr) AddTableGrads(first, count, work, stride, dtable);
            if (dlogit != nullptr) {
              AddLogitScaleGrads(first, count, work, stride, args.params[1].data(), dlogit);
            }
          });
    });
  }

 private:
  // unit(Unit, slot) for every unit of `n` images, InFlight() at a time,
  // then done(first, count) for each group, in order.
  template <typename F, typename G>
  void ForEachUnit(int64_t n, F unit, G done) const {
    const int64_t total = Units(n), group = InFlight(), windows = grid_.windows();
    for (int64_t first = 0; first < total; first += group) {
      const int64_t count = std::min(group, total - first);
#pragma omp parallel for schedule(static)
      for (int64_t slot = 0; slot < count; ++slot) {
        const int64_t index = first + slot, pair = index / heads_;
        unit(Unit{index, pair / windows, pair % windows, index % heads_}, slot);
      }
      done(first, count);
    }
  }

  // Rows of d floats, one per token of the unit's window, of channels
  // [first, first + d) of an N x C' x H x W tensor.
  template <typename E>
  void Gather(const typename E::T* x, int64_t channels, const Unit& unit, int64_t first,
              float* rows) const {
    const int64_t plane = grid_.height * grid_.width;
    const typename E::T* base = x + (unit.image * channels + first) * plane;
    for (int64_t t = 0; t < grid_.tokens(); ++t) {
      const int64_t pixel = WindowPixel(grid_, unit.window, t);
      for (int64_t i = 0; i < depth_; ++i) rows[t * depth_ + i] = E::Load(base[i * plane + pixel]);
    }
  }
  template <typename E>
  void Scatter(const float* rows, int64_t channels, const Unit& unit, int64_t first, bool add,
               typename E::T* x) const {
    const int64_t plane = grid_.height * grid_.width;
    typename E::T* base = x + (unit.image * channels + first) * plane;
    for (int64_t t = 0; t < grid_.tokens(); ++t) {
      const int64_t pixel = WindowPixel(grid_, unit.window, t);
      for (int64_t i = 0; i < depth_; ++i) {
        typename E::T& out = base[i * plane + pixel];
        const float v = rows[t * depth_ + i];
        out = E::Store(add ? E::Load(out) + v : v);
      }
    }
  }

  // The unit's queries (times d^-1/2, as PyTorch scales them), keys and
  // values; with `cosine` the queries and keys normalized instead, their
  // norms (queries', then keys') into `norms` where it is not null.
  template <typename E>
  void GatherQkv(const Tensor& input, const Unit& unit, float* q, float* k, float* v,
                 float* norms = nullptr) const {
    const auto* x = cpu::ElementsOf<E>(input);
    const int64_t offset = unit.head * depth_, tokens = grid_.tokens();
    Gather<E>(x, 3 * channels_, unit, offset, q);
    Gather<E>(x, 3 * channels_, unit, channels_ + offset, k);
    Gather<E>(x, 3 * channels_, unit, 2 * channels_ + offset, v);
    if (cosine_) {
      for (int64_t t = 0; t < tokens; ++t) {
        const float q_norm = NormalizeRow(q + t * depth_, depth_);
        const float k_norm = NormalizeRow(k + t * depth_, depth_);
        if (norms != nullptr) {
          norms[t] = q_norm;
          norms[tokens + t] = k_norm;
        }
      }
      return;
    }
    const float scale = Scale();
    for (int64_t e = 0; e < tokens * depth_; ++e) q[e] *= scale;
  }

  // What multiplies Q K^T: the clamped exp(logit_scale) of the unit's head
  // with `cosine`, else 1 (the queries carry d^-1/2).
  float CosineScaleOf(const std::vector<Tensor>& params, const Unit& unit) const {
    return cosine_ ? CosineScale(params[1].data()[unit.head]) : 1.0f;
  }

  // The unit's saved probabilities, T x T.
  float* Probabilities(const Tensor& aux, const Unit& unit) const {
    return aux.data() + unit.index * grid_.tokens() * grid_.tokens();
  }

  // Row t of the probabilities into `row`: the scores (times `scale`) plus
  // the bias and the mask (torchvision's order), less their maximum, exp,
  // over the sum.
  void Softmax(const float* q, const float* k, const float* table, float scale, const Unit& unit,
               int64_t t, float* row) const {
    const int64_t tokens = grid_.tokens();
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t u = 0; u < tokens; ++u) {
      const float bias = table[RelativeIndex(window_, t, u) * heads_ + unit.head];
      row[u] = Dot(q + t * depth_, k + u * depth_, depth_) * scale + bias +
               WindowMask(grid_, unit.window, t, u);
      max = std::max(max, row[u]);
    }
    float sum = 0;
    for (int64_t u = 0; u < tokens; ++u) sum += (row[u] = std::exp(row[u] - max));
    for (int64_t u = 0; u < tokens; ++u) row[u] /= sum;
  }

  template <typename E>
  void ForwardUnit(const ForwardArgs& args, const Unit& unit, float* work) const {
    const int64_t tokens = grid_.tokens(), td = tokens * depth_;
    const int64_t plane = grid_.height * grid_.width;
    float *q = work, *k = q + td, *v = k + td, *row = v + td;
    GatherQkv<E>(args.inputs[0], unit, q, k, v);
    auto* y =
        cpu::ElementsOf<E>(args.outputs[0]) + (unit.image * channels_ + unit.head * depth_) * plane;
    float* saved = Probabilities(args.aux[0], unit);
    const float scale = CosineScaleOf(args.params, unit);
    for (int64_t t = 0; t < tokens; ++t) {
      Softmax(q, k, args.params[0].data(), scale, unit, t, row);
      const int64_t pixel = WindowPixel(grid_, unit.window, t);
      for (int64_t i = 0; i < depth_; ++i) {
        float o = 0;
        for (int64_t u = 0; u < tokens; ++u) o += row[u] * v[u * depth_ + i];
        y[i * plane + pixel] = E::Store(o);
      }
      std::copy(row, row + tokens, saved + t * tokens);
    }
  }

  // Row t of dS = P (dP - sum(P dP)), dP = dO V^T, into `ds`.
  void ScoreGrads(const float* p, const float* dout, const float* v, int64_t t, float* ds) const {
    const int64_t tokens = grid_.tokens();
    double total = 0;
    for (int64_t u = 0; u < tokens; ++u) {
      ds[u] = Dot(dout + t * depth_, v + u * depth_, depth_);
      total += static_cast<double>(p[u]) * ds[u];
    }
    const float mean = static_cast<float>(total);
    for (int64_t u = 0; u < tokens; ++u) ds[u] = p[u] * (ds[u] - mean);
  }

  // dQ = d^-1/2 dS K, dK = dS^T (Q d^-1/2), dV = P^T dO and the unit's sum
  // of dS by table row - row by row, t ascending. With `cosine`, s the
  // clamped exp(logit_scale): dQ^ = s dS K^ and dK^ = s dS^T Q^, taken back
  // through the normalization, and the unit's part of logit_scale's
  // gradient, s sum(dS cos) (cos = Q^ K^T again, row by row).
  template <typename E>
  void BackwardUnit(const BackwardArgs& args, const Unit& unit, float* work) const {
    const int64_t tokens = grid_.tokens(), td = tokens * depth_;
    float *q = work, *k = q + td, *v = k + td, *dout = v + td;
    float *dq = dout + td, *dk = dq + td, *dv = dk + td, *ds = dv + td;
    float *norms = ds + tokens, *dlogit = norms + 2 * tokens;  // cosine only
    float* dtable = cosine_ ? dlogit + 1 : ds + tokens;
    GatherQkv<E>(args.inputs[0], unit, q, k, v, cosine_ ? norms : nullptr);
    Gather<E>(cpu::ElementsOf<E>(args.output_grads[0]), channels_, unit, unit.head * depth_, dout);
    std::fill(dk, dk + 2 * td, 0.0f);  // dK and dV add over the rows
    std::fill(dtable, dtable + grid_.table_rows(), 0.0f);
    const float* saved = Probabilities(args.aux[0], unit);
    const float scale = cosine_ ? CosineScaleOf(args.params, unit) : Scale();
    float cosines = 0;  // sum(dS cos)
    for (int64_t t = 0; t < tokens; ++t) {
      const float* p = saved + t * tokens;
      ScoreGrads(p, dout, v, t, ds);
      for (int64_t u = 0; u < tokens; ++u) dtable[RelativeIndex(window_, t, u)] += ds[u];
      if (cosine_) {
        float row = 0;
        for (int64_t u = 0; u < tokens; ++u) {
          row += ds[u] * Dot(q + t * depth_, k + u * depth_, depth_);
        }
        cosines += row;
      }
      for (int64_t i = 0; i < depth_; ++i) {
        float sum = 0;
        for (int64_t u = 0; u < tokens; ++u) sum += ds[u] * k[u * depth_ + i];
        dq[t * depth_ + i] = sum * scale;
      }
      for (int64_t u = 0; u < tokens; ++u) {
        for (int64_t i = 0; i < depth_; ++i) {
          dk[u * depth_ + i] += ds[u] * q[t * depth_ + i];
          dv[u * depth_ + i] += p[u] * dout[t * depth_ + i];
        }
      }
    }
    if (cosine_) *dlogit = scale * cosines;
    if (!args.input_grads[0].valid()) return;
    if (cosine_) {
      for (int64_t e = 0; e < td; ++e) dk[e] *= scale;
      for (int64_t t = 0; t < tokens; ++t) {
        NormalizeRowGrad(q + t * depth_, norms[t], depth_, dq + t * depth_);
        NormalizeRowGrad(k + t * depth_, norms[tokens + t], depth_, dk + t * depth_);
      }
    }
    auto* dx = cpu::ElementsOf<E>(args.input_grads[0]);
    const bool add = args.accumulate[0];
    const int64_t offset = unit.head * depth_;
    Scatter<E>(dq, 3 * channels_, unit, offset, add, dx);
    Scatter<E>(dk, 3 * channels_, unit, channels_ + offset, add, dx);
    Scatter<E>(dv, 3 * channels_, unit, 2 * channels_ + offset, add, dx);
  }

  // Units [first, first + count)'s sums of dS, at the end of their parts of
  // the workspace, added into the table's gradient in unit order.
  void AddTableGrads(int64_t first, int64_t count, const float* work, int64_t stride,
                     float* dtable) const {
    const int64_t rows = grid_.table_rows();
    const int64_t at = stride - rows;  // where a unit's sums start in its part
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t slot = 0; slot < count; ++slot) {
        const int64_t head = (first + slot) % heads_;
        dtable[r * heads_ + head] += work[slot * stride + at + r];
      }
    }
  }

  // Units [first, first + count)'s parts of logit_scale's gradient, just
  // before their table sums, added in unit order - where the clamp passes
  // the gradient.
  void AddLogitScaleGrads(int64_t first, int64_t count, const float* work, int64_t stride,
                          const float* logit_scale, float* dlogit) const {
    const int64_t at = stride - grid_.table_rows() - 1;
    for (int64_t slot = 0; slot < count; ++slot) {
      const int64_t head = (first + slot) % heads_;
      if (CosineScaleLearns(logit_scale[head])) dlogit[head] += work[slot * stride + at];
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(window_attention, kCpu, CpuWindowAttentionLayer);

}  // namespace spill
