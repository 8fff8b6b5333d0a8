// lstm and gru on the GPU, in the CPU layer's structure
// (layers/cpu/recurrent_cpu.cc) with its reserve and workspace layouts:
// each layer and direction projects the whole input sequence (x W_ih^T, one
// cuBLAS call per image into the reserve's gate slots), then steps through
// time: the recurrent product h_prev W_hh^T into the workspace and one
// kernel applying the cell's formulas (layers/recurrent_math.h) per (image,
// unit), which also adds both biases. Backward walks time the other way,
// keeping the gate gradients of every step and carrying dh through
// dG_t W_hh, then forms the weight gradients image by image in batch order
// (the step's first image overwriting, every later one adding: beta 0, then
// 1), the bias gradients summed row after row, and the input gradient.
//
// The products run on the device's cuBLAS handle (CUBLAS_PEDANTIC_MATH:
// plain float32, no TF32). By default the recurrent products and the input
// gradient are one GEMM over the batch; when BatchSlice::in_image_order (a
// slice of the batch, or an algorithm pinned) every product is one call per
// image, so that a step over slices makes the calls of the step over the
// whole batch and gives its bits. The workspace is laid out for the whole
// batch (its declared size) and a slice uses its images' places in it, so
// each image's buffers have the same addresses - and alignments, which
// cuBLAS chooses its kernels by - in a slice as in the whole batch.
//
// cuBLAS is column-major: a row-major R x C matrix with row stride ld is, to
// cuBLAS, its C x R transpose with leading dimension ld (see RowProducts).
#include <climits>
#include <utility>

#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/recurrent_kernels_cuda.h"
#include "layers/recurrent_layers.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

int AsInt(int64_t v, const char* what) {
  SPILL_CHECK(v >= 0 && v <= INT_MAX) << what << " (" << v << ") exceeds cuBLAS's int range";
  return static_cast<int>(v);
}

// The CPU layer's three products (its Products) as cuBLAS SGEMMs on
// row-major matrices; `w` is always a dense parameter (its row stride is
// its row length). Row-major y (n x m, ld) is column-major y^T (m x n, ld).
class RowProducts {
 public:
  RowProducts(cublasHandle_t handle, bool by_image) : handle_(handle), by_image_(by_image) {}

  bool by_image() const { return by_image_; }

  // Calls f(first, count) on images [first, first + count): once over all n,
  // or once per image in order when by_image.
  template <typename F>
  void OverImages(int64_t n, F f) const {
    if (!by_image_) {
      f(int64_t{0}, n);
      return;
    }
    for (int64_t i = 0; i < n; ++i) f(i, int64_t{1});
  }

  // y = x w^T + beta y: x is n x k (ldx), w is m x k, y is n x m (ldy).
  // Column-major: y^T (m x n) = w (m x k, read as w^T: k x m, ld k,
  // transposed) * x^T (k x n, ld ldx).
  void Dots(int64_t n, int64_t m, int64_t k, const float* x, int64_t ldx, const float* w, float* y,
            int64_t ldy, float beta) const {
    const float one = 1.0f;
    SPILL_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, AsInt(m, "rows of w"),
                                   AsInt(n, "rows"), AsInt(k, "inner size"), &one, w, AsInt(k, "k"),
                                   x, AsInt(ldx, "x's row stride"), &beta, y,
                                   AsInt(ldy, "y's row stride")));
  }

  // y = a w + beta y: a is n x m (lda), w is m x k, y is n x k (ldy).
  // Column-major: y^T (k x n) = w^T (k x m, ld k) * a^T (m x n, ld lda).
  void Combine(int64_t n, int64_t m, int64_t k, const float* a, int64_t lda, const float* w,
               float* y, int64_t ldy, float beta) const {
    const float one = 1.0f;
    SPILL_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, AsInt(k, "columns of w"),
                                   AsInt(n, "rows"), AsInt(m, "inner size"), &one, w, AsInt(k, "k"),
                                   a, AsInt(lda, "a's row stride"), &beta, y,
                                   AsInt(ldy, "y's row stride")));
  }

  // w = a^T x + beta w: a is n x m (lda), x is n x k (ldx), w is m x k.
  // Column-major: w^T (k x m, ld k) = x^T (k x n, ld ldx) * a (a^T: m x n,
  // ld lda, transposed).
  void Outer(int64_t n, int64_t m, int64_t k, const float* a, int64_t lda, const float* x,
             int64_t ldx, float* w, float beta) const {
    const float one = 1.0f;
    SPILL_CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, AsInt(k, "columns of w"),
                                   AsInt(m, "rows of w"), AsInt(n, "rows"), &one, x,
                                   AsInt(ldx, "x's row stride"), a, AsInt(lda, "a's row stride"),
                                   &beta, w, AsInt(k, "k")));
  }

 private:
  cublasHandle_t handle_;
  bool by_image_;
};

