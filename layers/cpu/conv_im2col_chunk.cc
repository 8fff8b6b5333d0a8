// im2col_chunk: im2col of kChunkImages images at a time into one column matrix
// per group (C/G*kh*kw x images*Ho*Wo), then one GEMM per group and chunk.
// Workspace: the chunk's column matrix (C*kh*kw x images*Ho*Wo floats) plus a
// filter-major copy of the chunk's output or output gradient (F x
// images*Ho*Wo floats). A chunk of one image needs no copy, and a pointwise
// convolution of one image no columns.
//
// The engine here also serves im2col_batch (conv_im2col_batch.cc), whose chunk
// is the whole batch.
#include "layers/cpu/conv_im2col_chunk.h"

#include <algorithm>
#include <memory>

#include "layers/cpu/cpu_math.h"
#include "layers/cpu/im2col.h"

namespace spill {
namespace cpu {

namespace {

constexpr int64_t kChunkImages = 8;

// Columns of `images` consecutive images: row r holds image j's row r at
// [j * Ho*Wo, (j + 1) * Ho*Wo).
void ChunkIm2Col(const ConvGeometry& g, const float* x, int64_t images, float* col) {
  const int64_t kh = g.kernel[0], kw = g.kernel[1], plane = g.out_plane();
  const int64_t rows = g.channels * kh * kw;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t j = 0; j < images; ++j) {
      const float* in = x + (j * g.channels + row / (kh * kw)) * g.in_plane();
      Im2ColRow(g, in, (row / kw) % kh, row % kw, col + (row * images + j) * plane);
    }
  }
}

// dx (the chunk's images) = or += col2im(col). Each image plane is written by
// one thread in a fixed order.
void ChunkCol2Im(const ConvGeometry& g, const float* col, int64_t images, bool accumulate,
                 float* dx) {
  const int64_t kh = g.kernel[0], kw = g.kernel[1], plane = g.out_plane();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t j = 0; j < images; ++j) {
    for (int64_t c = 0; c < g.channels; ++c) {
      float* image = dx + (j * g.channels + c) * g.in_plane();
      if (!accumulate) std::fill(image, image + g.in_plane(), 0.0f);
      for (int64_t tap = 0; tap < kh * kw; ++tap) {
        const float* in = col + ((c * kh * kw + tap) * images + j) * plane;
        Col2ImRowAdd(g, in, tap / kw, tap % kw, image);
      }
    }
  }
}

// Between the batch layout (images, F, Ho*Wo) and the filter-major one
// (F, images * Ho*Wo) that one GEMM per group reads or writes.
void ToFilterMajor(const ConvGeometry& g, const float* y, int64_t images, float* out) {
  const int64_t plane = g.out_plane();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t f = 0; f < g.filters; ++f) {
    for (int64_t j = 0; j < images; ++j) {
      const float* src = y + (j * g.filters + f) * plane;
      std::copy(src, src + plane, out + (f * images + j) * plane);
    }
  }
}

void FromFilterMajor(const ConvGeometry& g, const float* in, int64_t images, float* y) {
  const int64_t plane = g.out_plane();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t j = 0; j < images; ++j) {
    for (int64_t f = 0; f < g.filters; ++f) {
      const float* src = in + (f * images + j) * plane;
      std::copy(src, src + plane, y + (j * g.filters + f) * plane);
    }
  }
}

class Im2colChunked : public ConvAlgorithm {
 public:
  Im2colChunked(const std::string& name, int64_t images) : name_(name), images_(images) {}

  std::string name() const override { return name_; }

