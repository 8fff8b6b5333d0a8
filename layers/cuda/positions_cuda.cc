// positions on the GPU: the table added element by element; its gradient
// overwritten on the step's first slice, then the images added in order by
// one thread per (channel, position), as the CPU adds them.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/sequence_kernels_cuda.h"
#include "layers/positions_layer.h"

namespace spill {
namespace {

class CudaPositionsLayer : public PositionsLayer {
 public:
  using PositionsLayer::PositionsLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    cuda::LaunchPositionsForward(s.n(), channels_, s.w(), length_, args.inputs[0].data(),
                                 args.params[0].data(), args.outputs[0].data(),
                                 cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.output_grads[0].shape();
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (args.input_grads[0].valid()) {
      cuda::LaunchCopyOrAdd2d(1, s.numel(), args.output_grads[0].data(), s.numel(),
                              args.input_grads[0].data(), s.numel(), args.accumulate[0], stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
    float* dtable = cuda::ParamGrad(args, 0);
    if (dtable == nullptr) return;
    if (args.slice.first()) {
      const size_t bytes = static_cast<size_t>(channels_ * length_) * sizeof(float);
      SPILL_CUDA_CHECK(cudaMemsetAsync(dtable, 0, bytes, stream));
    }
    cuda::LaunchPositionsTableGrad(s.n(), channels_, s.w(), length_, args.output_grads[0].data(),
                                   dtable, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(positions, kCuda, CudaPositionsLayer);

}  // namespace spill
