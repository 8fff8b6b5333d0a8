// multiply and broadcast_add on the GPU: elementwise kernels, and one block
// per plane for the gradient of a spread input (its plane's sum, in double).
#include "framework/graph/layer_registry.h"
#include "layers/broadcast_layers.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"

namespace spill {
namespace {

class CudaBroadcastLayer : public BroadcastLayer {
 public:
  using BroadcastLayer::BroadcastLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchBroadcastForward(Geometry(args.outputs[0].shape()), args.inputs[0].data(),
                                 args.inputs[1].data(), args.outputs[0].data(),
                                 cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const cuda::BroadcastShape s = Geometry(args.output_grads[0].shape());
    for (int i = 0; i < 2; ++i) {
      float* dx = cuda::InputGrad(args, i);
      if (dx == nullptr) continue;
      const float* other = multiply_ ? args.inputs[1 - i].data() : nullptr;
      cuda::LaunchBroadcastBackward(s, i, args.output_grads[0].data(), other, dx,
                                    cuda::Accumulates(args, i), cuda::StreamOf(args.device));
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }

 private:
  cuda::BroadcastShape Geometry(const Shape& out) const {
    cuda::BroadcastShape s;
    s.planes = out.n() * out.c();
    s.plane = out.h() * out.w();
    s.spread[0] = spread_[0];
    s.spread[1] = spread_[1];
    s.multiply = multiply_;
    return s;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(multiply, kCuda, CudaBroadcastLayer);
SPILL_REGISTER_LAYER(broadcast_add, kCuda, CudaBroadcastLayer);

}  // namespace spill
