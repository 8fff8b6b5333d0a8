// fully_connected on the GPU: cuBLAS on the device's handle (which the
// device sets to CUBLAS_PEDANTIC_MATH: plain float32, no TF32), the bias and
// its gradient by kernels (no ones vector, so no hidden allocation).
//
// Two ways of running, as the CPU layer:
//   * the whole batch: three SGEMMs (the default);
//   * image by image (BatchSlice::in_image_order: a slice of the batch, or
//     an algorithm pinned): y and dx one SGEMV per image; dW one rank-one
//     SGEMM per image, the step's first image overwriting, every later one
//     adding in batch order; db summed row after row into what the earlier
//     slices left. cuBLAS's blocking depends on the batch, so only this way
//     does a step over slices give the bits of the step over the batch.
//
// cuBLAS is column-major: a row-major R x C matrix is, to cuBLAS, its C x R
// transpose with leading dimension C. So y (N x M) is y^T (M x N, ld M) =
// W x^T, with W (M x K) read as W^T (K x M, ld K) and transposed, and x
// (N x K) read as x^T (K x N, ld K).
#include <climits>

#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_kernels_cuda.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/fully_connected_layer.h"
#include "layers/slice_plans.h"

namespace spill {
namespace {

int AsInt(int64_t v, const char* what) {
  SPILL_CHECK(v >= 0 && v <= INT_MAX) << what << " (" << v << ") exceeds cuBLAS's int range";
  return static_cast<int>(v);
}

class CudaFullyConnectedLayer : public FullyConnectedLayer {
 public:
  using FullyConnectedLayer::FullyConnectedLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int64_t images = args.inputs[0].shape().n();
    const int n = AsInt(images, "batch"), k = AsInt(in_features_, "inputs"),
              m = AsInt(outputs_, "outputs");
    const float* w = args.params[0].data();
    const float* x = args.inputs[0].data();
    float* y = args.outputs[0].data();
    const float one = 1.0f, zero = 0.0f;
    if (!args.slice.in_image_order()) {
      // y^T (M x N) = W (M x K) * x^T (K x N)
      SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, k,
                                     x, k, &zero, y, m));
    } else {
      // y_i (M) = W (M x K) x_i: column-major W^T (K x M) transposed.
      for (int64_t i = 0; i < images; ++i) {
        SPILL_CUBLAS_CHECK(cublasSgemv(device.cublas(), CUBLAS_OP_T, k, m, &one, w, k, x + i * k, 1,
                                       &zero, y + i * m, 1));
      }
    }
    if (!bias_) return;
    cuda::LaunchAddRowBias(images, outputs_, args.params[1].data(), y, device.compute_stream());
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Backward(const BackwardArgs& args) const override {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int64_t images = args.output_grads[0].shape().n();
    const int n = AsInt(images, "batch"), k = AsInt(in_features_, "inputs"),
              m = AsInt(outputs_, "outputs");
    const float* dy = args.output_grads[0].data();
    const float* x = args.inputs[0].data();
    const float* w = args.params[0].data();
    const bool by_image = args.slice.in_image_order();
    const float one = 1.0f, zero = 0.0f;
    if (float* dw = cuda::ParamGrad(args, 0)) {
      if (!by_image) {
        // dW (M x K) = dy^T x; column-major dW^T (K x M) = x^T (K x N) * dy (N x M)
        SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one, x,
                                       k, dy, m, &zero, dw, k));
      } else {
        // dW^T (K x M) (=|+=) x_i (K x 1) * dy_i^T (1 x M)
        for (const ImageCall& c : ImageCalls(args.slice, images)) {
          SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, 1, &one,
                                         x + c.index * k, k, dy + c.index * m, m,
                                         c.first ? &zero : &one, dw, k));
        }
      }
    }
    if (float* db = bias_ ? cuda::ParamGrad(args, 1) : nullptr) {
      if (by_image) {
        cuda::LaunchColumnSumsInOrder(images, outputs_, dy, db, !args.slice.first(),
                                      device.compute_stream());
      } else {
        cuda::LaunchColumnSums(images, outputs_, dy, db, device.compute_stream());
      }
      SPILL_CUDA_CHECK_LAUNCH();
    }
    if (float* dx = cuda::InputGrad(args, 0)) {
      const float beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
      if (!by_image) {
        // dx (N x K) = dy W; column-major dx^T (K x N) = W^T (K x M) * dy^T (M x N)
        SPILL_CUBLAS_CHECK(cublasSgemm(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one, w,
                                       k, dy, m, &beta, dx, k));
      } else {
        // dx_i (K) = W^T dy_i: column-major W^T (K x M) as it is.
        for (int64_t i = 0; i < images; ++i) {
          SPILL_CUBLAS_CHECK(cublasSgemv(device.cublas(), CUBLAS_OP_N, k, m, &one, w, k, dy + i * m,
                                         1, &beta, dx + i * k, 1));
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(fully_connected, kCuda, CudaFullyConnectedLayer);

}  // namespace spill