  size_t WorkspaceBytes(const ConvGeometry& g, ConvOp) const override {
    const int64_t images = ChunkImages(g);
    return static_cast<size_t>(ColumnFloats(g, images) + CopyFloats(g, images)) * sizeof(float);
  }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void* workspace) const override {
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), step = ChunkImages(g);
    for (int64_t n = 0; n < g.batch; n += step) {
      const int64_t images = std::min(step, g.batch - n), width = images * g.out_plane();
      const float* columns = Columns(g, x + n * g.channels * g.in_plane(), images, workspace);
      // One image's output is already filter-major.
      float* out = images == 1 ? y + n * g.filters * g.out_plane() : Copy(g, step, workspace);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(false, false, fg, width, k, 1.0f, w + grp * fg * k, k, columns + grp * k * width,
             width, 0.0f, out + grp * fg * width, width);
      }
      if (images > 1) FromFilterMajor(g, out, images, y + n * g.filters * g.out_plane());
    }
    if (bias) AddConvBias(g, bias, y);
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void* workspace) const override {
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), step = ChunkImages(g);
    for (int64_t n = 0; n < g.batch; n += step) {
      const int64_t images = std::min(step, g.batch - n), width = images * g.out_plane();
      const float* grad = Grad(g, dy + n * g.filters * g.out_plane(), images, step, workspace);
      float* image = dx + n * g.channels * g.in_plane();
      // Pointwise, one image: the columns are the image itself.
      const bool direct = IsPointwise(g) && images == 1;
      float* col = direct ? image : static_cast<float*>(workspace);
      const float beta = direct && accumulate ? 1.0f : 0.0f;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(true, false, k, width, fg, 1.0f, w + grp * fg * k, k, grad + grp * fg * width, width,
             beta, col + grp * k * width, width);
      }
      if (!direct) ChunkCol2Im(g, col, images, accumulate, image);
    }
  }

  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void* workspace) const override {
    const int64_t k = g.col_rows(), fg = g.filters_per_group(), step = ChunkImages(g);
    for (int64_t n = 0; n < g.batch; n += step) {
      const int64_t images = std::min(step, g.batch - n), width = images * g.out_plane();
      const float* grad = Grad(g, dy + n * g.filters * g.out_plane(), images, step, workspace);
      const float* columns = Columns(g, x + n * g.channels * g.in_plane(), images, workspace);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(false, true, fg, k, width, 1.0f, grad + grp * fg * width, width,
             columns + grp * k * width, width, n == 0 && !accumulate ? 0.0f : 1.0f,
             dw + grp * fg * k, k);
      }
    }
    if (db) ConvBiasGradient(g, dy, db, bias_sums);
  }

 private:
  int64_t ChunkImages(const ConvGeometry& g) const {
    return images_ == 0 ? g.batch : std::min(images_, g.batch);
  }

  // Workspace: the column matrix of a full chunk, then the filter-major copy.
  static int64_t ColumnFloats(const ConvGeometry& g, int64_t images) {
    if (IsPointwise(g) && images == 1) return 0;
    return g.channels * g.kernel[0] * g.kernel[1] * images * g.out_plane();
  }
  static int64_t CopyFloats(const ConvGeometry& g, int64_t images) {
    return images > 1 ? g.filters * images * g.out_plane() : 0;
  }
  static float* Copy(const ConvGeometry& g, int64_t step, void* workspace) {
    return static_cast<float*>(workspace) + ColumnFloats(g, step);
  }

  static const float* Columns(const ConvGeometry& g, const float* x, int64_t images,
                              void* workspace) {
    if (IsPointwise(g) && images == 1) return x;
    float* col = static_cast<float*>(workspace);
    ChunkIm2Col(g, x, images, col);
    return col;
  }

  // The chunk's output gradient, filter-major.
  static const float* Grad(const ConvGeometry& g, const float* dy, int64_t images, int64_t step,
                           void* workspace) {
    if (images == 1) return dy;
    float* copy = Copy(g, step, workspace);
    ToFilterMajor(g, dy, images, copy);
    return copy;
  }

  std::string name_;
  int64_t images_;
};

class Im2colChunk : public Im2colChunked {
 public:
  Im2colChunk() : Im2colChunked("im2col_chunk", kChunkImages) {}
};

}  // namespace

std::unique_ptr<ConvAlgorithm> NewIm2colChunked(const std::string& name, int64_t images) {
  return std::make_unique<Im2colChunked>(name, images);
}

SPILL_REGISTER_CONV_ALGORITHM(Im2colChunk);

}  // namespace cpu
}  // namespace spill
