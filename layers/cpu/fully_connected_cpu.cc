// Fully connected on the CPU: GEMMs (Eigen) by default, and kernels whose
// every output element is summed in one fixed order that does not depend on
// how many images a call holds - y as one dot product per element, dx over
// the outputs, dW and db image by image in batch order (from the earlier
// slices' value) - when the step runs over slices of the batch
// (memory.chunk) or an algorithm is pinned (BatchSlice::in_image_order). So
// a sliced step gives the bits of the whole batch, which a GEMM - whose
// blocking depends on the batch - would not; the GEMMs are 2-3x faster in
// backward.
#include <algorithm>
#include <cstring>
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/cpu/cpu_math.h"
#include "layers/fully_connected_layer.h"

namespace spill {
namespace {

// Inputs per tile of the gradients: a tile of every image stays in cache
// while the outputs sweep over it.
constexpr int64_t kTile = 256;
// Forward computes blocks of kRows images x kCols outputs, each dot product
// in kLanes partial sums: registers hold the whole block.
constexpr int kLanes = 8;
constexpr int kRows = 2;
constexpr int kCols = 4;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// out[r][c] = x[r] . w[c] over len inputs. Every dot product of the layer
// goes through this one function (a partial block repeats its last row or
// column), so each is the same sequence of operations wherever it falls.
void DotBlock(const float* const* x, const float* const* w, int64_t len, float out[kRows][kCols]) {
  Lanes acc[kRows][kCols] = {};
  int64_t j = 0;
  for (; j + kLanes <= len; j += kLanes) {
    Lanes wv[kCols];
    for (int c = 0; c < kCols; ++c) std::memcpy(&wv[c], w[c] + j, sizeof(Lanes));
    for (int r = 0; r < kRows; ++r) {
      Lanes xv;
      std::memcpy(&xv, x[r] + j, sizeof(Lanes));
      for (int c = 0; c < kCols; ++c) acc[r][c] += xv * wv[c];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      float tail = 0;
      for (int64_t q = j; q < len; ++q) tail += x[r][q] * w[c][q];
      const Lanes& a = acc[r][c];
      out[r][c] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])) + tail;
    }
  }
}

// y[j] += a * x[j]
inline void Axpy(float a, const float* x, float* y, int64_t len) {
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) y[j] += a * x[j];
}

class CpuFullyConnectedLayer : public FullyConnectedLayer {
 public:
  using FullyConnectedLayer::FullyConnectedLayer;

  bool supports_slices() const override { return true; }
  size_t slice_sums(Pass pass) const override {
    return pass == Pass::kBackward && bias_ ? static_cast<size_t>(outputs_) : 0;
  }

  // y = x W^T + b, each y[i][o] one DotBlock dot product.
  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n(), k = in_features_, m = outputs_;
    const float* x = args.inputs[0].data();
    const float* w = args.params[0].data();
    const float* b = bias_ ? args.params[1].data() : nullptr;
    float* y = args.outputs[0].data();
    if (!args.slice.in_image_order()) {
      cpu::Gemm(false, true, n, m, k, 1.0f, x, k, w, k, 0.0f, y, m);
      for (int64_t i = 0; i < n && b != nullptr; ++i) {
        for (int64_t j = 0; j < m; ++j) y[i * m + j] += b[j];
      }
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t o0 = 0; o0 < m; o0 += kCols) {
      const float* rows_w[kCols];
      for (int c = 0; c < kCols; ++c) rows_w[c] = w + std::min(o0 + c, m - 1) * k;
      for (int64_t i0 = 0; i0 < n; i0 += kRows) {
        const float* rows_x[kRows];
        for (int r = 0; r < kRows; ++r) rows_x[r] = x + std::min(i0 + r, n - 1) * k;
        float out[kRows][kCols];
        DotBlock(rows_x, rows_w, k, out);
        for (int r = 0; r < kRows && i0 + r < n; ++r) {
          for (int c = 0; c < kCols && o0 + c < m; ++c) {
            y[(i0 + r) * m + o0 + c] = b != nullptr ? out[r][c] + b[o0 + c] : out[r][c];
          }
        }
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const int64_t n = args.output_grads[0].shape().n(), k = in_features_, m = outputs_;
    const float* dy = args.output_grads[0].data();
    const bool first = args.slice.first();
    if (args.param_grads[0].valid()) FilterGradient(args.inputs[0].data(), dy, n, first, args);
    if (bias_ && args.param_grads[1].valid()) {
      std::vector<double> local;
      double* sums = SliceSums(args.slice, m, &local);
      float* db = args.param_grads[1].data();
      for (int64_t j = 0; j < m; ++j) {
        double sum = sums[j];
        for (int64_t i = 0; i < n; ++i) sum += dy[i * m + j];
        sums[j] = sum;
        db[j] = static_cast<float>(sum);
      }
    }
    if (args.input_grads[0].valid() && !args.slice.in_image_order()) {  // dx = dy W
      cpu::Gemm(false, false, n, k, m, 1.0f, dy, m, args.params[0].data(), k,
                args.accumulate[0] ? 1.0f : 0.0f, args.input_grads[0].data(), k);
    } else if (args.input_grads[0].valid()) {  // each dx[i][c] summed over the outputs
      const float* w = args.params[0].data();
      float* dx = args.input_grads[0].data();
      const bool accumulate = args.accumulate[0];
      const int64_t tiles = (k + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
      for (int64_t tile = 0; tile < tiles; ++tile) {
        const int64_t t = tile * kTile, len = std::min(kTile, k - t);
        for (int64_t i = 0; i < n && !accumulate; ++i) std::fill_n(dx + i * k + t, len, 0.0f);
        for (int64_t o = 0; o < m; ++o) {
          for (int64_t i = 0; i < n; ++i) Axpy(dy[i * m + o], w + o * k + t, dx + i * k + t, len);
        }
      }
    }
  }

 private:
  // dW = dy^T x, image by image from the earlier slices' sum.
  void FilterGradient(const float* x, const float* dy, int64_t n, bool first,
                      const BackwardArgs& args) const {
    const int64_t k = in_features_, m = outputs_;
    float* dw = args.param_grads[0].data();
    if (!args.slice.in_image_order()) {  // dW = dy^T x
      cpu::Gemm(true, false, m, k, n, 1.0f, dy, m, x, k, 0.0f, dw, k);
      return;
    }
    const int64_t tiles = (k + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t t = tile * kTile, len = std::min(kTile, k - t);
      for (int64_t o = 0; o < m; ++o) {
        float* row = dw + o * k + t;
        if (first) std::fill_n(row, len, 0.0f);
        for (int64_t i = 0; i < n; ++i) Axpy(dy[i * m + o], x + i * k + t, row, len);
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(fully_connected, kCpu, CpuFullyConnectedLayer);

}  // namespace spill
