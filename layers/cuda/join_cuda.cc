// concat and add on the GPU: strided copy / add kernels that honour
// `accumulate`, and a left-to-right sum for add (the CPU's association).
// 16-bit tensors are read and written as they are stored (stored_cuda.h);
// an add of more than kMaxAddInputs of them computes on float32 copies, so
// that its sum is rounded once.
#include <vector>

#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/join_layers.h"

namespace spill {
namespace {

// Every input stored as the output is.
bool InputsStoredAlike(const Layer& layer, size_t inputs) {
  for (size_t i = 0; i < inputs; ++i) {
    if (layer.input_dtype(static_cast<int>(i)) != layer.output_dtype(0)) return false;
  }
  return true;
}

// `t`'s element `offset` elements in.
const void* ElementAt(const Tensor& t, int64_t offset) {
  return static_cast<const char*>(t.raw()) + offset * DTypeSize(t.dtype());
}
void* ElementAt(void* data, const Tensor& like, int64_t offset) {
  return static_cast<char*>(data) + offset * DTypeSize(like.dtype());
}

class CudaConcatLayer : public ConcatLayer {
 public:
  using ConcatLayer::ConcatLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return InputsStoredAlike(*this, inputs_.size()); }

  // Input i fills channels [offset, offset + C_i) of every sample: a 2-D
  // copy of N rows of C_i * H * W elements.
  void Forward(const ForwardArgs& args) const override {
    const Tensor& y = args.outputs[0];
    const Shape& out = y.shape();
    const int64_t plane = out.h() * out.w();
    cudaStream_t stream = cuda::StreamOf(args.device);
    int64_t channel = 0;
    for (const Tensor& in : args.inputs) {
      const int64_t count = in.shape().c() * plane;
      cuda::LaunchCopyOrAdd2d(cuda::StoredOf(y), out.n(), count, in.raw(), count,
                              ElementAt(y.raw(), y, channel * plane), out.c() * plane, false,
                              stream);
      SPILL_CUDA_CHECK_LAUNCH();
      channel += in.shape().c();
    }
  }

  void Backward(const BackwardArgs& args) const override {
    const Tensor& dy = args.output_grads[0];
    const Shape& out = dy.shape();
    const int64_t plane = out.h() * out.w();
    cudaStream_t stream = cuda::StreamOf(args.device);
    int64_t channel = 0;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const int64_t count = inputs_[i].c() * plane;
      if (float* dx = cuda::InputGrad(args, i)) {
        cuda::LaunchCopyOrAdd2d(cuda::StoredOf(dy), out.n(), count, ElementAt(dy, channel * plane),
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
  bool computes_16_bit(Pass) const override {
    return InputsStoredAlike(*this, num_inputs_) &&
           num_inputs_ <= static_cast<size_t>(cuda::kMaxAddInputs);
  }

  // As the CPU: the branch (the first input) weighted by BranchWeight.
  void Forward(const ForwardArgs& args) const override {
    const float weight = BranchWeight(args.phase, args.seed);
    const int64_t n = args.outputs[0].numel();
    const cuda::Stored stored = cuda::StoredOf(args.outputs[0]);
    cudaStream_t stream = cuda::StreamOf(args.device);
    std::vector<const void*> inputs;
    for (size_t i = weight == 0 ? 1 : 0; i < args.inputs.size(); ++i) {
      inputs.push_back(args.inputs[i].raw());
    }
    const int count = static_cast<int>(inputs.size());
    if (weight == 1 || weight == 0) {
      cuda::LaunchAddN(stored, n, inputs.data(), count, args.outputs[0].raw(), stream);
      SPILL_CUDA_CHECK_LAUNCH();
      return;
    }
    if (stored != cuda::Stored::kF32) {  // summed in float32, rounded once
      cuda::LaunchWeightedAdd(stored, n, weight, inputs.data(), count, args.outputs[0].raw(),
                              stream);
      SPILL_CUDA_CHECK_LAUNCH();
      return;
    }
    float* y = args.outputs[0].data();
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
      if (dx == nullptr || dx == args.output_grads[0].raw()) continue;  // shared, in place
      if (static_cast<int>(i) == args.dropped_input) {
        if (!cuda::Accumulates(args, i)) {
          SPILL_CUDA_CHECK(cudaMemsetAsync(dx, 0, args.input_grads[i].bytes(), stream));
        }
        continue;
      }
      cuda::LaunchCopyOrAdd2d(cuda::StoredOf(args.output_grads[0]), 1, n,
                              args.output_grads[0].raw(), n, dx, n, cuda::Accumulates(args, i),
                              stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(concat, kCuda, CudaConcatLayer);
SPILL_REGISTER_LAYER(add, kCuda, CudaAddLayer);

}  // namespace spill
