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
#include "layers/cpu/row_kernels.h"
#include "layers/fully_connected_layer.h"

namespace spill {
namespace {

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
    cpu::RowDots(x, k, w, k, n, m, k, b, y, m);
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
      cpu::RowCombinations(dy, m, args.params[0].data(), k, n, m, k, args.input_grads[0].data(), k,
                           args.accumulate[0]);
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
    cpu::RowOuterSums(dy, m, x, k, n, m, k, dw, k, first);
  }
};

}  // namespace

SPILL_REGISTER_LAYER(fully_connected, kCpu, CpuFullyConnectedLayer);

}  // namespace spill
