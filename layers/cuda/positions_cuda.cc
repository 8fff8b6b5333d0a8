// positions on the GPU: the table added element by element; its gradient
// overwritten on the step's first slice, then the images added in order by
// one thread per (channel, position), as the CPU adds them. 16-bit tensors
// are read and written as they are stored (stored_cuda.h).
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
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    cuda::LaunchPositionsForward(cuda::StoredOf(args.outputs[0]), s.n(), channels_, s.w(), length_,
                                 args.inputs[0].raw(), args.params[0].data(), args.outputs[0].raw(),
                                 cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.output_grads[0].shape();
    const cuda::Stored stored = cuda::StoredOf(args.output_grads[0]);
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (args.input_grads[0].valid()) {
      cuda::LaunchCopyOrAdd2d(stored, 1, s.numel(), args.output_grads[0].raw(), s.numel(),
                              args.input_grads[0].raw(), s.numel(), args.accumulate[0], stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
    float* dtable = cuda::ParamGrad(args, 0);
    if (dtable == nullptr) return;
    if (args.slice.first()) {
      const size_t bytes = static_cast<size_t>(channels_ * length_) * sizeof(float);
      SPILL_CUDA_CHECK(cudaMemsetAsync(dtable, 0, bytes, stream));
    }
    cuda::LaunchPositionsTableGrad(stored, s.n(), channels_, s.w(), length_,
                                   args.output_grads[0].raw(), dtable, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(positions, kCuda, CudaPositionsLayer);

}  // namespace spill
