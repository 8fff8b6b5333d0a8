// attention on the GPU (layers/cuda/sequence_kernels.cu): a thread per
// query forms its row - scores, maximum and sum in three passes, the
// output in a fourth - and saves what the algorithm keeps; backward takes a
// thread per query for dQ and the row's sum(P dP), then a thread per key for
// dK and dV, each adding the queries in order (no atomics). Rows and heads
// run in parallel; a head's depth lives in registers (at most
// kMaxAttentionDepth). Every image is independent and everything it saves is
// its own, so a slice of the batch runs the same threads on fewer images.
// 16-bit tensors are read and written as they are stored (stored_cuda.h);
// what forward saves and the row sums stay float32.
#include "framework/graph/layer_registry.h"
#include "layers/attention_layer.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/sequence_kernels_cuda.h"

namespace spill {
namespace {

class CudaAttentionLayer : public AttentionLayer {
 public:
  using AttentionLayer::AttentionLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override {
    SPILL_RETURN_IF_ERROR(AttentionLayer::Reshape(inputs, outputs));
    if (depth_ > cuda::kMaxAttentionDepth) {
      return InvalidArgument("a head of " + std::to_string(depth_) +
                             " channels (C / heads) is deeper than the CUDA kernels' " +
                             std::to_string(cuda::kMaxAttentionDepth) + "; use more heads");
    }
    return Status::Ok();
  }

  // Backward's workspace: each query's sum(P dP).
  size_t workspace_bytes(Pass pass) const override {
    return pass == Pass::kForward ? 0 : static_cast<size_t>(n_ * heads_ * steps_) * sizeof(float);
  }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchAttentionForward(
        cuda::StoredOf(args.outputs[0]), Geometry(args.inputs[0].shape().n()), args.inputs[0].raw(),
        args.outputs[0].raw(), args.aux[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.input_grads[0].valid()) return;
    SPILL_CHECK(args.workspace.bytes >= workspace_bytes(Pass::kBackward)) << name();
    cuda::LaunchAttentionBackward(
        cuda::StoredOf(args.output_grads[0]), Geometry(args.inputs[0].shape().n()),
        args.inputs[0].raw(), args.output_grads[0].raw(), args.aux[0].data(),
        static_cast<float*>(args.workspace.data), args.input_grads[0].raw(), args.accumulate[0],
        cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  cuda::AttentionShape Geometry(int64_t images) const {
    cuda::AttentionShape s;
    s.images = images;
    s.channels = channels_;
    s.steps = steps_;
    s.heads = heads_;
    s.causal = causal_;
    s.tiled = tiled_;
    return s;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(attention, kCuda, CudaAttentionLayer);

}  // namespace spill
