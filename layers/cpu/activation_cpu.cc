// The elementwise activations on the CPU (layers/activation_math.h holds the
// formulas the CUDA kernels share).
#include "framework/graph/layer_registry.h"
#include "layers/activation_layers.h"
#include "layers/cpu/elementwise_kernels.h"

namespace spill {
namespace {

class CpuActivationLayer : public ActivationLayer {
 public:
  using ActivationLayer::ActivationLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t n = args.inputs[0].numel();
    const ActivationConstants k = constants_;
    if (k.function == ActivationFunction::kClip) {  // a loop of its own vectorizes
      const float lo = k.min, hi = k.max;
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = Clamp(x[i], lo, hi);
      return;
    }
    if (k.function == ActivationFunction::kGelu) {  // GELU's vectorizes in its own target
      cpu::GeluForward(x, y, n);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = Activate(k, x[i]);
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const bool output = ActivationReadsOutput(constants_.function);
    const float* v = output ? args.outputs[0].data() : args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    float* dx = args.input_grads[0].data();
    const int64_t n = args.output_grads[0].numel();
    const ActivationConstants k = constants_;
    if (k.function == ActivationFunction::kClip) {
      const float lo = k.min, hi = k.max;
      if (args.accumulate[0]) {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) dx[i] += ClipGrad(v[i], dy[i], lo, hi);
      } else {
#pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) dx[i] = ClipGrad(v[i], dy[i], lo, hi);
      }
      return;
    }
    if (k.function == ActivationFunction::kGelu) {
      cpu::GeluBackward(v, dy, dx, n, args.accumulate[0]);
      return;
    }
    if (args.accumulate[0]) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] += ActivationGrad(k, v[i], dy[i]);
    } else {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) dx[i] = ActivationGrad(k, v[i], dy[i]);
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu6, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(clip, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(hard_sigmoid, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(hard_swish, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(sigmoid, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(silu, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(gelu, kCpu, CpuActivationLayer);

}  // namespace spill
