// lrn on the GPU with the layer's own kernels: one thread per element sums
// its channel window directly (double, as the CPU does), so no workspace is
// needed; backward recomputes the neighbours' scales instead of storing
// them. (cuDNN's LRNCrossChannel uses the same alpha / size convention but
// limits the window to 16 channels and k to >= 1e-5.)
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/lrn_layer.h"

namespace spill {
namespace {

class CudaLrnLayer : public LrnLayer {
 public:
  using LrnLayer::LrnLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchLrnForward(args.inputs[0].shape().n(), shape_.c(), shape_.h() * shape_.w(),
                           args.inputs[0].data(), args.outputs[0].data(), size_, alpha_ / size_,
                           static_cast<float>(beta_), k_, cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  // dx = dy * scale^-beta - 2 alpha beta / size * x * sum_window(dy * y / scale)
  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const float coeff = static_cast<float>(2.0 * alpha_ * beta_ / size_);
    cuda::LaunchLrnBackward(args.inputs[0].shape().n(), shape_.c(), shape_.h() * shape_.w(),
                            args.inputs[0].data(), args.outputs[0].data(),
                            args.output_grads[0].data(), dx, size_, alpha_ / size_,
                            static_cast<float>(beta_), k_, coeff, cuda::Accumulates(args, 0),
                            cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(lrn, kCuda, CudaLrnLayer);

}  // namespace spill
