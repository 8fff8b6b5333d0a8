#include "framework/layer_registry.h"
#include "layers/cpu/cpu_math.h"
#include "layers/fully_connected_layer.h"

namespace spill {
namespace {

class CpuFullyConnectedLayer : public FullyConnectedLayer {
 public:
  using FullyConnectedLayer::FullyConnectedLayer;

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = batch_size_, k = in_features_, m = outputs_;
    float* y = args.outputs[0].data();
    cpu::Gemm(false, true, n, m, k, 1.0f, args.inputs[0].data(), k, args.params[0].data(), k, 0.0f,
              y, m);
    if (!bias_) return;
    const float* b = args.params[1].data();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) y[i * m + j] += b[j];
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const int64_t n = batch_size_, k = in_features_, m = outputs_;
    const float* dy = args.output_grads[0].data();
    if (args.param_grads[0].valid()) {  // dW = dy^T x
      cpu::Gemm(true, false, m, k, n, 1.0f, dy, m, args.inputs[0].data(), k, 0.0f,
                args.param_grads[0].data(), k);
    }
    if (bias_ && args.param_grads[1].valid()) {
      float* db = args.param_grads[1].data();
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += dy[i * m + j];
        db[j] = static_cast<float>(sum);
      }
    }
    if (args.input_grads[0].valid()) {  // dx = dy W
      cpu::Gemm(false, false, n, k, m, 1.0f, dy, m, args.params[0].data(), k,
                args.accumulate[0] ? 1.0f : 0.0f, args.input_grads[0].data(), k);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(fully_connected, kCpu, CpuFullyConnectedLayer);

}  // namespace spill
