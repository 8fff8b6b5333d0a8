// tokens on the GPU: the same values, copied forward and back (added back
// where the gradient accumulates), in the type they are stored in.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/tokens_layer.h"

namespace spill {
namespace {

class CudaTokensLayer : public TokensLayer {
 public:
  using TokensLayer::TokensLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().numel();
    cuda::LaunchCopyOrAdd2d(cuda::StoredOf(args.outputs[0]), 1, n, args.inputs[0].raw(), n,
                            args.outputs[0].raw(), n, false, cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const int64_t n = args.output_grads[0].shape().numel();
    cuda::LaunchCopyOrAdd2d(cuda::StoredOf(args.output_grads[0]), 1, n, args.output_grads[0].raw(),
                            n, args.input_grads[0].raw(), n, args.accumulate[0],
                            cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(tokens, kCuda, CudaTokensLayer);

}  // namespace spill
