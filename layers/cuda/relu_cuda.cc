// relu on the GPU: its own elementwise kernels (leaky or not), computing
// exactly what the CPU layer computes. Backward reads the output.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/relu_layer.h"

namespace spill {
namespace {

class CudaReluLayer : public ReluLayer {
 public:
  using ReluLayer::ReluLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchReluForward(args.inputs[0].numel(), args.inputs[0].data(), args.outputs[0].data(),
                            negative_slope_, cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchReluBackward(args.output_grads[0].numel(), args.outputs[0].data(),
                             args.output_grads[0].data(), dx, negative_slope_,
                             cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu, kCuda, CudaReluLayer);

}  // namespace spill
