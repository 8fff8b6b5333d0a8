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
//
// In 16 bits (input and output stored in one 16-bit type: computes_16_bit)
// the same products run as cublasGemmEx on tensor cores with float32 sums:
// x, y, dy and dx as they are stored, the float32 weights rounded into a
// 16-bit copy in the workspace for each call, and the filter gradient
// written (or added) straight into its float32 tensor. Image by image each
// matrix-vector product is a GemmEx of one column.
#include <climits>

#include "framework/device/device.h"
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

// cuBLAS's default math (tensor cores) for the 16-bit products, on a handle
// the device keeps in pedantic float32 math; restored when it goes.
class DefaultMath {
 public:
  explicit DefaultMath(cublasHandle_t handle) : handle_(handle) {
    SPILL_CUBLAS_CHECK(cublasGetMathMode(handle_, &saved_));
    SPILL_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  }
  ~DefaultMath() { cublasSetMathMode(handle_, saved_); }
  DefaultMath(const DefaultMath&) = delete;
  DefaultMath& operator=(const DefaultMath&) = delete;

 private:
  cublasHandle_t handle_;
  cublasMath_t saved_ = CUBLAS_DEFAULT_MATH;
};

// C = alpha op(A) op(B) + beta C with A and B of `ab`, C of `c`, float32 sums.
void GemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
            const void* a, cudaDataType ab, int lda, const void* b, int ldb, const float* beta,
            void* c, cudaDataType c_type, int ldc) {
  const float one = 1.0f;
  SPILL_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, a, ab, lda, b, ab, ldb, beta, c, c_type,
                                  ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The element `index * width` elements into `base`, of `bytes` each.
const void* Row(const void* base, int64_t index, int64_t width, size_t bytes) {
  return static_cast<const char*>(base) + index * width * static_cast<int64_t>(bytes);
}
void* Row(void* base, int64_t index, int64_t width, size_t bytes) {
  return static_cast<char*>(base) + index * width * static_cast<int64_t>(bytes);
}

class CudaFullyConnectedLayer : public FullyConnectedLayer {
 public:
  using FullyConnectedLayer::FullyConnectedLayer;

  bool supports_slices() const override { return true; }
  bool computes_16_bit(Pass) const override { return cuda::StoredAlike(*this); }
  // In 16 bits: the weights' 16-bit copy.
  size_t workspace_bytes(Pass) const override {
    if (!Sixteen()) return 0;
    const size_t bytes = static_cast<size_t>(outputs_ * in_features_) * DTypeSize(input_dtype(0));
    return cuda::WorkspaceAligned(bytes);
  }

  void Forward(const ForwardArgs& args) const override {
    if (Sixteen()) return Forward16(args);
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int64_t images = args.inputs[0].shape().n();
    const auto [n, k, m] = SizesOf(images);
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
    AddBias(args, device);
  }

  void Backward(const BackwardArgs& args) const override {
    if (Sixteen()) return Backward16(args);
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int64_t images = args.output_grads[0].shape().n();
    const auto [n, k, m] = SizesOf(images);
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
    BiasGradient(args, device);
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

 private:
  // cuBLAS's sizes of a call over `images` images: images, inputs, outputs.
  struct Sizes {
    int n, k, m;
  };
  Sizes SizesOf(int64_t images) const {
    return {AsInt(images, "batch"), AsInt(in_features_, "inputs"), AsInt(outputs_, "outputs")};
  }

  bool Sixteen() const { return input_dtype(0) != DType::kF32 && cuda::StoredAlike(*this); }
  cudaDataType Type16() const { return input_dtype(0) == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F; }

  // The weights rounded into the front of the workspace.
  const void* NarrowWeights(const Workspace& workspace, CudaDevice& device, const Tensor& w) const {
    SPILL_CHECK(workspace.data != nullptr && workspace.bytes >= workspace_bytes(Pass::kForward))
        << "fully_connected '" << name() << "': its 16-bit weights need "
        << workspace_bytes(Pass::kForward) << " bytes of workspace, got " << workspace.bytes;
    device.ConvertAsync(workspace.data, input_dtype(0), w.raw(), DType::kF32, w.shape().numel(),
                        device.compute_queue());
    return workspace.data;
  }

  void AddBias(const ForwardArgs& args, CudaDevice& device) const {
    if (!bias_) return;
    cuda::LaunchAddRowBias(cuda::StoredOf(args.outputs[0]), args.inputs[0].shape().n(), outputs_,
                           args.params[1].data(), args.outputs[0].raw(), device.compute_stream());
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void BiasGradient(const BackwardArgs& args, CudaDevice& device) const {
    float* db = bias_ ? cuda::ParamGrad(args, 1) : nullptr;
    if (db == nullptr) return;
    const Tensor& dy = args.output_grads[0];
    if (args.slice.in_image_order()) {
      cuda::LaunchColumnSumsInOrder(cuda::StoredOf(dy), dy.shape().n(), outputs_, dy.raw(), db,
                                    !args.slice.first(), device.compute_stream());
    } else {
      cuda::LaunchColumnSums(cuda::StoredOf(dy), dy.shape().n(), outputs_, dy.raw(), db,
                             device.compute_stream());
    }
    SPILL_CUDA_CHECK_LAUNCH();
  }

  void Forward16(const ForwardArgs& args) const {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int64_t images = args.inputs[0].shape().n();
    const auto [n, k, m] = SizesOf(images);
    const cudaDataType type = Type16();
    const size_t bytes = DTypeSize(input_dtype(0));
    const void* w = NarrowWeights(args.workspace, device, args.params[0]);
    const void* x = args.inputs[0].raw();
    void* y = args.outputs[0].raw();
    const float zero = 0.0f;
    {
      DefaultMath math(device.cublas());
      if (!args.slice.in_image_order()) {
        GemmEx(device.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, w, type, k, x, k, &zero, y, type,
               m);
      } else {
        for (int64_t i = 0; i < images; ++i) {
          GemmEx(device.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, 1, k, w, type, k,
                 Row(x, i, k, bytes), k, &zero, Row(y, i, m, bytes), type, m);
        }
      }
    }
    AddBias(args, device);
  }

  void Backward16(const BackwardArgs& args) const {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const int64_t images = args.output_grads[0].shape().n();
    const auto [n, k, m] = SizesOf(images);
    const cudaDataType type = Type16();
    const size_t bytes = DTypeSize(input_dtype(0));
    const void* dy = args.output_grads[0].raw();
    const void* x = args.inputs[0].raw();
    const bool by_image = args.slice.in_image_order();
    const float one = 1.0f, zero = 0.0f;
    DefaultMath math(device.cublas());
    if (float* dw = cuda::ParamGrad(args, 0)) {  // float32, written or added by cuBLAS
      if (!by_image) {
        GemmEx(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, x, type, k, dy, m, &zero, dw,
               CUDA_R_32F, k);
      } else {
        for (const ImageCall& c : ImageCalls(args.slice, images)) {
          GemmEx(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k, m, 1, Row(x, c.index, k, bytes),
                 type, k, Row(dy, c.index, m, bytes), m, c.first ? &zero : &one, dw, CUDA_R_32F, k);
        }
      }
    }
    BiasGradient(args, device);
    if (float* dx = cuda::InputGrad(args, 0)) {
      const void* w = NarrowWeights(args.workspace, device, args.params[0]);
      const float beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
      if (!by_image) {
        GemmEx(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, w, type, k, dy, m, &beta, dx,
               type, k);
      } else {
        for (int64_t i = 0; i < images; ++i) {
          GemmEx(device.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, k, 1, m, w, type, k,
                 Row(dy, i, m, bytes), m, &beta, Row(dx, i, k, bytes), type, k);
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(fully_connected, kCuda, CudaFullyConnectedLayer);

}  // namespace spill
