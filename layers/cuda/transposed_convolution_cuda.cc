// Transposed convolution on the GPU: the convolution of geometry() run
// backwards with im2col / col2im kernels and cuBLAS, one image at a time
// (cuBLAS on the device's handle: plain float32, no TF32). Per image and
// group, with K = filters/groups * kh * kw rows of columns over the input's
// H x W positions:
//   forward      columns = W_g^T x_g, then col2im into y, plus the bias
//   data grad    columns = im2col(dy), dx_g (=|+=) W_g columns
//   weight grad  dW_g (=|+=) x_g columns^T, image by image in batch order
// so a step over slices of the batch adds the same products in the same
// order as the whole batch, and the bias gradient's double sums carry over
// at the start of the workspace. Workspace: one image's columns (and the
// carried sums, backward).
#include <climits>

#include "framework/config/layer_params.h"
#include "framework/graph/layer_registry.h"
#include "layers/cuda/layer_util_cuda.h"
#include "layers/cuda/vision_kernels_cuda.h"
#include "layers/transposed_convolution_layer.h"

namespace spill {
namespace {

int AsInt(int64_t v, const char* what) {
  SPILL_CHECK(v >= 0 && v <= INT_MAX) << what << " (" << v << ") exceeds cuBLAS's int range";
  return static_cast<int>(v);
}

// Row-major C (m x n) = alpha op(A) op(B) + beta C: cuBLAS, column-major,
// computes C^T = op(B)^T op(A)^T.
void RowMajorGemm(cublasHandle_t handle, bool trans_a, bool trans_b, int64_t m, int64_t n,
                  int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                  float* c, int64_t ldc) {
  const float one = 1.0f;
  SPILL_CUBLAS_CHECK(
      cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                  AsInt(n, "columns"), AsInt(m, "rows"), AsInt(k, "inner size"), &one, b,
                  AsInt(ldb, "stride"), a, AsInt(lda, "stride"), &beta, c, AsInt(ldc, "stride")));
}

class CudaTransposedConvolutionLayer : public TransposedConvolutionLayer {
 public:
  explicit CudaTransposedConvolutionLayer(LayerParams& params)
      : TransposedConvolutionLayer(params) {
    if (!params.String("algorithm", "").empty()) {
      params.Fail("algorithm",
                  "the GPU computes transposed convolutions one way (im2col and "
                  "cuBLAS); leave it out");
    }
  }

  bool supports_slices() const override { return true; }
  size_t workspace_bytes(Pass pass) const override {
    return (pass == Pass::kBackward ? CarryBytes() : 0) + ColumnBytes();
  }

  void Forward(const ForwardArgs& args) const override {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const ConvGeometry& g = geom_;
    const int64_t n = args.inputs[0].shape().n(), k = g.col_rows(), positions = g.out_plane();
    const int64_t fg = g.filters_per_group(), out_image = g.channels * g.in_plane();
    float* columns = static_cast<float*>(args.workspace.data);
    const float* w = args.params[0].data();
    for (int64_t i = 0; i < n; ++i) {
      const float* x = args.inputs[0].data() + i * g.filters * positions;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        RowMajorGemm(device.cublas(), true, false, k, positions, fg, w + grp * fg * k, k,
                     x + grp * fg * positions, positions, 0.0f, columns + grp * k * positions,
                     positions);
      }
      cuda::LaunchCol2Im(Window(), columns, args.outputs[0].data() + i * out_image,
                         device.compute_stream());
      SPILL_CUDA_CHECK_LAUNCH();
    }
    if (bias_) {
      cuda::LaunchAddChannelBias(n, g.channels, g.in_plane(), args.params[1].data(),
                                 args.outputs[0].data(), device.compute_stream());
      SPILL_CUDA_CHECK_LAUNCH();
    }
  }

  void Backward(const BackwardArgs& args) const override {
    CudaDevice& device = cuda::DeviceOf(args.device);
    const ConvGeometry& g = geom_;
    const int64_t n = args.inputs[0].shape().n(), k = g.col_rows(), positions = g.out_plane();
    const int64_t fg = g.filters_per_group(), out_image = g.channels * g.in_plane();
    double* carry = static_cast<double*>(args.workspace.data);
    float* columns =
        reinterpret_cast<float*>(static_cast<char*>(args.workspace.data) + CarryBytes());
    const float* w = args.params[0].data();
    const float* dy = args.output_grads[0].data();
    float* dw = cuda::ParamGrad(args, 0);
    float* dx = cuda::InputGrad(args, 0);
    const float data_beta = cuda::Accumulates(args, 0) ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n && (dw != nullptr || dx != nullptr); ++i) {
      cuda::LaunchIm2Col(Window(), dy + i * out_image, columns, device.compute_stream());
      SPILL_CUDA_CHECK_LAUNCH();
      const float* x = args.inputs[0].data() + i * g.filters * positions;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        const float* cols = columns + grp * k * positions;
        if (dw != nullptr) {
          const float beta = i == 0 && args.slice.first() ? 0.0f : 1.0f;
          RowMajorGemm(device.cublas(), false, true, fg, k, positions, x + grp * fg * positions,
                       positions, cols, positions, beta, dw + grp * fg * k, k);
        }
        if (dx != nullptr) {
          RowMajorGemm(device.cublas(), false, false, fg, positions, k, w + grp * fg * k, k, cols,
                       positions, data_beta, dx + (i * g.filters + grp * fg) * positions,
                       positions);
        }
      }
    }
    float* db = bias_ ? cuda::ParamGrad(args, 1) : nullptr;
    if (db == nullptr) return;
    cuda::LaunchChannelGradSums(cuda::Stored::kF32, n, g.channels, g.in_plane(), nullptr, dy,
                                nullptr, carry, args.slice.first(), nullptr, db,
                                device.compute_stream());
    SPILL_CUDA_CHECK_LAUNCH();
  }

 private:
  // The bias gradient's carried sums (the kernel keeps two per channel).
  size_t CarryBytes() const {
    return cuda::WorkspaceAligned(2 * static_cast<size_t>(geom_.channels) * sizeof(double));
  }
  size_t ColumnBytes() const {
    return static_cast<size_t>(geom_.groups * geom_.col_rows() * geom_.out_plane()) * sizeof(float);
  }

  // The window over this layer's output (the convolution's input).
  cuda::WindowShape Window() const {
    const ConvGeometry& g = geom_;
    cuda::WindowShape s;
    s.channels = g.channels;
    cuda::CopyWindow(g, &s);
    s.out_h = g.out_height;
    s.out_w = g.out_width;
    s.dilation_h = g.dilation[0];
    s.dilation_w = g.dilation[1];
    return s;
  }
};

}  // namespace

SPILL_REGISTER_LAYER(transposed_convolution, kCuda, CudaTransposedConvolutionLayer);

}  // namespace spill
