// lstm and gru on the CPU. Each layer and direction projects the whole
// input sequence at once (x W_ih^T + b_ih, image by image), then steps
// through time: the recurrent product over the batch (h W_hh^T + b_hh) and
// the cell's formulas (layers/recurrent_math.h). Backward walks time the
// other way, keeping the gate gradients of every step, then forms the
// weight gradients image by image in batch order and the input gradient in
// one product.
//
// The products are GEMMs (Eigen) by default and, when the step reduces over
// the batch image by image (BatchSlice::in_image_order: slices, a pinned
// algorithm), the row kernels of layers/cpu/row_kernels.h, whose every
// element is one fixed sequence of operations: a sliced step then gives the
// bits of the whole batch.
#include <algorithm>
#include <vector>

#include "framework/base/random.h"
#include "framework/graph/layer_registry.h"
#include "layers/cpu/cpu_math.h"
#include "layers/cpu/row_kernels.h"
#include "layers/recurrent_layers.h"
#include "layers/recurrent_math.h"

namespace spill {
namespace {

// The three products of the layer, as GEMMs or as row kernels.
struct Products {
  bool ordered = false;

  // y = x w^T (+ bias): n rows of x, m rows of w, k long.
  void Dots(const float* x, int64_t ldx, const float* w, int64_t n, int64_t m, int64_t k,
            const float* bias, float* y, int64_t ldy) const {
    if (ordered) {
      cpu::RowDots(x, ldx, w, k, n, m, k, bias, y, ldy);
      return;
    }
    cpu::Gemm(false, true, n, m, k, 1.0f, x, ldx, w, k, 0.0f, y, ldy);
    for (int64_t i = 0; i < n && bias != nullptr; ++i) {
      for (int64_t o = 0; o < m; ++o) y[i * ldy + o] += bias[o];
    }
  }
  // y (+)= a w: a is n x m, w is m x k.
  void Combine(const float* a, int64_t lda, const float* w, int64_t n, int64_t m, int64_t k,
               float* y, int64_t ldy, bool accumulate) const {
    if (ordered) {
      cpu::RowCombinations(a, lda, w, k, n, m, k, y, ldy, accumulate);
      return;
    }
    cpu::Gemm(false, false, n, k, m, 1.0f, a, lda, w, k, accumulate ? 1.0f : 0.0f, y, ldy);
  }
  // w (+)= a^T x: a is n x m, x is n x k, w is m x k.
  void Outer(const float* a, int64_t lda, const float* x, int64_t ldx, int64_t n, int64_t m,
             int64_t k, float* w, bool overwrite) const {
    if (ordered) {
      cpu::RowOuterSums(a, lda, x, ldx, n, m, k, w, k, overwrite);
      return;
    }
    cpu::Gemm(true, false, m, k, n, 1.0f, a, lda, x, ldx, overwrite ? 0.0f : 1.0f, w, k);
  }
};

// rows[i][t][c] = x[i][c][t] for n images of c x t, or the reverse.
void ToRows(const float* x, int64_t n, int64_t c, int64_t t, float* rows) {
#pragma omp parallel for schedule(static) if (n * c * t > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t s = 0; s < t; ++s) rows[(i * t + s) * c + ch] = x[(i * c + ch) * t + s];
    }
  }
}

void FromRows(const float* rows, int64_t n, int64_t c, int64_t t, float* x, bool accumulate) {
#pragma omp parallel for schedule(static) if (n * c * t > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t s = 0; s < t; ++s) {
        const float v = rows[(i * t + s) * c + ch];
        float& out = x[(i * c + ch) * t + s];
        out = accumulate ? out + v : v;
      }
    }
  }
}

