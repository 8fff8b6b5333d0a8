// fully_connected on the GPU: cuBLAS SGEMM on the device's handle (which the
// device sets to CUBLAS_PEDANTIC_MATH: plain float32, no TF32), the bias and
// its gradient by kernels (no ones vector, so no hidden allocation).
//
// cuBLAS is column-major: a row-major R x C matrix is, to cuBLAS, its C x R
// transpose with leading dimension C. So y (N x M) is y^T (M x N, ld M) =
// W x^T, with W (M x K) read as W^T (K x M, ld K) and transposed, and x
// (N x K) read as x^T (K x N, ld K).
#include <climits>

#include "framework/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/fully_connected_layer.h"

namespace spill {
namespace {

int AsInt(int64_t v, const char* what) {
  SPILL_CHECK(v >= 0 && v <= INT_MAX) << what << " (" << v << ") exceeds cuBLAS's int range";
  return static_cast<int>(v);
}

class CudaFullyConnectedLayer : public FullyConnectedLayer {
 public:
  using FullyConnectedLayer::FullyConnectedLayer;

  void Forward(const ForwardArgs& args) const override {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int n = AsInt(batch_size_, "batch"), k = AsInt(in_features_, "inputs"),
              m = AsInt(outputs_, "outputs");
    float* y = args.outputs[0].data();
    const float one = 1.0f, zero = 0.0f;
    // y^T (M x N) = W (M x K) * x^T (K x N)
    SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one,
                                   args.params[0].data(), k, args.inputs[0].data(), k, &zero, y,
                                   m));
    if (!bias_) return;
    cuda::LaunchAddRowBias(batch_size_, outputs_, args.params[1].data(), y,
                           device.compute_stream());
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int n = AsInt(batch_size_, "batch"), k = AsInt(in_features_, "inputs"),
              m = AsInt(outputs_, "outputs");
    const float* dy = args.output_grads[0].data();
    const float one = 1.0f, zero = 0.0f;
    if (float* dw = cuda::ParamGrad(args, 0)) {
      // dW (M x K) = dy^T x; column-major dW^T (K x M) = x^T (K x N) * dy (N x M)
      SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one,
                                     args.inputs[0].data(), k, dy, m, &zero, dw, k));
    }
    if (bias_) {
      if (float* db = cuda::ParamGrad(args, 1)) {
        cuda::LaunchColumnSums(batch_size_, outputs_, dy, db, device.compute_stream());
        SPILL_CUDA_CHECK_LAUNCH();
      }
    }
    if (float* dx = cuda::InputGrad(args, 0)) {
      // dx (N x K) = dy W; column-major dx^T (K x N) = W^T (K x M) * dy^T (M x N)
      const float beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
      SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one,
                                     args.params[0].data(), k, dy, m, &beta, dx, k));
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(fully_connected, kCuda, CudaFullyConnectedLayer);

}  // namespace spill
