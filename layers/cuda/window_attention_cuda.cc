// window_attention on the GPU (layers/cuda/window_attention_kernels.cu): a
// thread per query of each window and head forms its row - scores, maximum
// and sum in three passes, the probabilities and the output in a fourth -
// and saves the probabilities; backward takes a thread per query for dQ and
// the row's sum(P dP), then a thread per key for dK and dV, each adding the
// queries in order, and a thread per entry of the table for its gradient,
// adding the units in order (no atomics) - and with `cosine` a thread per
// head for logit_scale's, likewise. Every image's outputs are its own, and
// the parameters' gradients are overwritten on the step's first slice and
// continued by the others, so a slice of the batch runs the same threads
// on fewer images and the slices give the whole batch's bits.
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/sequence_kernels_cuda.h"
#include "layers/cuda/window_attention_kernels_cuda.h"
#include "layers/window_attention_layer.h"

namespace spill {
namespace {

class CudaWindowAttentionLayer : public WindowAttentionLayer {
 public:
  using WindowAttentionLayer::WindowAttentionLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    SPILL_RETURN_IF_ERROR(WindowAttentionLayer::Reshape(inputs, outputs));
    if (depth_ > cuda::kMaxAttentionDepth) {
      return InvalidArgument("a head of " + std::to_string(depth_) +
                             " channels (C / heads) is deeper than the CUDA kernels' " +
                             std::to_string(cuda::kMaxAttentionDepth) + "; use more heads");
    }
    return Status::Ok();
  }

  // Backward's workspace: each query's sum(P dP), and with `cosine` its
  // sum(dS cos).
  size_t workspace_bytes(Pass pass) const override {
    const int64_t per_query = cosine_ ? 2 : 1;
    return pass == Pass::kForward
               ? 0
               : static_cast<size_t>(per_query * Units(n_) * grid_.tokens()) * sizeof(float);
  }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchWindowAttentionForward(
        cuda::StoredOf(args.outputs[0]), Geometry(args.inputs[0].shape().n()), args.inputs[0].raw(),
        args.params[0].data(), LogitScale(args.params), args.outputs[0].raw(), args.aux[0].data(),
        cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = args.input_grads[0].valid() ? args.input_grads[0].data() : nullptr;
    float* dtable = cuda::ParamGrad(args, 0);
    float* dlogit = cosine_ ? cuda::ParamGrad(args, 1) : nullptr;
    if (dx == nullptr && dtable == nullptr && dlogit == nullptr) return;
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kBackward)) << name();
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (args.slice.first()) {
      if (dtable != nullptr) {
        const size_t bytes = static_cast<size_t>(grid_.table_rows() * heads_) * sizeof(float);
        SPILL_CUDA_CHECK(cudaMemsetAsync(dtable, 0, bytes, stream));
      }
      if (dlogit != nullptr) {
        const size_t bytes = static_cast<size_t>(heads_) * sizeof(float);
        SPILL_CUDA_CHECK(cudaMemsetAsync(dlogit, 0, bytes, stream));
      }
    }
    cuda::LaunchWindowAttentionBackward(
        cuda::StoredOf(args.output_grads[0]), Geometry(args.inputs[0].shape().n()),
        args.inputs[0].raw(), args.output_grads[0].raw(), args.aux[0].data(),
        LogitScale(args.params), static_cast<float*>(args.workspace.data), dx,
        cuda::Accumulates(args, 0), dtable, dlogit, stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  cuda::WindowAttentionShape Geometry(int64_t images) const {
    cuda::WindowAttentionShape s;
    s.images = images;
    s.channels = channels_;
    s.heads = heads_;
    s.grid = grid_;
    s.scale = Scale();
    s.cosine = cosine_;
    return s;
  }

  // logit_scale with `cosine`, else null.
  const float* LogitScale(const std::vector<Tensor>& params) const {
    return cosine_ ? params[1].data() : nullptr;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(window_attention, kCuda, CudaWindowAttentionLayer);

}  // namespace spill
