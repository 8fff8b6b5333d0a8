// depthwise: one filter per channel (groups == channels == filters, as in
// MobileNet's 3x3 convolutions), computed plane by plane with no workspace.
// Each kernel tap is one loop over the positions of an output row whose input
// lies inside the image (no border tests inside it), contiguous at stride 1
// so the compiler vectorizes it.
//
// Where it pays: the filter gradient of small planes. On the 2x2 and 1x1
// planes at the end of a MobileNet, oneDNN's depthwise filter gradient costs
// 10-20 ms of fixed overhead per call at batch 128, direct 2-5 ms, this 1-3 ms
// (one thread). On larger planes, and for the forward pass and the data
// gradient, oneDNN's kernels stay several times faster; the runtime times
// every candidate and keeps the fastest per operation, so it picks this
// algorithm only where it wins.
//
// Determinism: Forward and BackwardData give each (image, channel) plane to
// one thread, BackwardFilter each channel, and every element is summed in a
// fixed order (taps in order; images, rows and positions in order).
#include <algorithm>
#include <cstring>

#include "layers/cpu/conv_algorithm.h"

namespace spill {
namespace cpu {
namespace {

// The output positions [begin, end) of a row whose input column
// ow * stride + offset lies inside [0, width).
struct Span {
  int64_t begin, end;
};

Span Inside(int64_t offset, int64_t stride, int64_t width, int64_t out_width) {
  // ceil(-offset / stride) and floor((width - 1 - offset) / stride), for
  // numerators of either sign.
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const int64_t begin = std::max<int64_t>(0, -floor_div(offset, stride));
  const int64_t end = std::min<int64_t>(out_width, floor_div(width - 1 - offset, stride) + 1);
  return {begin, std::max(begin, end)};
}

// Taps of a kernel the stack holds (larger kernels take the general path).
constexpr int64_t kMaxTaps = 64;

// Where each kernel column's taps read inside the image: the spans depend on
// the column alone, so they are computed once per call (their divisions would
// cost more than a small plane's multiply-adds).
struct Spans {
  Span of[kMaxTaps];
  explicit Spans(const ConvGeometry& g) {
    for (int64_t kj = 0; kj < g.kernel[1]; ++kj) {
      of[kj] = Inside(kj * g.dilation[1] - g.pad[1], g.stride[1], g.width, g.out_width);
    }
  }
};

// Calls tap(oh, ki, kj, ih, span, offset) for each output row oh and tap (ki,
// kj) whose input row ih lies inside the image, where the row's positions in
// `span` read input column ow * stride + offset.
template <typename Tap>
void ForEachRowTap(const ConvGeometry& g, const Spans& spans, Tap tap) {
  for (int64_t oh = 0; oh < g.out_height; ++oh) {
    for (int64_t ki = 0; ki < g.kernel[0]; ++ki) {
      const int64_t ih = oh * g.stride[0] - g.pad[0] + ki * g.dilation[0];
      if (ih < 0 || ih >= g.height) continue;
      for (int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        const Span span = spans.of[kj];
        if (span.begin < span.end) tap(oh, ki, kj, ih, span, kj * g.dilation[1] - g.pad[1]);
      }
    }
  }
}

// One plane of the output: y = sum over taps of w[tap] * x shifted.
void ForwardPlane(const ConvGeometry& g, const Spans& spans, const float* __restrict x,
                  const float* __restrict w, float* __restrict y) {
  std::fill_n(y, g.out_plane(), 0.0f);
  const int64_t sw = g.stride[1];
  ForEachRowTap(g, spans,
                [&](int64_t oh, int64_t ki, int64_t kj, int64_t ih, Span s, int64_t offset) {
                  const float weight = w[ki * g.kernel[1] + kj];
                  const float* in = x + ih * g.width + offset;
                  float* out = y + oh * g.out_width;
                  if (sw == 1) {
                    for (int64_t ow = s.begin; ow < s.end; ++ow) out[ow] += weight * in[ow];
                  } else {
                    for (int64_t ow = s.begin; ow < s.end; ++ow) out[ow] += weight * in[ow * sw];
                  }
                });
}

// One plane of the input gradient: dx += each tap's weight times dy, placed
// where the tap read x.
void BackwardDataPlane(const ConvGeometry& g, const Spans& spans, const float* __restrict dy,
                       const float* __restrict w, float* __restrict dx) {
  const int64_t sw = g.stride[1];
  ForEachRowTap(g, spans,
                [&](int64_t oh, int64_t ki, int64_t kj, int64_t ih, Span s, int64_t offset) {
                  const float weight = w[ki * g.kernel[1] + kj];
                  const float* grad = dy + oh * g.out_width;
                  float* out = dx + ih * g.width + offset;
                  if (sw == 1) {
                    for (int64_t ow = s.begin; ow < s.end; ++ow) out[ow] += weight * grad[ow];
                  } else {
                    for (int64_t ow = s.begin; ow < s.end; ++ow) out[ow * sw] += weight * grad[ow];
                  }
                });
}

// Adds one image's plane of channel c into the tap sums: sums[tap] += the
// dot product of dy and x as the tap saw it.
void FilterPlane(const ConvGeometry& g, const Spans& spans, const float* __restrict x,
                 const float* __restrict dy, float* sums) {
  const int64_t sw = g.stride[1];
  ForEachRowTap(g, spans,
                [&](int64_t oh, int64_t ki, int64_t kj, int64_t ih, Span s, int64_t offset) {
                  const float* in = x + ih * g.width + offset;
                  const float* grad = dy + oh * g.out_width;
                  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
                  for (int64_t ow = s.begin; ow < s.end; ++ow) sum += grad[ow] * in[ow * sw];
                  sums[ki * g.kernel[1] + kj] += sum;
                });
}

class Depthwise : public ConvAlgorithm {
 public:
  std::string name() const override { return "depthwise"; }

