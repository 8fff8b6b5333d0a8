// class_token and token on the GPU, as 2-D copies: the token's gradient
// overwritten on the step's first slice, then the images added in order.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/token_layers.h"

namespace spill {
namespace {

class CudaClassTokenLayer : public ClassTokenLayer {
 public:
  using ClassTokenLayer::ClassTokenLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t steps = s.w(), rows = s.n() * channels_;
    cudaStream_t stream = cuda::StreamOf(args.device);
    float* y = args.outputs[0].data();
    cuda::LaunchCopyOrAdd2d(rows, steps, args.inputs[0].data(), steps, y + 1, steps + 1, false,
                            stream);
    SPILL_CUDA_CHECK_LAUNCH();
    for (int64_t i = 0; i < s.n(); ++i) {
      cuda::LaunchCopyOrAdd2d(channels_, 1, args.params[0].data(), 1,
                              y + i * channels_ * (steps + 1), steps + 1, false, stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.output_grads[0].shape();
    const int64_t steps = s.w() - 1, rows = s.n() * channels_;
    cudaStream_t stream = cuda::StreamOf(args.device);
    const float* dy = args.output_grads[0].data();
    if (args.input_grads[0].valid()) {
      cuda::LaunchCopyOrAdd2d(rows, steps, dy + 1, steps + 1, args.input_grads[0].data(), steps,
                              args.accumulate[0], stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
    float* dtoken = cuda::ParamGrad(args, 0);
    if (dtoken == nullptr) return;
    if (args.slice.first()) {
      SPILL_CUDA_CHECK(cudaMemsetAsync(dtoken, 0, channels_ * sizeof(float), stream));
    }
    for (int64_t i = 0; i < s.n(); ++i) {
      cuda::LaunchCopyOrAdd2d(channels_, 1, dy + i * channels_ * (steps + 1), steps + 1, dtoken, 1,
                              true, stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }
};

class CudaTokenLayer : public TokenLayer {
 public:
  using TokenLayer::TokenLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    cuda::LaunchCopyOrAdd2d(s.n() * s.c(), 1, args.inputs[0].data() + position_, s.w(),
                            args.outputs[0].data(), 1, false, cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    const Shape& s = args.input_grads[0].shape();
    cudaStream_t stream = cuda::StreamOf(args.device);
    float* dx = args.input_grads[0].data();
    if (!args.accumulate[0]) {
      SPILL_CUDA_CHECK(cudaMemsetAsync(dx, 0, s.numel() * sizeof(float), stream));
    }
    cuda::LaunchCopyOrAdd2d(s.n() * s.c(), 1, args.output_grads[0].data(), 1, dx + position_, s.w(),
                            true, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(class_token, kCuda, CudaClassTokenLayer);
SPILL_REGISTER_LAYER(token, kCuda, CudaTokenLayer);

}  // namespace spill
