// channel_shuffle and slice on the GPU: a permuting copy, and strided row
// copies (the slice's gradient zeroes the rest of the input's first).
#include "framework/graph/layer_registry.h"
#include "layers/channel_layers.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"

namespace spill {
namespace {

class CudaChannelShuffleLayer : public ChannelShuffleLayer {
 public:
  using ChannelShuffleLayer::ChannelShuffleLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    cuda::LaunchChannelShuffle(s.n(), s.c(), s.h() * s.w(), groups_, args.inputs[0].data(),
                               args.outputs[0].data(), false, false, cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const Shape& s = args.output_grads[0].shape();
    cuda::LaunchChannelShuffle(s.n(), s.c(), s.h() * s.w(), groups_, args.output_grads[0].data(),
                               dx, true, cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

class CudaSliceLayer : public SliceLayer {
 public:
  using SliceLayer::SliceLayer;

  bool supports_slices() const override { return true; }

  // Each image's channels [begin, end) are one row of the output.
  void Forward(const ForwardArgs& args) const override {
    const Shape& out = args.outputs[0].shape();
    const int64_t plane = out.h() * out.w(), block = out.c() * plane;
    cuda::LaunchCopyOrAdd2d(out.n(), block, args.inputs[0].data() + begin_ * plane,
                            channels_ * plane, args.outputs[0].data(), block, false,
                            cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    const Shape& out = args.output_grads[0].shape();
    const int64_t plane = out.h() * out.w(), block = out.c() * plane;
    cudaStream_t stream = cuda::StreamOf(args.device);
    const bool accumulate = cuda::Accumulates(args, 0);
    if (!accumulate) {
      SPILL_CUDA_CHECK(cudaMemsetAsync(dx, 0, args.input_grads[0].bytes(), stream));
    }
    cuda::LaunchCopyOrAdd2d(out.n(), block, args.output_grads[0].data(), block, dx + begin_ * plane,
                            channels_ * plane, accumulate, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(channel_shuffle, kCuda, CudaChannelShuffleLayer);
SPILL_REGISTER_LAYER(slice, kCuda, CudaSliceLayer);

}  // namespace spill
