// space_to_depth on the GPU: one thread per element, gathering forward and
// scattering the gradient back (a permutation: every input gradient element
// is written by one thread), in the type the tensors are stored in.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"
#include "layers/space_to_depth_layer.h"

namespace spill {
namespace {

class CudaSpaceToDepthLayer : public SpaceToDepthLayer {
 public:
  using SpaceToDepthLayer::SpaceToDepthLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchSpaceToDepth(cuda::StoredOf(args.outputs[0]), Geometry(args.inputs[0].shape()),
                             args.inputs[0].raw(), args.outputs[0].raw(), false, false,
                             cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchSpaceToDepth(cuda::StoredOf(args.output_grads[0]),
                             Geometry(args.input_grads[0].shape()), args.output_grads[0].raw(), dx,
                             true, cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(space_to_depth, kCuda, CudaSpaceToDepthLayer);

}  // namespace spill
