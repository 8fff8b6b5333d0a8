// concat and add on the GPU: strided copy / add kernels that honour
// `accumulate`, and a left-to-right sum for add (the CPU's association).
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/join_layers.h"

namespace spill {
namespace {

class CudaConcatLayer : public ConcatLayer {
 public:
  using ConcatLayer::ConcatLayer;

  bool supports_slices() const override { return true; }

  // Input i fills channels [offset, offset + C_i) of every sample: a 2-D
  // copy of N rows of C_i * H * W elements.
  void Forward(const ForwardArgs& args) const override {
    const Shape& out = args.outputs[0].shape();
    const int64_t plane = out.h() * out.w();
    cudaStream_t stream = cuda::StreamOf(args.device);
    int64_t channel = 0;
    for (const Tensor& in : args.inputs) {
      const int64_t count = in.shape().c() * plane;
      cuda::LaunchCopyOrAdd2d(out.n(), count, in.data(), count,
                              args.outputs[0].data() + channel * plane, out.c() * plane, false,
                              stream);
      SPILL_CUDA_CHECK_LAUNCH();
      channel += in.shape().c();
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& out = args.output_grads[0].shape();
    const int64_t plane = out.h() * out.w();
    cudaStream_t stream = cuda::StreamOf(args.device);
    int64_t channel = 0;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const int64_t count = inputs_[i].c() * plane;
      if (float* dx = cuda::InputGrad(args, i)) {
        cuda::LaunchCopyOrAdd2d(out.n(), count, args.output_grads[0].data() + channel * plane,
                                out.c() * plane, dx, count, cuda::Accumulates(args, i), stream);
        SPILL_CUDA_CHECK_LAUNCH();
      }
      channel += inputs_[i].c();
    }
  }
};

class CudaAddLayer : public AddLayer {
 public:
  using AddLayer::AddLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    std::vector<const float*> inputs;
    for (const Tensor& in : args.inputs) inputs.push_back(in.data());
    cuda::LaunchAddN(args.outputs[0].numel(), inputs.data(), static_cast<int>(inputs.size()),
                     args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const int64_t n = args.output_grads[0].numel();
    cudaStream_t stream = cuda::StreamOf(args.device);
    for (size_t i = 0; i < args.input_grads.size(); ++i) {
      float* dx = cuda::InputGrad(args, i);
      if (dx == nullptr) continue;
      cuda::LaunchCopyOrAdd2d(1, n, args.output_grads[0].data(), n, dx, n,
                              cuda::Accumulates(args, i), stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(concat, kCuda, CudaConcatLayer);
SPILL_REGISTER_LAYER(add, kCuda, CudaAddLayer);

}  // namespace spill
