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

  // As the CPU: the branch (the first input) weighted by BranchWeight.
  void Forward(const ForwardArgs& args) const override {
    const float weight = BranchWeight(args.phase, args.seed);
    const int64_t n = args.outputs[0].numel();
    float* y = args.outputs[0].data();
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (weight == 1 || weight == 0) {
      std::vector<const float*> inputs;
      for (size_t i = weight == 1 ? 0 : 1; i < args.inputs.size(); ++i) {
        inputs.push_back(args.inputs[i].data());
      }
      cuda::LaunchAddN(n, inputs.data(), static_cast<int>(inputs.size()), y, stream);
      SPILL_CUDA_CHECK_LAUNCH();
      return;
    }
    SPILL_CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), stream));
    cuda::LaunchAxpy(n, weight, args.inputs[0].data(), y, stream);
    SPILL_CUDA_CHECK_LAUNCH();
    for (size_t i = 1; i < args.inputs.size(); ++i) {
      cuda::LaunchCopyOrAdd2d(1, n, args.inputs[i].data(), n, y, n, /*accumulate=*/true, stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }

  // A dropped branch gets a zero gradient (Layer::DroppedInput).
  void Backward(const BackwardArgs& args) const override {
    const int64_t n = args.output_grads[0].numel();
    cudaStream_t stream = cuda::StreamOf(args.device);
    for (size_t i = 0; i < args.input_grads.size(); ++i) {
      float* dx = cuda::InputGrad(args, i);
      if (dx == nullptr) continue;
      if (static_cast<int>(i) == args.dropped_input) {
        if (!cuda::Accumulates(args, i))
          SPILL_CUDA_CHECK(cudaMemsetAsync(dx, 0, n * sizeof(float), stream));
        continue;
      }
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
