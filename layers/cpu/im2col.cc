#include "layers/cpu/im2col.h"

#include <algorithm>
#include <cstdint>

namespace spill {
namespace cpu {

bool IsPointwise(const ConvGeometry& g) {
  return g.kernel[0] == 1 && g.kernel[1] == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
         g.pad[0] == 0 && g.pad[1] == 0;
}

void Im2ColRow(const ConvGeometry& g, const float* plane, int64_t ki, int64_t kj, float* out) {
  const int64_t col_offset = kj * g.dilation[1] - g.pad[1];
  for (int64_t oh = 0; oh < g.out_height; ++oh) {
    const int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dilation[0];
    float* line = out + oh * g.out_width;
    if (ih < 0 || ih >= g.height) {
      std::fill(line, line + g.out_width, 0.0f);
      continue;
    }
    const float* src = plane + ih * g.width;
    for (int64_t ow = 0; ow < g.out_width; ++ow) {
      const int64_t iw = ow * g.stride[1] + col_offset;
      line[ow] = (iw >= 0 && iw < g.width) ? src[iw] : 0.0f;
    }
  }
}

void Col2ImRowAdd(const ConvGeometry& g, const float* in, int64_t ki, int64_t kj, float* plane) {
  const int64_t col_offset = kj * g.dilation[1] - g.pad[1];
  for (int64_t oh = 0; oh < g.out_height; ++oh) {
    const int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dilation[0];
    if (ih < 0 || ih >= g.height) continue;
    float* dst = plane + ih * g.width;
    const float* line = in + oh * g.out_width;
    for (int64_t ow = 0; ow < g.out_width; ++ow) {
      const int64_t iw = ow * g.stride[1] + col_offset;
      if (iw >= 0 && iw < g.width) dst[iw] += line[ow];
    }
  }
}

void Im2Col(const float* image, const ConvGeometry& g, float* col) {
  const int64_t kh = g.kernel[0], kw = g.kernel[1];
  const int64_t rows = g.channels * kh * kw;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t c = row / (kh * kw);
    Im2ColRow(g, image + c * g.in_plane(), (row / kw) % kh, row % kw, col + row * g.out_plane());
  }
}

void Col2ImAdd(const float* col, const ConvGeometry& g, float* image) {
  const int64_t kh = g.kernel[0], kw = g.kernel[1];
  // One thread per channel: each image plane is written by one thread, in a
  // fixed order, so the sums are deterministic.
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t tap = 0; tap < kh * kw; ++tap) {
      Col2ImRowAdd(g, col + (c * kh * kw + tap) * g.out_plane(), tap / kw, tap % kw,
                   image + c * g.in_plane());
    }
  }
}

}  // namespace cpu
}  // namespace spill
