// softmax_loss on the GPU: a softmax kernel (one block per sample, max and
// double sum of exponentials, as the CPU layer) whose output is the
// probabilities, and a kernel for the gradient weight * (p - onehot) / N.
// Scores per pixel take one thread per pixel (vision_kernels_cuda.h).
#include <algorithm>
#include <vector>

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

  // The mean over the whole batch (and every pixel), a slice or not; with
  // an ignored label, over the samples kept, counted on the host in sweep 0.
  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const int64_t rows = args.outputs[0].shape().n();
    float scale = 0;
    if (!GradientScale(
            args.slice, rows, args.loss_scale, [&] { return KeptSamples(args); }, &scale))
      return;
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (pixels_ > 1) {
      cuda::LaunchPixelSoftmaxLossBackward(rows, classes_, pixels_, args.outputs[0].data(),
                                           args.inputs[1].data(), ignored_, scale, dx,
                                           cuda::Accumulates(args, 0), stream);
    } else {
      cuda::LaunchSoftmaxLossBackward(rows, classes_, args.outputs[0].data(), args.inputs[1].data(),
                                      ignored_, scale, dx, cuda::Accumulates(args, 0), stream);
    }
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  // The labels of this call that are not ignored (read back to the host).
  double KeptSamples(const BackwardArgs& args) const {
    const Tensor& labels = args.inputs[1];
    std::vector<float> host(labels.numel());
    args.device->CopySync(host.data(), labels.data(), labels.bytes(), CopyKind::kDeviceToHost);
    double kept = 0;
    for (float label : host) kept += static_cast<int64_t>(label) != ignored_;
    return kept;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(softmax_loss, kCuda, CudaSoftmaxLossLayer);

}  // namespace spill
