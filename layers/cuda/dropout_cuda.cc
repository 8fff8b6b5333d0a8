// dropout on the GPU. The mask is drawn by a kernel from the same
// counter-based generator as the CPU's (framework/base/random.h: a value depends
// only on the layer's seed and the element's index), so it matches the CPU
// mask bit for bit; a recomputing forward reuses the saved mask.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/dropout_layer.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

class CudaDropoutLayer : public DropoutLayer {
 public:
  using DropoutLayer::DropoutLayer;

  bool supports_slices() const override { return true; }

  // The mask holds 0 or 1 / (1 - ratio) per element, drawn at the element's
  // index in the whole batch (a slice draws its part of the same mask).
  void Forward(const ForwardArgs& args) const override {
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const int64_t n = args.inputs[0].numel();
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (args.phase == Phase::kEval) {
      if (n > 0 && y != x) {
        SPILL_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * sizeof(float),
                                         cudaMemcpyDeviceToDevice, stream));
      }
      return;
    }
    const float keep = 1.0f / (1.0f - ratio_);
    const int64_t first = SliceElementOffset(args.slice, args.inputs[0].shape().sample_size());
    cuda::LaunchDropoutForward(n, x, y, args.aux[0].data(), args.seed, first, ratio_, keep,
                               !args.recompute, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchMulBackward(args.output_grads[0].numel(), args.output_grads[0].data(),
                            args.aux[0].data(), dx, cuda::Accumulates(args, 0),
                            cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(dropout, kCuda, CudaDropoutLayer);

}  // namespace spill
