// Where shifted-window attention (layers/window_attention_layer.h) reads and
// writes, one definition for the CPU and the CUDA kernels (host and device
// code alike): which pixel a window's token is, the relative position bias
// row of a pair of tokens, and the mask that keeps a shifted window's
// pieces apart - torchvision's shifted_window_attention, index for index.
#ifndef SPILL_LAYERS_WINDOW_ATTENTION_MATH_H_
#define SPILL_LAYERS_WINDOW_ATTENTION_MATH_H_

#include <cmath>
#include <cstdint>

#include "layers/activation_math.h"  // SPILL_HOST_DEVICE

namespace spill {

// What the mask adds to the score of two tokens that were not neighbours
// before the cyclic shift (torchvision's, not -infinity: such a pair keeps
// a tiny probability).
constexpr float kWindowMaskScore = -100.0f;

// Cosine attention (Swin V2): F.normalize's floor under a query's or a
// key's norm, and the bound on logit_scale - math.log(100.0) rounded to
// float, as PyTorch's clamp of the float parameter rounds it.
constexpr float kCosineNormFloor = 1e-12f;
constexpr float kMaxLogitScale = static_cast<float>(4.605170185988092);  // ln 100

// What multiplies the cosines of head h: exp(min(logit_scale, ln 100)). A
// NaN stays NaN, as in torch.clamp.
SPILL_HOST_DEVICE inline float CosineScale(float logit_scale) {
  return expf(logit_scale > kMaxLogitScale ? kMaxLogitScale : logit_scale);
}

// Whether the clamp passes logit_scale's gradient: where the parameter is
// at most the bound, equality included, as torch.clamp's backward does.
SPILL_HOST_DEVICE inline bool CosineScaleLearns(float logit_scale) {
  return logit_scale <= kMaxLogitScale;
}

// Row x (d floats) divided by max(|x|, floor): F.normalize. Returns |x|.
SPILL_HOST_DEVICE inline float NormalizeRow(float* x, int64_t d) {
  float squares = 0;
  for (int64_t i = 0; i < d; ++i) squares += x[i] * x[i];
  const float norm = sqrtf(squares);
  const float denominator = norm < kCosineNormFloor ? kCosineNormFloor : norm;  // NaN stays
  for (int64_t i = 0; i < d; ++i) x[i] /= denominator;
  return norm;
}

// NormalizeRow's backward, in place: the gradient `grad` of x^ = x / max(|x|,
// floor) becomes that of x, (grad - x^ (x^ . grad)) / |x| - or grad / floor
// where |x| is under the floor, the clamp's constant. `unit` is x^, `norm` |x|.
SPILL_HOST_DEVICE inline void NormalizeRowGrad(const float* unit, float norm, int64_t d,
                                               float* grad) {
  if (norm >= kCosineNormFloor) {
    float along = 0;
    for (int64_t i = 0; i < d; ++i) along += unit[i] * grad[i];
    for (int64_t i = 0; i < d; ++i) grad[i] = (grad[i] - unit[i] * along) / norm;
  } else {
    for (int64_t i = 0; i < d; ++i) grad[i] /= kCosineNormFloor;
  }
}

// An H x W image cut into w x w windows after the cyclic shift. The shift
// of each axis is the layer's, or 0 where one window spans the axis. With
// `grid` (MaxViT's grid attention) a group is not a block of neighbours but
// w x w pixels spread evenly over the image: token (r, c) of group (a, b)
// is pixel (r H/w + a, c W/w + b), never shifted.
struct WindowGrid {
  int64_t height = 0, width = 0, window = 1;
  int64_t shift_h = 0, shift_w = 0;
  bool grid = false;

  SPILL_HOST_DEVICE int64_t across() const { return width / window; }
  SPILL_HOST_DEVICE int64_t windows() const { return (height / window) * across(); }
  SPILL_HOST_DEVICE int64_t tokens() const { return window * window; }
  SPILL_HOST_DEVICE int64_t table_rows() const { return (2 * window - 1) * (2 * window - 1); }
};

// The rolled row (or column) of token `token` of window `index`.
SPILL_HOST_DEVICE inline int64_t RolledRow(const WindowGrid& g, int64_t index, int64_t token) {
  if (g.grid) return (token / g.window) * (g.height / g.window) + index / g.across();
  return (index / g.across()) * g.window + token / g.window;
}
SPILL_HOST_DEVICE inline int64_t RolledColumn(const WindowGrid& g, int64_t index, int64_t token) {
  if (g.grid) return (token % g.window) * g.across() + index % g.across();
  return (index % g.across()) * g.window + token % g.window;
}

// The pixel (row * W + column of the image) that token `token` of window
// `index` reads and writes: the rolled grid's position moved back by the
// shift, (i + s) mod H.
SPILL_HOST_DEVICE inline int64_t WindowPixel(const WindowGrid& g, int64_t index, int64_t token) {
  const int64_t row = (RolledRow(g, index, token) + g.shift_h) % g.height;
  const int64_t column = (RolledColumn(g, index, token) + g.shift_w) % g.width;
  return row * g.width + column;
}

// Which of the three bands of an axis of `extent` a rolled coordinate lies
// in: [0, extent - w), [extent - w, extent - shift), [extent - shift, extent).
SPILL_HOST_DEVICE inline int64_t ShiftBand(int64_t extent, int64_t window, int64_t shift,
                                           int64_t rolled) {
  if (rolled < extent - window) return 0;
  return rolled < extent - shift ? 1 : 2;
}

// The region of the rolled grid a token lies in: tokens of different
// regions were apart before the shift.
SPILL_HOST_DEVICE inline int64_t ShiftRegion(const WindowGrid& g, int64_t index, int64_t token) {
  return 3 * ShiftBand(g.height, g.window, g.shift_h, RolledRow(g, index, token)) +
         ShiftBand(g.width, g.window, g.shift_w, RolledColumn(g, index, token));
}

// What the mask adds to the score of query t and key u of window `index`.
SPILL_HOST_DEVICE inline float WindowMask(const WindowGrid& g, int64_t index, int64_t t,
                                          int64_t u) {
  if (g.shift_h == 0 && g.shift_w == 0) return 0.0f;
  return ShiftRegion(g, index, t) == ShiftRegion(g, index, u) ? 0.0f : kWindowMaskScore;
}

// The row of the bias table for query t and key u of a w x w window:
// (r_t - r_u + w - 1) (2w - 1) + (c_t - c_u + w - 1).
SPILL_HOST_DEVICE inline int64_t RelativeIndex(int64_t window, int64_t t, int64_t u) {
  const int64_t rows = t / window - u / window + window - 1;
  const int64_t columns = t % window - u % window + window - 1;
  return rows * (2 * window - 1) + columns;
}

}  // namespace spill

#endif  // SPILL_LAYERS_WINDOW_ATTENTION_MATH_H_
