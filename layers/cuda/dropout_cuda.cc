// dropout on the GPU. The mask is drawn by a kernel from the same
// counter-based generator as the CPU's (framework/base/random.h: a value depends
// only on the layer's seed and the element's index), so it matches the CPU
// mask bit for bit; a recomputing forward reuses the saved mask. 16-bit
// tensors are read and written as they are stored (stored_cuda.h).
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
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  // The mask holds 0 or 1 / (1 - ratio) per element, drawn at the element's
  // index in the whole batch (a slice draws its part of the same mask).
  void Forward(const ForwardArgs& args) const override {
    const void* x = args.inputs[0].raw();
    void* y = args.outputs[0].raw();
    const int64_t n = args.inputs[0].numel();
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (args.phase == Phase::kEval) {
      if (n > 0 && y != x) {
        SPILL_CUDA_CHECK(
            cudaMemcpyAsync(y, x, args.inputs[0].bytes(), cudaMemcpyDeviceToDevice, stream));
      }
      return;
    }
    const float keep = 1.0f / (1.0f - ratio_);
    const int64_t first = SliceElementOffset(args.slice, args.inputs[0].shape().sample_size());
    cuda::LaunchDropoutForward(cuda::StoredOf(args.outputs[0]), n, x, y, args.aux[0].data(),
                               args.seed, first, ratio_, keep, !args.recompute, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchMulBackward(cuda::StoredOf(args.output_grads[0]), args.output_grads[0].numel(),
                            args.output_grads[0].raw(), args.aux[0].data(), dx,
                            cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(dropout, kCuda, CudaDropoutLayer);

}  // namespace spill
