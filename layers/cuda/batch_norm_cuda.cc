// batch_norm on the GPU with the layer's own kernels rather than cuDNN's
// BatchNormalization*: the CPU layer's recipe (double sums, biased
// variance to normalize and unbiased for the running variance, saved mean
// and 1 / sqrt(var + eps) in aux, output (x - mean) * (gamma * inv_std) +
// beta computed from the saved statistics) is what makes a recomputing
// forward reproduce the output bit for bit without touching the running
// statistics.
//
// Every sum over the batch goes image by image in batch order into double
// sums carried in the layer's workspace (2 doubles per channel), in the
// CPU layer's sweeps: forward sums, squared deviations, normalization;
// backward the gradient sums, then the input gradient. So a step computed
// over slices of the batch (memory.chunk, streamed steps) - sweep by sweep,
// slice by slice, the workspace staying with the step - gives the bits of
// the step over the whole batch (layers/slice_plans.h says which kernels a
// call enqueues). In a 16-bit network x, y, dy and dx are read and written
// as they are stored (stored_cuda.h), the statistics and parameters float32.
#include "framework/graph/layer_registry.h"
#include "layers/batch_norm_layer.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

class CudaBatchNormLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }
  int slice_sweeps(Pass pass) const override {
    return pass == Pass::kForward ? kBatchNormForwardSweeps : kBatchNormBackwardSweeps;
  }
  // The carried sums, per channel: two doubles.
  size_t workspace_bytes(Pass pass) const override {
    return 2 * static_cast<size_t>(channels_) * sizeof(double);
  }

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    const BatchNormForwardPlan plan =
        PlanBatchNormForward(args.slice, n, plane, args.phase, args.recompute);
    cudaStream_t stream = cuda::StreamOf(args.device);
    const cuda::Stored stored = cuda::StoredOf(args.inputs[0]);
    const void* x = args.inputs[0].raw();
    float* mean = args.aux[0].data();
    float* inv_std = args.aux[1].data();
    if (plan.sums || plan.squares || plan.finish) {
      double* carry = Carry(args.workspace);
      if (plan.sums) {
        cuda::LaunchBatchNormSums(stored, n, c, plane, x, carry, plan.start, false, 0, stream);
      }
      if (plan.squares) {
        cuda::LaunchBatchNormSums(stored, n, c, plane, x, carry, plan.start, true, plan.count,
                                  stream);
      }
      if (plan.finish) {
        cuda::LaunchBatchNormFinish(c, carry, plan.count, eps_, momentum_, mean, inv_std,
                                    args.params[2].data(), args.params[3].data(), stream);
      }
    }
    if (plan.from_running) {
      cuda::LaunchBatchNormFromRunning(c, args.params[2].data(), args.params[3].data(), eps_, mean,
                                       inv_std, stream);
    }
    // A recomputing forward in training normalizes with the saved statistics.
    if (plan.normalize) {
      cuda::LaunchBatchNormApply(stored, n, c, plane, x, args.params[0].data(),
                                 args.params[1].data(), mean, inv_std, args.outputs[0].raw(),
                                 stream);
    }
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    float* dgamma = cuda::ParamGrad(args, 0);
    float* dbeta = cuda::ParamGrad(args, 1);
    float* dx = cuda::InputGrad(args, 0);
    if (dgamma == nullptr && dbeta == nullptr && dx == nullptr) return;
    const BatchNormBackwardPlan plan = PlanBatchNormBackward(args.slice, n, plane, dx != nullptr);
    cudaStream_t stream = cuda::StreamOf(args.device);
    double* carry = Carry(args.workspace);
    const cuda::Stored stored = cuda::StoredOf(args.inputs[0]);
    const void* x = args.inputs[0].raw();
    const void* dy = args.output_grads[0].raw();
    const float* mean = args.aux[0].data();
    const float* inv_std = args.aux[1].data();
    if (plan.sums) {
      cuda::LaunchBatchNormGradientSums(stored, n, c, plane, x, dy, mean, carry, plan.start,
                                        stream);
    }
    if (plan.param_grads) cuda::LaunchBatchNormParamGrads(c, carry, inv_std, dgamma, dbeta, stream);
    if (plan.input_grad) {
      cuda::LaunchBatchNormInputGrad(stored, n, c, plane, x, dy, args.params[0].data(), mean,
                                     inv_std, carry, plan.count, dx, cuda::Accumulates(args, 0),
                                     stream);
    }
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  double* Carry(const Workspace& workspace) const {
    SPILL_CHECK(workspace.data != nullptr && workspace.bytes >= workspace_bytes(Pass::kForward))
        << "batch_norm '" << name() << "': its sums need " << workspace_bytes(Pass::kForward)
        << " bytes of workspace, got " << workspace.bytes;
    return static_cast<double*>(workspace.data);
  }
};

}  // namespace

SPILL_REGISTER_LAYER(batch_norm, kCuda, CudaBatchNormLayer);

}  // namespace spill
