// The elementwise activations on the GPU: one kernel each way over the
// formulas the CPU layer shares (layers/activation_math.h).
#include "framework/graph/layer_registry.h"
#include "layers/activation_layers.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"

namespace spill {
namespace {

class CudaActivationLayer : public ActivationLayer {
 public:
  using ActivationLayer::ActivationLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchActivationForward(args.inputs[0].numel(), constants_, args.inputs[0].data(),
                                  args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const bool output = ActivationReadsOutput(constants_.function);
    const float* v = output ? args.outputs[0].data() : args.inputs[0].data();
    cuda::LaunchActivationBackward(args.output_grads[0].numel(), constants_, v,
                                   args.output_grads[0].data(), dx, cuda::Accumulates(args, 0),
                                   cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu6, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(clip, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(hard_sigmoid, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(hard_swish, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(tanh, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(sigmoid, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(silu, kCuda, CudaActivationLayer);
SPILL_REGISTER_LAYER(gelu, kCuda, CudaActivationLayer);

}  // namespace spill