class CudaRecurrentLayer : public RecurrentLayer {
 public:
  CudaRecurrentLayer(LayerParams& params, RecurrentCell cell) : RecurrentLayer(params, cell) {}

  bool supports_slices() const override { return true; }

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    if (carries()) {
      return InvalidArgument(
          "carry: true (states carried from batch to batch) runs on the CPU device; on CUDA "
          "every batch starts from zero states (carry: false)");
    }
    if (takes_initial_states()) {
      return InvalidArgument(
          "initial: input (initial states read from a second input) runs on the CPU device; on "
          "CUDA every sequence starts from zero states (initial: zeros)");
    }
    if (gives_final_states()) {
      return InvalidArgument(
          "final: true (the final states as a second output) runs on the CPU device; on CUDA the "
          "layer has its sequence output only (final: false)");
    }
    return RecurrentLayer::Reshape(inputs, outputs);
  }

  void Forward(const ForwardArgs& args) const override {
    const Shape& x = args.inputs[0].shape();
    const int64_t n = x.n();
    CheckSequence(x);
    if (n == 0) return;
    CudaDevice& device = cuda::DeviceOf(args.device);
    cudaStream_t stream = device.compute_stream();
    // The workspace: the input rows (N*T x features), the recurrent product
    // of one step (N x gates*hidden).
    const Placement place = Place(args.slice, n, args.workspace, Pass::kForward);
    float* ws = static_cast<float*>(args.workspace.data);
    float* rows = ws + place.first * steps_ * features_;
    float* recurrent = ws + place.images * steps_ * features_ + place.first * gates() * hidden_;
    cuda::LaunchSequenceToRows(n, features_, steps_, args.inputs[0].data(), rows, stream);
    SPILL_CUDA_CHECK_LAUNCH();
    const RowProducts products(device.cublas(), args.slice.in_image_order());
    const bool train = args.phase == Phase::kTrain;
    for (int64_t l = 0; l < layers_; ++l) {
      if (l > 0 && train && masks(l - 1)) MaskInputs(args, l - 1, n, stream);
      for (int64_t d = 0; d < directions(); ++d) {
        ForwardDirection(args, products, l, d, n, rows, recurrent, stream);
      }
    }
    // y[i][u][t] = the top layer's hidden state u at step t.
    cuda::LaunchRowsToSequence(n, directions() * hidden_, steps_,
                               args.aux[0].data() + HiddenOffset(layers_ - 1), reserve_per_image(),
                               args.outputs[0].data(), false, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const int64_t n = args.output_grads[0].shape().n();
    CheckSequence(args.inputs[0].shape());
    if (n == 0) return;
    CudaDevice& device = cuda::DeviceOf(args.device);
    cudaStream_t stream = device.compute_stream();
    const int64_t width = directions() * hidden_, gh = gates() * hidden_;
    const bool gru = cell_ == RecurrentCell::kGru;
    // The CPU's buffers in its order, each `place.images` images long.
    const Placement place = Place(args.slice, n, args.workspace, Pass::kBackward);
    float* next = static_cast<float*>(args.workspace.data);
    auto take = [&](int64_t per_image) {
      float* mine = next + place.first * per_image;
      next += place.images * per_image;
      return mine;
    };
    Scratch s;
    s.rows = take(steps_ * features_);
    s.input_grads = take(steps_ * features_);
    s.gate_grads = take(steps_ * gh);
    s.recurrent_grads = gru ? take(steps_ * gh) : s.gate_grads;
    float* above = take(steps_ * width);
    float* below = take(steps_ * width);
    s.dh = take(hidden_);
    s.dc = take(hidden_);
    cuda::LaunchSequenceToRows(n, features_, steps_, args.inputs[0].data(), s.rows, stream);
    SPILL_CUDA_CHECK_LAUNCH();
    cuda::LaunchSequenceToRows(n, width, steps_, args.output_grads[0].data(), above, stream);
    SPILL_CUDA_CHECK_LAUNCH();
    const RowProducts products(device.cublas(), args.slice.in_image_order());
    float* dx = cuda::InputGrad(args, 0);
    for (int64_t l = layers_ - 1; l >= 0; --l) {
      const bool wants_inputs = l > 0 || dx != nullptr;
      float* inputs_grad = l > 0 ? below : s.input_grads;
      const int64_t in = layer_inputs(l);
      for (int64_t d = 0; d < directions(); ++d) {
        BackwardDirection(args, products, l, d, n, above, s, stream);
        if (!wants_inputs) continue;
        // The gradient of the layer's input rows: gate grads (N*T x gh) times
        // W_ih (gh x in), the second direction adding.
        const float* w_ih = args.params[ParamIndex(l, d)].data();
        const float beta = d > 0 ? 1.0f : 0.0f;
        products.OverImages(n, [&](int64_t i, int64_t count) {
          products.Combine(count * steps_, gh, in, s.gate_grads + i * steps_ * gh, gh, w_ih,
                           inputs_grad + i * steps_ * in, in, beta);
        });
      }
      if (l > 0) {
        if (masks(l - 1)) {
          cuda::LaunchRecurrentUnmask(n, steps_ * width, args.aux[0].data(), reserve_per_image(),
                                      MaskOffset(l - 1), below, stream);
          SPILL_CUDA_CHECK_LAUNCH();
        }
        std::swap(above, below);
      }
    }
    if (dx != nullptr) {
      cuda::LaunchRowsToSequence(n, features_, steps_, s.input_grads, steps_ * features_, dx,
                                 cuda::Accumulates(args, 0), stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }

 private:
  // Backward's buffers in the workspace, at the call's first image.
  struct Scratch {
    float* rows = nullptr;             // the input as N*T rows of features
    float* input_grads = nullptr;      // their gradient
    float* gate_grads = nullptr;       // N*T x gates*hidden, the input projection's
    float* recurrent_grads = nullptr;  // the recurrent projection's (GRU: its own)
    float* dh = nullptr;               // N x hidden, carried from step to step
    float* dc = nullptr;
  };

  // Where a call's images sit in the workspace: at their places in the
  // whole batch's layout (`images` images long, the call's first at
  // `first`) when the workspace holds it - it does, being declared for the
  // batch - else, defensively, the call's own layout.
  struct Placement {
    int64_t images = 0;
    int64_t first = 0;
  };

  Placement Place(const BatchSlice& slice, int64_t n, const Workspace& workspace, Pass pass) const {
    auto fits = [&](int64_t images) {
      const int64_t floats =
          pass == Pass::kForward ? ForwardWorkspace(images) : BackwardWorkspace(images);
      return workspace.data != nullptr &&
             workspace.bytes >= static_cast<size_t>(floats) * sizeof(float);
    };
    const int64_t total = slice.total(n);
    if (slice.begin >= 0 && slice.begin + n <= total && fits(total)) return {total, slice.begin};
    SPILL_CHECK(fits(n)) << name() << ": a workspace of " << workspace.bytes
                         << " bytes is too small for " << n << " images";
    return {n, 0};
  }

  // The layer computes with the shape it was given (the reserve's layout
  // depends on it); a slice differs in images only.
  void CheckSequence(const Shape& x) const {
    SPILL_CHECK(x.c() == features_ && x.h() == 1 && x.w() == steps_)
        << name() << ": shaped for " << features_ << " features x " << steps_ << " steps, got "
        << x.ToString();
  }

  // One step's kernel arguments for layer l, direction d (t and the flags
  // set per step).
  cuda::RecurrentStepShape StepShape(int64_t l, int64_t d, int64_t n) const {
    cuda::RecurrentStepShape s;
    s.lstm = cell_ == RecurrentCell::kLstm;
    s.images = n;
    s.hidden = hidden_;
    s.steps = steps_;
    s.directions = directions();
    s.direction = d;
    s.reserve_stride = reserve_per_image();
    s.gates_at = GatesOffset(l, d);
    s.hidden_at = HiddenOffset(l) + d * hidden_;
    return s;
  }

  // Dropout on the hidden states of layer l, the input of l + 1: the mask is
  // drawn at each element's place in the whole batch, once (a recomputation
  // reuses it).
  void MaskInputs(const ForwardArgs& args, int64_t l, int64_t n, cudaStream_t stream) const {
    cuda::RecurrentDropoutShape s;
    s.images = n;
    s.count = steps_ * directions() * hidden_;
    s.reserve_stride = reserve_per_image();
    s.hidden_at = HiddenOffset(l);
    s.mask_at = MaskOffset(l);
    s.masked_at = MaskedOffset(l);
    s.first_image = args.slice.begin;
    s.layers = layers_;
    s.layer = l;
    s.ratio = dropout_;
    s.keep = 1.0f / (1.0f - dropout_);
    s.seed = args.seed;
    s.draw = !args.recompute;
    cuda::LaunchRecurrentDropout(s, args.aux[0].data(), stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void ForwardDirection(const ForwardArgs& args, const RowProducts& products, int64_t l, int64_t d,
                        int64_t n, const float* rows, float* recurrent, cudaStream_t stream) const {
    float* reserve = args.aux[0].data();
    const int64_t stride = reserve_per_image(), width = directions() * hidden_;
    const int64_t gh = gates() * hidden_, sw = step_width(), in = layer_inputs(l);
    const int64_t p = ParamIndex(l, d);
    const float* w_ih = args.params[p].data();
    const float* w_hh = args.params[p + 1].data();
    const float* b_ih = bias_ ? args.params[p + 2].data() : nullptr;
    const float* b_hh = bias_ ? args.params[p + 3].data() : nullptr;
    const bool train = args.phase == Phase::kTrain;
    cuda::RecurrentStepShape s = StepShape(l, d, n);
    // The input projection of every step (T x gh per image, rows sw apart in
    // the reserve); the step kernel adds b_ih.
    for (int64_t i = 0; i < n; ++i) {
      products.Dots(steps_, gh, in, InputRows(reserve, rows, l, i, train), in, w_ih,
                    reserve + i * stride + s.gates_at, sw, 0.0f);
    }
    for (int64_t step = 0; step < steps_; ++step) {
      const int64_t t = d == 0 ? step : steps_ - 1 - step;
      const int64_t prev = d == 0 ? t - 1 : t + 1;
      if (step > 0) {  // h_prev (N rows, a reserve apart) times W_hh^T; b_hh in the kernel
        const float* h_prev = reserve + s.hidden_at + prev * width;
        products.OverImages(n, [&](int64_t i, int64_t count) {
          products.Dots(count, gh, hidden_, h_prev + i * stride, stride, w_hh, recurrent + i * gh,
                        gh, 0.0f);
        });
      }
      s.t = t;
      s.prev = prev;
      s.has_prev = step > 0;
      cuda::LaunchRecurrentForwardStep(s, reserve, recurrent, b_ih, b_hh, stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }

  // The gate gradients of every step of layer l, direction d (from `above`,
  // the gradient of the layer's output rows), then its weight gradients.
  void BackwardDirection(const BackwardArgs& args, const RowProducts& products, int64_t l,
                         int64_t d, int64_t n, const float* above, const Scratch& scratch,
                         cudaStream_t stream) const {
    const float* reserve = args.aux[0].data();
    const int64_t gh = gates() * hidden_;
    const float* w_hh = args.params[ParamIndex(l, d) + 1].data();
    const bool lstm = cell_ == RecurrentCell::kLstm;
    cuda::RecurrentStepShape s = StepShape(l, d, n);
    for (int64_t step = steps_ - 1; step >= 0; --step) {
      const int64_t t = d == 0 ? step : steps_ - 1 - step;
      s.t = t;
      s.prev = d == 0 ? t - 1 : t + 1;
      s.has_prev = step > 0;
      s.carried = step < steps_ - 1;
      cuda::LaunchRecurrentBackwardStep(s, reserve, above, scratch.dh, scratch.dc,
                                        scratch.gate_grads, scratch.recurrent_grads, stream);
      SPILL_CUDA_CHECK_LAUNCH();
      if (step > 0) {  // the gradient reaching the previous step's hidden state
        // dh (=|+=) dG_t (N rows, T*gh apart) times W_hh (gh x hidden): the
        // LSTM's replaces dh, the GRU's adds to the kernel's dh z.
        const float beta = lstm ? 0.0f : 1.0f;
        products.OverImages(n, [&](int64_t i, int64_t count) {
          products.Combine(count, gh, hidden_, scratch.recurrent_grads + i * steps_ * gh + t * gh,
                           steps_ * gh, w_hh, scratch.dh + i * hidden_, hidden_, beta);
        });
      }
    }
    WeightGradients(args, products, l, d, n, scratch, stream);
  }

  // Image by image in batch order, from the earlier slices' sums: the
  // step's first image overwrites (beta 0), every later one adds (beta 1).
  void WeightGradients(const BackwardArgs& args, const RowProducts& products, int64_t l, int64_t d,
                       int64_t n, const Scratch& scratch, cudaStream_t stream) const {
    const float* reserve = args.aux[0].data();
    const int64_t gh = gates() * hidden_, in = layer_inputs(l), width = directions() * hidden_;
    const int64_t p = ParamIndex(l, d);
    const int64_t hidden_at = HiddenOffset(l) + d * hidden_;
    float* dw_ih = cuda::ParamGrad(args, p);
    float* dw_hh = cuda::ParamGrad(args, p + 1);
    for (const ImageCall& c : ImageCalls(args.slice, n)) {
      const float beta = c.first ? 0.0f : 1.0f;
      const float* dg = scratch.gate_grads + c.index * steps_ * gh;
      const float* dr = scratch.recurrent_grads + c.index * steps_ * gh;
      if (dw_ih != nullptr) {  // dW_ih (gh x in) (+)= dG^T (T x gh) * input rows (T x in)
        products.Outer(steps_, gh, in, dg, gh, InputRows(reserve, scratch.rows, l, c.index, true),
                       in, dw_ih, beta);
      }
      if (dw_hh == nullptr) continue;
      if (steps_ > 1) {  // step t's gates with the state before it: T - 1 rows
        const float* states = reserve + c.index * reserve_per_image() + hidden_at;
        const float* gates_after = d == 0 ? dr + gh : dr;
        const float* states_before = d == 0 ? states : states + width;
        products.Outer(steps_ - 1, gh, hidden_, gates_after, gh, states_before, width, dw_hh, beta);
      } else if (c.first) {  // one step: no state before it, so nothing to add
        SPILL_CUDA_CHECK(
            cudaMemsetAsync(dw_hh, 0, static_cast<size_t>(gh * hidden_) * sizeof(float), stream));
      }
    }
    if (!bias_) return;
    for (int k = 0; k < 2; ++k) {
      float* db = cuda::ParamGrad(args, p + 2 + k);
      if (db == nullptr) continue;
      // Every image's every step added in order, from the earlier slices' sum.
      cuda::LaunchColumnSumsInOrder(n * steps_, gh,
                                    k == 0 ? scratch.gate_grads : scratch.recurrent_grads, db,
                                    !args.slice.first(), stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }
};

using CudaLstmLayer = RecurrentCellLayer<CudaRecurrentLayer, RecurrentCell::kLstm>;
using CudaGruLayer = RecurrentCellLayer<CudaRecurrentLayer, RecurrentCell::kGru>;

}  // namespace

SPILL_REGISTER_LAYER(lstm, kCuda, CudaLstmLayer);
SPILL_REGISTER_LAYER(gru, kCuda, CudaGruLayer);

}  // namespace spill
