// upsample and pad on the GPU: one thread per output forward; backward,
// nearest and pad gather per input, bilinear adds plane by plane in the CPU
// layer's order.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"
#include "layers/pad_layer.h"
#include "layers/upsample_layer.h"

namespace spill {
namespace {

class CudaUpsampleLayer : public UpsampleLayer {
 public:
  using UpsampleLayer::UpsampleLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchUpsampleForward(Geometry(args.inputs[0].shape()), args.inputs[0].data(),
                                args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchUpsampleBackward(Geometry(args.input_grads[0].shape()), args.output_grads[0].data(),
                                 dx, cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  cuda::UpsampleShape Geometry(const Shape& in) const {
    cuda::UpsampleShape s;
    s.planes = in.n() * in.c();
    s.in_h = in.h();
    s.in_w = in.w();
    s.factor_h = factor_[0];
    s.factor_w = factor_[1];
    s.out_h = in.h() * factor_[0];
    s.out_w = in.w() * factor_[1];
    s.bilinear = bilinear_;
    s.align_corners = align_corners_;
    return s;
  }
};

class CudaPadLayer : public PadLayer {
 public:
  using PadLayer::PadLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchPadForward(Geometry(args.inputs[0].shape()), value_, args.inputs[0].data(),
                           args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchPadBackward(Geometry(args.input_grads[0].shape()), args.output_grads[0].data(), dx,
                            cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  cuda::PadShape Geometry(const Shape& in) const {
    cuda::PadShape s;
    s.planes = in.n() * in.c();
    s.in_h = in.h();
    s.in_w = in.w();
    s.top = pad_[0];
    s.left = pad_[1];
    s.out_h = in.h() + pad_[0] + pad_[2];
    s.out_w = in.w() + pad_[1] + pad_[3];
    return s;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(upsample, kCuda, CudaUpsampleLayer);
SPILL_REGISTER_LAYER(pad, kCuda, CudaPadLayer);

}  // namespace spill