  bool Supports(const ConvGeometry& g) const override {
    return g.groups == g.channels && g.filters == g.channels &&
           g.kernel[0] * g.kernel[1] <= kMaxTaps;
  }

  size_t WorkspaceBytes(const ConvGeometry&, ConvOp) const override { return 0; }

  void Forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
               void*) const override {
    const int64_t taps = g.kernel[0] * g.kernel[1];
    const Spans spans(g);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.batch * g.channels; ++i) {
      ForwardPlane(g, spans, x + i * g.in_plane(), w + i % g.channels * taps,
                   y + i * g.out_plane());
    }
    if (bias) AddConvBias(g, bias, y);
  }

  void BackwardData(const ConvGeometry& g, const float* dy, const float* w, float* dx,
                    bool accumulate, void*) const override {
    const int64_t taps = g.kernel[0] * g.kernel[1];
    const Spans spans(g);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < g.batch * g.channels; ++i) {
      float* plane = dx + i * g.in_plane();
      if (!accumulate) std::fill_n(plane, g.in_plane(), 0.0f);
      BackwardDataPlane(g, spans, dy + i * g.out_plane(), w + i % g.channels * taps, plane);
    }
  }

  void BackwardFilter(const ConvGeometry& g, const float* x, const float* dy, float* dw, float* db,
                      bool accumulate, double* bias_sums, void*) const override {
    const int64_t taps = g.kernel[0] * g.kernel[1];
    const Spans spans(g);
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < g.channels; ++c) {
      float sums[kMaxTaps] = {};
      for (int64_t n = 0; n < g.batch; ++n) {
        const int64_t i = n * g.channels + c;
        FilterPlane(g, spans, x + i * g.in_plane(), dy + i * g.out_plane(), sums);
      }
      float* out = dw + c * taps;
      for (int64_t t = 0; t < taps; ++t) out[t] = sums[t] + (accumulate ? out[t] : 0.0f);
    }
    if (db) ConvBiasGradient(g, dy, db, bias_sums);
  }
};

}  // namespace

SPILL_REGISTER_CONV_ALGORITHM(Depthwise);

}  // namespace cpu
}  // namespace spill
