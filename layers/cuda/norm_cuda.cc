// layer_norm and scale on the GPU. Per-pixel statistics are one thread's
// double sums; the parameter gradients sum each image's plane in a block and
// carry the double sums from image to image, and from slice to slice of the
// batch, at the start of the workspace (2 doubles per channel). Layer norm
// reads and writes 16-bit tensors as they are stored (stored_cuda.h); scale
// computes on float32 copies of them.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"
#include "layers/norm_layers.h"

namespace spill {
namespace {

// A call's operand as the kernels see it: images, channels, pixels per
// channel plane, and the stream they run on.
struct Planes {
  int64_t n, c, plane;
  cudaStream_t stream;
};

Planes PlanesOf(const Tensor& x, Device* device) {
  const Shape& s = x.shape();
  return {s.n(), s.c(), s.h() * s.w(), cuda::StreamOf(device)};
}

// The carried sums at the start of the workspace: 2 doubles per channel.
double* Carry(const Workspace& workspace, int64_t channels) {
  SPILL_CHECK(workspace.bytes >= 2 * static_cast<size_t>(channels) * sizeof(double))
      << "workspace of " << workspace.bytes << " bytes for " << channels << " channels";
  return static_cast<double*>(workspace.data);
}

class CudaLayerNormLayer : public LayerNormLayer {
 public:
  using LayerNormLayer::LayerNormLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }
  // The carried sums, then the statistics of every pixel.
  size_t workspace_bytes(Pass pass) const override {
    if (pass == Pass::kForward) return 0;
    return CarryBytes() + LayerNormLayer::workspace_bytes(pass);
  }

  void Forward(const ForwardArgs& args) const override {
    const Planes p = PlanesOf(args.inputs[0], args.device);
    cuda::LaunchLayerNormForward(cuda::StoredOf(args.inputs[0]), p.n, p.c, p.plane,
                                 args.inputs[0].raw(), args.params[0].data(), args.params[1].data(),
                                 eps_, args.outputs[0].raw(), p.stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Planes p = PlanesOf(args.inputs[0], args.device);
    double* carry = Carry(args.workspace, p.c);
    double* stats = carry + 2 * p.c;
    const cuda::Stored stored = cuda::StoredOf(args.inputs[0]);
    cuda::LaunchLayerNormInputGrad(stored, p.n, p.c, p.plane, args.inputs[0].raw(),
                                   args.output_grads[0].raw(), args.params[0].data(), eps_, stats,
                                   cuda::InputGrad(args, 0), cuda::Accumulates(args, 0), p.stream);
    SPILL_CUDA_CHECK_LAUNCH();
    float* dgamma = cuda::ParamGrad(args, 0);
    float* dbeta = cuda::ParamGrad(args, 1);
    if (dgamma == nullptr && dbeta == nullptr) return;
    cuda::LaunchChannelGradSums(stored, p.n, p.c, p.plane, args.inputs[0].raw(),
                                args.output_grads[0].raw(), stats, carry, args.slice.first(),
                                dgamma, dbeta, p.stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  size_t CarryBytes() const { return 2 * static_cast<size_t>(shape_.c()) * sizeof(double); }
};

class CudaScaleLayer : public ScaleLayer {
 public:
  using ScaleLayer::ScaleLayer;

  bool supports_slices() const override { return true; }
  size_t workspace_bytes(Pass pass) const override {
    return pass == Pass::kBackward ? 2 * static_cast<size_t>(channels_) * sizeof(double) : 0;
  }

  void Forward(const ForwardArgs& args) const override {
    const Planes p = PlanesOf(args.inputs[0], args.device);
    cuda::LaunchScaleForward(p.n, p.c, p.plane, args.inputs[0].data(), args.params[0].data(),
                             bias_ ? args.params[1].data() : nullptr, args.outputs[0].data(),
                             p.stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Planes p = PlanesOf(args.inputs[0], args.device);
    if (float* dx = cuda::InputGrad(args, 0)) {
      cuda::LaunchScaleInputGrad(p.n, p.c, p.plane, args.output_grads[0].data(),
                                 args.params[0].data(), dx, cuda::Accumulates(args, 0), p.stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
    float* dgamma = cuda::ParamGrad(args, 0);
    float* dbeta = bias_ ? cuda::ParamGrad(args, 1) : nullptr;
    if (dgamma == nullptr && dbeta == nullptr) return;
    cuda::LaunchChannelGradSums(cuda::Stored::kF32, p.n, p.c, p.plane, args.inputs[0].data(),
                                args.output_grads[0].data(), nullptr, Carry(args.workspace, p.c),
                                args.slice.first(), dgamma, dbeta, p.stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(layer_norm, kCuda, CudaLayerNormLayer);
SPILL_REGISTER_LAYER(scale, kCuda, CudaScaleLayer);

}  // namespace spill