class CpuRecurrentLayer : public RecurrentLayer {
 public:
  CpuRecurrentLayer(LayerParams& params, RecurrentCell cell) : RecurrentLayer(params, cell) {}

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n();
    float* reserve = args.aux[0].data();
    float* rows = static_cast<float*>(args.workspace.data);
    float* recurrent = rows + n * steps_ * features_;
    ToRows(args.inputs[0].data(), n, features_, steps_, rows);
    if (carry_ && !args.recompute) TakeCarriedStates(args, n);
    const float* initial = InitialStateRows(args);
    const Products products{args.slice.in_image_order()};
    const bool train = args.phase == Phase::kTrain;
    for (int64_t l = 0; l < layers_; ++l) {
      if (l > 0 && train && masks(l - 1)) MaskInputs(args, l - 1, n);
      for (int64_t d = 0; d < directions(); ++d) {
        ForwardDirection(args, products, l, d, n, rows, initial, recurrent);
      }
    }
    if (carry_ && !args.recompute) CarryFinalStates(args, n);
    if (final_) FinalStates(reserve, n, args.outputs[1].data(), states_per_image());
    const int64_t width = directions() * hidden_;
    const float* top = reserve + HiddenOffset(layers_ - 1);
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static) if (n * width * steps_ > (1 << 15))
    for (int64_t i = 0; i < n; ++i) {
      const float* h = top + i * reserve_per_image();
      for (int64_t u = 0; u < width; ++u) {
        for (int64_t t = 0; t < steps_; ++t) y[(i * width + u) * steps_ + t] = h[t * width + u];
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n();
    const int64_t width = directions() * hidden_, gh = gates() * hidden_;
    float* ws = static_cast<float*>(args.workspace.data);
    Scratch s;
    s.rows = ws;
    s.input_grads = s.rows + n * steps_ * features_;
    s.gate_grads = s.input_grads + n * steps_ * features_;
    const bool gru = cell_ == RecurrentCell::kGru;
    s.recurrent_grads = gru ? s.gate_grads + n * steps_ * gh : s.gate_grads;
    float* above = s.gate_grads + (gru ? 2 : 1) * n * steps_ * gh;
    float* below = above + n * steps_ * width;
    s.dh = below + n * steps_ * width;
    s.dc = s.dh + n * hidden_;
    ToRows(args.inputs[0].data(), n, features_, steps_, s.rows);
    if (args.output_grads[0].valid()) {
      ToRows(args.output_grads[0].data(), n, width, steps_, above);
    } else {  // only the final states are read
      std::fill_n(above, n * steps_ * width, 0.0f);
    }
    const Products products{args.slice.in_image_order()};
    for (int64_t l = layers_ - 1; l >= 0; --l) {
      const bool wants_inputs = l > 0 || args.input_grads[0].valid();
      float* inputs_grad = l > 0 ? below : s.input_grads;
      for (int64_t d = 0; d < directions(); ++d) {
        BackwardDirection(args, products, l, d, n, above, s);
        if (!wants_inputs) continue;
        const int64_t in = layer_inputs(l);
        products.Combine(s.gate_grads, gh, args.params[ParamIndex(l, d)].data(), n * steps_, gh, in,
                         inputs_grad, in, d > 0);
      }
      if (l > 0) {
        if (masks(l - 1)) UnmaskGradients(args.aux[0].data(), l - 1, n, below);
        std::swap(above, below);
      }
    }
    if (args.input_grads[0].valid()) {
      FromRows(s.input_grads, n, features_, steps_, args.input_grads[0].data(), args.accumulate[0]);
    }
  }

 private:
  // Backward's buffers in the workspace.
  struct Scratch {
    float* rows = nullptr;             // the input as N*T rows of features
    float* input_grads = nullptr;      // their gradient
    float* gate_grads = nullptr;       // N*T x gates*hidden, the input projection's
    float* recurrent_grads = nullptr;  // the recurrent projection's (GRU: its own)
    float* dh = nullptr;               // N x hidden, carried from step to step
    float* dc = nullptr;
  };

  // Image i's initial hidden states of layer l, direction d (its cell
  // states CellGap() floats further), or null when they are zero.
  const float* InitialStates(const float* initial, int64_t i, int64_t l, int64_t d) const {
    return initial == nullptr ? nullptr
                              : initial + i * states_per_image() + InitialHiddenOffset(l, d);
  }
  int64_t CellGap() const { return InitialCellOffset(0, 0) - InitialHiddenOffset(0, 0); }

  // The states the call's images start from, image after image
  // (states_per_image() apart), or null when they are zero.
  template <typename Args>
  const float* InitialStateRows(const Args& args) const {
    if (carry_) return args.aux[1].data();
    return initial_input_ ? args.inputs[1].data() : nullptr;
  }

  // Which phase wrote an image's carried states (the last float of its row).
  static float PhaseTag(Phase phase) { return phase == Phase::kTrain ? 1.0f : 2.0f; }

  // The states this batch starts from, saved in `initial`: the carried ones
  // where the same phase wrote them, else zeros.
  void TakeCarriedStates(const ForwardArgs& args, int64_t n) const {
    const float* state = args.params.back().data();
    float* initial = args.aux[1].data();
    const int64_t width = states_per_image(), row = width + 1;
    for (int64_t i = 0; i < n; ++i) {
      const float* carried = state + (args.slice.begin + i) * row;
      float* out = initial + i * width;
      if (carried[width] == PhaseTag(args.phase)) {
        std::copy_n(carried, width, out);
      } else {
        std::fill_n(out, width, 0.0f);
      }
    }
  }

  // The states after each layer and direction's last step, for the next batch.
  void CarryFinalStates(const ForwardArgs& args, int64_t n) const {
    const int64_t width = states_per_image(), row = width + 1;
    float* state = args.params.back().data() + args.slice.begin * row;
    FinalStates(args.aux[0].data(), n, state, row);
    for (int64_t i = 0; i < n; ++i) state[i * row + width] = PhaseTag(args.phase);
  }

  // Each image's states after each layer and direction's last step (the
  // reverse direction's at t = 0), at `states` + i * `row`.
  void FinalStates(const float* reserve, int64_t n, float* states, int64_t row) const {
    const int64_t hiddens = directions() * hidden_, sw = step_width();
    for (int64_t i = 0; i < n; ++i) {
      const float* image = reserve + i * reserve_per_image();
      float* out = states + i * row;
      for (int64_t l = 0; l < layers_; ++l) {
        for (int64_t d = 0; d < directions(); ++d) {
          const int64_t last = d == 0 ? steps_ - 1 : 0;
          std::copy_n(image + HiddenOffset(l) + last * hiddens + d * hidden_, hidden_,
                      out + InitialHiddenOffset(l, d));
          if (cell_ != RecurrentCell::kLstm) continue;
          std::copy_n(image + GatesOffset(l, d) + last * sw + 4 * hidden_, hidden_,
                      out + InitialCellOffset(l, d));
        }
      }
    }
  }

  // Dropout on the hidden states of layer l, the input of l + 1: the mask is
  // drawn at each element's place in the whole batch, once (a recomputation
  // reuses it).
  void MaskInputs(const ForwardArgs& args, int64_t l, int64_t n) const {
    float* reserve = args.aux[0].data();
    const int64_t count = steps_ * directions() * hidden_;
    const float keep = 1.0f / (1.0f - dropout_);
    const uint64_t seed = args.seed;
#pragma omp parallel for schedule(static) if (n * count > (1 << 15))
    for (int64_t i = 0; i < n; ++i) {
      float* image = reserve + i * reserve_per_image();
      float* mask = image + MaskOffset(l);
      const float* h = image + HiddenOffset(l);
      float* masked = image + MaskedOffset(l);
      const uint64_t first = static_cast<uint64_t>(((args.slice.begin + i) * layers_ + l) * count);
      for (int64_t e = 0; e < count; ++e) {
        if (!args.recompute) mask[e] = UniformAt(seed, first + e) < dropout_ ? 0.0f : keep;
        masked[e] = h[e] * mask[e];
      }
    }
  }

  void UnmaskGradients(const float* reserve, int64_t l, int64_t n, float* grads) const {
    const int64_t count = steps_ * directions() * hidden_;
    for (int64_t i = 0; i < n; ++i) {
      const float* mask = reserve + i * reserve_per_image() + MaskOffset(l);
      for (int64_t e = 0; e < count; ++e) grads[i * count + e] *= mask[e];
    }
  }

  void ForwardDirection(const ForwardArgs& args, const Products& products, int64_t l, int64_t d,
                        int64_t n, const float* rows, const float* initial,
                        float* recurrent) const {
    float* reserve = args.aux[0].data();
    const int64_t stride = reserve_per_image(), width = directions() * hidden_;
    const int64_t gh = gates() * hidden_, sw = step_width(), in = layer_inputs(l);
    const int64_t p = ParamIndex(l, d);
    const float* w_ih = args.params[p].data();
    const float* w_hh = args.params[p + 1].data();
    const float* b_ih = bias_ ? args.params[p + 2].data() : nullptr;
    const float* b_hh = bias_ ? args.params[p + 3].data() : nullptr;
    const bool train = args.phase == Phase::kTrain;
    const int64_t gates_at = GatesOffset(l, d), hidden_at = HiddenOffset(l) + d * hidden_;
    for (int64_t i = 0; i < n; ++i) {  // the input projection of every step
      products.Dots(InputRows(reserve, rows, l, i, train), in, w_ih, steps_, gh, in, b_ih,
                    reserve + i * stride + gates_at, sw);
    }
    for (int64_t s = 0; s < steps_; ++s) {
      const int64_t t = d == 0 ? s : steps_ - 1 - s;
      const int64_t prev = d == 0 ? t - 1 : t + 1;
      if (s == 0 && initial != nullptr) {  // from the carried states
        products.Dots(initial + InitialHiddenOffset(l, d), states_per_image(), w_hh, n, gh, hidden_,
                      b_hh, recurrent, gh);
      } else if (s == 0) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t o = 0; o < gh; ++o) recurrent[i * gh + o] = b_hh != nullptr ? b_hh[o] : 0;
        }
      } else {
        products.Dots(reserve + hidden_at + prev * width, stride, w_hh, n, gh, hidden_, b_hh,
                      recurrent, gh);
      }
      const int h = static_cast<int>(hidden_);
