// softmax_loss on the GPU: a softmax kernel (one block per sample, max and
// double sum of exponentials, as the CPU layer) whose output is the
// probabilities, and a kernel for the gradient weight * (p - onehot) / N.
// Scores per pixel take one thread per pixel (vision_kernels_cuda.h).
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"
#include "layers/softmax_loss_layer.h"

namespace spill {
namespace {

class CudaSoftmaxLossLayer : public SoftmaxLossLayer {
 public:
  using SoftmaxLossLayer::SoftmaxLossLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    if (pixels_ > 1) {  // a softmax per pixel
      cuda::LaunchPixelSoftmaxForward(args.inputs[0].shape().n(), classes_, pixels_,
                                      args.inputs[0].data(), args.outputs[0].data(),
                                      cuda::StreamOf(args.device));
      SPILL_CUDA_CHECK_LAUNCH();
      return;
    }
    cuda::LaunchSoftmaxForward(args.inputs[0].shape().n(), classes_, args.inputs[0].data(),
                               args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    // The mean over the whole batch (and every pixel), a slice or not.
    const int64_t rows = args.outputs[0].shape().n();
    if (pixels_ > 1) {
      const float scale = weight_ / static_cast<float>(args.slice.total(rows) * pixels_);
      cuda::LaunchPixelSoftmaxLossBackward(rows, classes_, pixels_, args.outputs[0].data(),
                                           args.inputs[1].data(), scale, dx,
                                           cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
      SPILL_CUDA_CHECK_LAUNCH();
      return;
    }
    const float scale = weight_ / static_cast<float>(args.slice.total(rows));
    cuda::LaunchSoftmaxLossBackward(rows, classes_, args.outputs[0].data(), args.inputs[1].data(),
                                    scale, dx, cuda::Accumulates(args, 0),
                                    cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(softmax_loss, kCuda, CudaSoftmaxLossLayer);

}  // namespace spill
