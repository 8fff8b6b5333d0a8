// im2col_image: one image's column matrix at a time, then one GEMM per group.
// Workspace: one image's columns (none for pointwise convolutions).
#include "layers/cpu/conv_algorithm.h"
#include "layers/cpu/cpu_math.h"
#include "layers/cpu/im2col.h"

namespace spill {
namespace cpu {
namespace {

class Im2colImage : public ConvAlgorithm {
 public:
  std::string name() const override { return "im2col_image"; }

  size_t WorkspaceBytes(const ConvGeometry& g, ConvOp) const override {
    if (IsPointwise(g)) return 0;
    return static_cast<size_t>(g.channels * g.kernel[0] * g.kernel[1] * g.out_plane()) *
           sizeof(float);
  }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void* workspace) const override {
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), plane = g.out_plane();
    float* col = static_cast<float*>(workspace);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* columns = Columns(g, x + n * g.channels * g.in_plane(), col);
      float* out = y + n * g.filters * plane;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(false, false, fg, plane, k, 1.0f, w + grp * fg * k, k, columns + grp * k * plane,
             plane, 0.0f, out + grp * fg * plane, plane);
      }
    }
    if (bias) AddConvBias(g, bias, y);
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void* workspace) const override {
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), plane = g.out_plane();
    const int64_t image_size = g.channels * g.in_plane();
    float* col = static_cast<float*>(workspace);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* grad = dy + n * g.filters * plane;
      float* image = dx + n * image_size;
      // Pointwise: the columns are the image itself.
      float* target = IsPointwise(g) ? image : col;
      const float beta = IsPointwise(g) && accumulate ? 1.0f : 0.0f;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(true, false, k, plane, fg, 1.0f, w + grp * fg * k, k, grad + grp * fg * plane, plane,
             beta, target + grp * k * plane, plane);
      }
      if (IsPointwise(g)) continue;
      if (!accumulate) Fill(image, image_size, 0.0f);
      Col2ImAdd(col, g, image);
    }
  }

  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void* workspace) const override {
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), plane = g.out_plane();
    float* col = static_cast<float*>(workspace);
    for (int64_t n = 0; n < g.batch; ++n) {
      const float* columns = Columns(g, x + n * g.channels * g.in_plane(), col);
      const float* grad = dy + n * g.filters * plane;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(false, true, fg, k, plane, 1.0f, grad + grp * fg * plane, plane,
             columns + grp * k * plane, plane, n == 0 && !accumulate ? 0.0f : 1.0f,
             dw + grp * fg * k, k);
      }
    }
    if (db) ConvBiasGradient(g, dy, db, bias_sums);
  }

 private:
  static const float* Columns(const ConvGeometry& g, const float* image, float* col) {
    if (IsPointwise(g)) return image;
    Im2Col(image, g, col);
    return col;
  }
};

}  // namespace

SPILL_REGISTER_CONV_ALGORITHM(Im2colImage);

}  // namespace cpu
}  // namespace spill
