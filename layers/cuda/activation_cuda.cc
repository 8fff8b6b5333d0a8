// The elementwise activations on the GPU: one kernel each way over the
// formulas the CPU layer shares (layers/activation_math.h), on tensors as
// they are stored (16 bits widened and rounded once: stored_cuda.h).
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
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchActivationForward(cuda::StoredOf(args.outputs[0]), args.inputs[0].numel(),
                                  constants_, args.inputs[0].raw(), args.outputs[0].raw(),
                                  cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const bool output = ActivationReadsOutput(constants_.function);
    const void* v = output ? args.outputs[0].raw() : args.inputs[0].raw();
    cuda::LaunchActivationBackward(
        cuda::StoredOf(args.output_grads[0]), args.output_grads[0].numel(), constants_, v,
        args.output_grads[0].raw(), dx, cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
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
