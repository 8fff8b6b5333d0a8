// relu on the GPU: its own elementwise kernels (leaky or not), computing
// exactly what the CPU layer computes. Backward reads the output. 16-bit
// tensors are read and written as they are stored (stored_cuda.h).
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
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchReluForward(cuda::StoredOf(args.outputs[0]), args.inputs[0].numel(),
                            args.inputs[0].raw(), args.outputs[0].raw(), negative_slope_,
                            cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchReluBackward(cuda::StoredOf(args.outputs[0]), args.output_grads[0].numel(),
                             args.outputs[0].raw(), args.output_grads[0].raw(), dx, negative_slope_,
                             cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(relu, kCuda, CudaReluLayer);

}  // namespace spill