#pragma omp parallel for schedule(static) if (n * hidden_ > (1 << 12))
      for (int64_t i = 0; i < n; ++i) {
        float* image = reserve + i * stride;
        float* saved = image + gates_at + t * sw;
        const float* hh = recurrent + i * gh;
        float* out = image + hidden_at + t * width;
        const float* start = InitialStates(initial, i, l, d);
        for (int64_t j = 0; j < hidden_; ++j) {
          if (cell_ == RecurrentCell::kLstm) {
            const float c_prev = s > 0              ? image[gates_at + prev * sw + 4 * hidden_ + j]
                                 : start != nullptr ? start[CellGap() + j]
                                                    : 0.0f;
            out[j] = LstmForward(saved + j, hh + j, h, c_prev, saved + j);
          } else {
            const float h_prev = s > 0              ? image[hidden_at + prev * width + j]
                                 : start != nullptr ? start[j]
                                                    : 0.0f;
            out[j] = GruForward(saved + j, hh + j, h, h_prev, saved + j);
          }
        }
      }
    }
  }

  // The gate gradients of every step of layer l, direction d (from `above`,
  // the gradient of the layer's output rows), then its weight gradients.
  void BackwardDirection(const BackwardArgs& args, const Products& products, int64_t l, int64_t d,
                         int64_t n, const float* above, const Scratch& s) const {
    const float* reserve = args.aux[0].data();
    const int64_t stride = reserve_per_image(), width = directions() * hidden_;
    const int64_t gh = gates() * hidden_, sw = step_width();
    const int64_t p = ParamIndex(l, d);
    const float* w_hh = args.params[p + 1].data();
    const int64_t gates_at = GatesOffset(l, d), hidden_at = HiddenOffset(l) + d * hidden_;
    const bool lstm = cell_ == RecurrentCell::kLstm;
    const float* initial = InitialStateRows(args);
    const bool initial_grads = initial_input_ && args.input_grads[1].valid();
    SeedStateGradients(args, l, d, n, s);
    const int h = static_cast<int>(hidden_);
    for (int64_t step = steps_ - 1; step >= 0; --step) {
      const int64_t t = d == 0 ? step : steps_ - 1 - step;
      const int64_t prev = d == 0 ? t - 1 : t + 1;
#pragma omp parallel for schedule(static) if (n * hidden_ > (1 << 12))
      for (int64_t i = 0; i < n; ++i) {
        const float* image = reserve + i * stride;
        const float* saved = image + gates_at + t * sw;
        float* dg = s.gate_grads + (i * steps_ + t) * gh;
        float* dr = s.recurrent_grads + (i * steps_ + t) * gh;
        const float* start = InitialStates(initial, i, l, d);
        for (int64_t j = 0; j < hidden_; ++j) {
          const float dh =
              above[(i * steps_ + t) * width + d * hidden_ + j] + s.dh[i * hidden_ + j];
          if (lstm) {
            const float c_prev = step > 0           ? image[gates_at + prev * sw + 4 * hidden_ + j]
                                 : start != nullptr ? start[CellGap() + j]
                                                    : 0.0f;
            LstmBackward(saved + j, h, c_prev, dh, s.dc + i * hidden_ + j, dg + j);
          } else {
            const float h_prev = step > 0           ? image[hidden_at + prev * width + j]
                                 : start != nullptr ? start[j]
                                                    : 0.0f;
            s.dh[i * hidden_ + j] = GruBackward(saved + j, h, h_prev, dh, dg + j, dr + j);
          }
        }
      }
      if (step > 0 || initial_grads) {  // the gradient reaching the state before the step
        products.Combine(s.recurrent_grads + t * gh, steps_ * gh, w_hh, n, gh, hidden_, s.dh,
                         hidden_, !lstm);
      }
    }
    if (initial_grads) StoreInitialGradients(args, l, d, n, s);
    WeightGradients(args, products, l, d, n, s);
  }

  // dh and dc after the last step that layer l, direction d takes: the
  // gradient of its final states (final: true), else zero.
  void SeedStateGradients(const BackwardArgs& args, int64_t l, int64_t d, int64_t n,
                          const Scratch& s) const {
    const bool given = final_ && args.output_grads.size() > 1 && args.output_grads[1].valid();
    const bool lstm = cell_ == RecurrentCell::kLstm;
    for (int64_t i = 0; i < n; ++i) {
      float* dh = s.dh + i * hidden_;
      float* dc = s.dc + i * hidden_;
      if (!given) {
        std::fill_n(dh, hidden_, 0.0f);
        std::fill_n(dc, hidden_, 0.0f);
        continue;
      }
      const float* grads = args.output_grads[1].data() + i * states_per_image();
      std::copy_n(grads + InitialHiddenOffset(l, d), hidden_, dh);
      if (lstm) {
        std::copy_n(grads + InitialCellOffset(l, d), hidden_, dc);
      } else {
        std::fill_n(dc, hidden_, 0.0f);
      }
    }
  }

  // The gradient of layer l, direction d's initial states (dh and dc before
  // its first step) into the second input's gradient, added when asked.
  void StoreInitialGradients(const BackwardArgs& args, int64_t l, int64_t d, int64_t n,
                             const Scratch& s) const {
    const bool add = args.accumulate.size() > 1 && args.accumulate[1];
    auto store = [&](const float* from, float* to) {
      for (int64_t j = 0; j < hidden_; ++j) to[j] = add ? to[j] + from[j] : from[j];
    };
    float* grads = args.input_grads[1].data();
    for (int64_t i = 0; i < n; ++i) {
      float* image = grads + i * states_per_image();
      store(s.dh + i * hidden_, image + InitialHiddenOffset(l, d));
      if (cell_ == RecurrentCell::kLstm) store(s.dc + i * hidden_, image + InitialCellOffset(l, d));
    }
  }

  // Image by image in batch order, from the earlier slices' sums.
  void WeightGradients(const BackwardArgs& args, const Products& products, int64_t l, int64_t d,
                       int64_t n, const Scratch& s) const {
    const float* reserve = args.aux[0].data();
    const int64_t gh = gates() * hidden_, in = layer_inputs(l), width = directions() * hidden_;
    const int64_t p = ParamIndex(l, d);
    const int64_t hidden_at = HiddenOffset(l) + d * hidden_;
    const float* initial = InitialStateRows(args);
    for (int64_t i = 0; i < n; ++i) {
      const bool overwrite = args.slice.first() && i == 0;
      const float* dg = s.gate_grads + i * steps_ * gh;
      const float* dr = s.recurrent_grads + i * steps_ * gh;
      if (args.param_grads[p].valid()) {
        products.Outer(dg, gh, InputRows(reserve, s.rows, l, i, true), in, steps_, gh, in,
                       args.param_grads[p].data(), overwrite);
      }
      if (args.param_grads[p + 1].valid()) {  // step t's gates with the state before it
        const float* states = reserve + i * reserve_per_image() + hidden_at;
        const float* gates_after = d == 0 ? dr + gh : dr;
        const float* states_before = d == 0 ? states : states + width;
        products.Outer(gates_after, gh, states_before, width, steps_ - 1, gh, hidden_,
                       args.param_grads[p + 1].data(), overwrite);
        if (initial != nullptr) {  // the first step's gates with the initial states
          const float* first_step = dr + (d == 0 ? 0 : (steps_ - 1) * gh);
          products.Outer(first_step, gh, InitialStates(initial, i, l, d), hidden_, 1, gh, hidden_,
                         args.param_grads[p + 1].data(), false);
        }
      }
      if (!bias_) continue;
      for (int k = 0; k < 2; ++k) {
        if (!args.param_grads[p + 2 + k].valid()) continue;
        float* db = args.param_grads[p + 2 + k].data();
        const float* grads = k == 0 ? dg : dr;
        if (overwrite) std::fill_n(db, gh, 0.0f);
        for (int64_t t = 0; t < steps_; ++t) {
          for (int64_t o = 0; o < gh; ++o) db[o] += grads[t * gh + o];
        }
      }
    }
  }
};

using CpuLstmLayer = RecurrentCellLayer<CpuRecurrentLayer, RecurrentCell::kLstm>;
using CpuGruLayer = RecurrentCellLayer<CpuRecurrentLayer, RecurrentCell::kGru>;

}  // namespace

SPILL_REGISTER_LAYER(lstm, kCpu, CpuLstmLayer);
SPILL_REGISTER_LAYER(gru, kCpu, CpuGruLayer);

}  // namespace spill
