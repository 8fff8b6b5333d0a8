// embedding on the GPU: a gather forward (one thread per output element);
// backward overwrites the table's gradient on the step's first slice, then
// adds each position's gradient into its id's row image by image and
// position by position in order, one thread per column of the table, as
// the CPU does - no atomics, so a step over slices of the batch gives the
// bits of the whole batch.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/embedding_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/embedding_layer.h"

namespace spill {
namespace {

class CudaEmbeddingLayer : public EmbeddingLayer {
 public:
  using EmbeddingLayer::EmbeddingLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& ids = args.inputs[0].shape();
    cuda::LaunchEmbeddingForward(ids.n(), ids.w(), args.outputs[0].shape().c(), vocabulary_,
                                 args.inputs[0].data(), args.params[0].data(),
                                 args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dw = cuda::ParamGrad(args, 0);
    if (dw == nullptr) return;
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (args.slice.first()) {
      const size_t bytes = static_cast<size_t>(args.param_grads[0].numel()) * sizeof(float);
      SPILL_CUDA_CHECK(cudaMemsetAsync(dw, 0, bytes, stream));
    }
    const Shape& ids = args.inputs[0].shape();
    cuda::LaunchEmbeddingBackward(ids.n(), ids.w(), args.output_grads[0].shape().c(), vocabulary_,
                                  args.inputs[0].data(), args.output_grads[0].data(), dw, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(embedding, kCuda, CudaEmbeddingLayer);

}  // namespace spill
