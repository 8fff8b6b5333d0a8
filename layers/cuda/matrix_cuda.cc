// matmul, softmax and reshape on the GPU (matrix_kernels_cuda.h).
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/matrix_kernels_cuda.h"
#include "layers/matrix_layers.h"

namespace spill {
namespace {

class CudaMatmulLayer : public MatmulLayer {
 public:
  using MatmulLayer::MatmulLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const Shape& a = args.inputs[0].shape();
    cuda::LaunchMatmulForward(geometry_, a.n() * a.c(), args.inputs[0].data(),
                              args.inputs[1].data(), args.outputs[0].data(),
                              cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    const Shape& a = args.inputs[0].shape();
    cuda::LaunchMatmulBackward(
        geometry_, a.n() * a.c(), args.inputs[0].data(), args.inputs[1].data(),
        args.output_grads[0].data(), cuda::InputGrad(args, 0), cuda::Accumulates(args, 0),
        cuda::InputGrad(args, 1), cuda::Accumulates(args, 1), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

class CudaSoftmaxLayer : public SoftmaxLayer {
 public:
  using SoftmaxLayer::SoftmaxLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    cuda::LaunchSoftmaxRowsForward(RowsOf(args.inputs[0].shape()), args.inputs[0].data(),
                                   args.outputs[0].data(), cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    if (dx == nullptr) return;
    cuda::LaunchSoftmaxRowsBackward(RowsOf(args.outputs[0].shape()), args.outputs[0].data(),
                                    args.output_grads[0].data(), dx, cuda::Accumulates(args, 0),
                                    cuda::StreamOf(args.device));
    SPILL_CUDA_CHECK_LAUNCH();
  }
};

class CudaReshapeLayer : public ReshapeLayer {
 public:
  using ReshapeLayer::ReshapeLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].numel();
    if (n == 0) return;
    SPILL_CUDA_CHECK(cudaMemcpyAsync(args.outputs[0].data(), args.inputs[0].data(),
                                     static_cast<size_t>(n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, cuda::StreamOf(args.device)));
  }

  void Backward(const BackwardArgs& args) const override {
    float* dx = cuda::InputGrad(args, 0);
    const int64_t n = args.output_grads[0].numel();
    if (dx == nullptr || n == 0) return;
    cudaStream_t stream = cuda::StreamOf(args.device);
    if (cuda::Accumulates(args, 0)) {
      cuda::LaunchAxpy(n, 1.0f, args.output_grads[0].data(), dx, stream);
      SPILL_CUDA_CHECK_LAUNCH();
      return;
    }
    SPILL_CUDA_CHECK(cudaMemcpyAsync(dx, args.output_grads[0].data(),
                                     static_cast<size_t>(n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream));
  }
};

}  // namespace

SPILL_REGISTER_LAYER(matmul, kCuda, CudaMatmulLayer);
SPILL_REGISTER_LAYER(softmax, kCuda, CudaSoftmaxLayer);
SPILL_REGISTER_LAYER(reshape, kCuda, CudaReshapeLayer);

}  // namespace spill
