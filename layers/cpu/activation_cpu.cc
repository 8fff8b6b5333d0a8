// The elementwise activations on the CPU (layers/activation_math.h holds the
// formulas the CUDA kernels share).
#include "framework/graph/layer_registry.h"
#include "layers/activation_layers.h"
#include "layers/cpu/elementwise_kernels.h"
#include "layers/cpu/typed_blocks.h"

namespace spill {
namespace {

class CpuActivationLayer : public ActivationLayer {
 public:
  using ActivationLayer::ActivationLayer;

  bool supports_slices() const override { return true; }
  // Any element type (layers/cpu/typed_blocks.h).
  bool computes_16_bit(Pass) const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const ActivationConstants k = constants_;
    cpu::ForEachFloatBlock(
        {{&args.inputs[0], true, false}, {&args.outputs[0], false, true}}, args.inputs[0].numel(),
        [k](int64_t n, float* const* f) {
          const float* x = f[0];
          float* y = f[1];
          if (k.function == ActivationFunction::kClip) {  // a loop of its own vectorizes
            const float lo = k.min, hi = k.max;
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) y[i] = Clamp(x[i], lo, hi);
          } else if (k.function == ActivationFunction::kGelu) {  // vectorizes in its own target
            cpu::GeluForward(x, y, n);
          } else {
            for (int64_t i = 0; i < n; ++i) y[i] = Activate(k, x[i]);
          }
        });
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const bool output = ActivationReadsOutput(constants_.function);
    const Tensor& v = output ? args.outputs[0] : args.inputs[0];
    const bool accumulate = args.accumulate[0];
    const ActivationConstants k = constants_;
    cpu::ForEachFloatBlock({{&v, true, false},
                            {&args.output_grads[0], true, false},
                            {&args.input_grads[0], accumulate, true}},
                           args.output_grads[0].numel(),
                           [k, accumulate](int64_t n, float* const* f) {
                             const float *v = f[0], *dy = f[1];
                             float* dx = f[2];
                             if (k.function == ActivationFunction::kClip) {
                               const float lo = k.min, hi = k.max;
                               if (accumulate) {
#pragma omp simd
                                 for (int64_t i = 0; i < n; ++i)
                                   dx[i] += ClipGrad(v[i], dy[i], lo, hi);
                               } else {
#pragma omp simd
                                 for (int64_t i = 0; i < n; ++i)
                                   dx[i] = ClipGrad(v[i], dy[i], lo, hi);
                               }
                             } else if (k.function == ActivationFunction::kGelu) {
                               cpu::GeluBackward(v, dy, dx, n, accumulate);
                             } else if (accumulate) {
                               for (int64_t i = 0; i < n; ++i)
                                 dx[i] += ActivationGrad(k, v[i], dy[i]);
                             } else {
                               for (int64_t i = 0; i < n; ++i)
                                 dx[i] = ActivationGrad(k, v[i], dy[i]);
                             }
                           });
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu6, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(clip, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(hard_sigmoid, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(hard_swish, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(tanh, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(sigmoid, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(silu, kCpu, CpuActivationLayer);
SPILL_REGISTER_LAYER(gelu, kCpu, CpuActivationLayer);

}  // namespace spill
