#include <algorithm>
#include <cmath>

#include "framework/layer_registry.h"
#include "layers/softmax_loss_layer.h"

namespace spill {
namespace {

class CpuSoftmaxLossLayer : public SoftmaxLossLayer {
 public:
  using SoftmaxLossLayer::SoftmaxLossLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* p = args.outputs[0].data();
    const int64_t c = classes_, n = args.inputs[0].shape().n();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = x + i * c;
      float* out = p + i * c;
      const float top = *std::max_element(row, row + c);
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += std::exp(static_cast<double>(row[j] - top));
      for (int64_t j = 0; j < c; ++j) {
        out[j] = static_cast<float>(std::exp(static_cast<double>(row[j] - top)) / sum);
      }
    }
  }

  // d(mean loss)/dx = weight * (p - onehot(label)) / N, N the whole batch
  void Backward(const BackwardArgs& args) const override {
    const float* p = args.outputs[0].data();
    const float* labels = args.inputs[1].data();
    float* dx = args.input_grads[0].data();
    const bool accumulate = args.accumulate[0];
    const int64_t c = classes_, n = args.outputs[0].shape().n();
    const float scale = weight_ / static_cast<float>(args.slice.total(n));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = static_cast<int64_t>(labels[i]);
      for (int64_t j = 0; j < c; ++j) {
        const float g = (p[i * c + j] - (j == label ? 1.0f : 0.0f)) * scale;
        dx[i * c + j] = accumulate ? dx[i * c + j] + g : g;
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(softmax_loss, kCpu, CpuSoftmaxLossLayer);

}  // namespace spill
