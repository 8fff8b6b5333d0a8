// batch_norm on the GPU with the layer's own kernels rather than cuDNN's
// BatchNormalization*: the CPU layer's exact recipe (double sums, biased
// variance to normalize and unbiased for the running variance, saved mean
// and 1 / sqrt(var + eps) in aux, output (x - mean) * (gamma * inv_std) +
// beta computed from the saved statistics) is what makes a recomputing
// forward reproduce the output bit for bit without touching the running
// statistics. Statistics and gradients reduce one channel per block in a
// fixed tree: deterministic.
#include "framework/layer_registry.h"
#include "layers/batch_norm_layer.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"

namespace spill {
namespace {

class CudaBatchNormLayer : public BatchNormLayer {
 public:
  using BatchNormLayer::BatchNormLayer;

  void Forward(const ForwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    const int64_t n = s.n(), c = s.c(), plane = s.h() * s.w();
    cudaStream_t stream = cuda::StreamOf(args.device);
    const float* x = args.inputs[0].data();
    float* running_mean = args.params[2].data();
    float* running_var = args.params[3].data();
    float* mean = args.aux[0].data();
    float* inv_std = args.aux[1].data();
    if (args.phase == Phase::kEval) {
      cuda::LaunchBatchNormFromRunning(c, running_mean, running_var, eps_, mean, inv_std, stream);
      SPILL_CUDA_CHECK_LAUNCH();
    } else if (!args.recompute) {
      cuda::LaunchBatchNormStatistics(n, c, plane, x, eps_, momentum_, mean, inv_std, running_mean,
                                      running_var, stream);
      SPILL_CUDA_CHECK_LAUNCH();
    }
    // A recomputing forward in training reuses the saved statistics.
    cuda::LaunchBatchNormApply(n, c, plane, x, args.params[0].data(), args.params[1].data(), mean,
                               inv_std, args.outputs[0].data(), stream);
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& s = args.inputs[0].shape();
    float* dgamma = cuda::ParamGrad(args, 0);
    float* dbeta = cuda::ParamGrad(args, 1);
    float* dx = cuda::InputGrad(args, 0);
    if (dgamma == nullptr && dbeta == nullptr && dx == nullptr) return;
    cuda::LaunchBatchNormBackward(s.n(), s.c(), s.h() * s.w(), args.inputs[0].data(),
                                  args.output_grads[0].data(), args.params[0].data(),
                                  args.aux[0].data(), args.aux[1].data(), dgamma, dbeta, dx,
                                  cuda::Accumulates(args, 0), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

}  // namespace

SPILL_REGISTER_LAYER(batch_norm, kCuda, CudaBatchNormLayer);

}  // namespace spill
