// Swin's windows as torchvision writes them, for the ONNX importer's checks
// and the exporter's constants (spill's window_attention computes the same
// in layers/window_attention_math.h).
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_WINDOWS_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_WINDOWS_H_

#include <cstdint>

namespace spill {
namespace onnx_windows {

constexpr float kMaskedScore = -100.0f;  // torchvision's masked_fill value

// The relative position bias table's row for query t and key u of a w x w
// window: (r_t - r_u + w - 1) (2w - 1) + (c_t - c_u + w - 1).
inline int64_t RelativeIndex(int64_t w, int64_t t, int64_t u) {
  return (t / w - u / w + w - 1) * (2 * w - 1) + (t % w - u % w + w - 1);
}

// What torchvision's mask adds to the score of query a and key b of window
// k of a height x width grid in windows of w, rolled by s: 0 within a
// region of the rolled grid (each axis cut at extent - w and extent - s),
// -100 across.
inline float ShiftMask(int64_t height, int64_t width, int64_t w, int64_t s, int64_t k, int64_t a,
                       int64_t b) {
  const int64_t across = width / w;
  auto band = [w, s](int64_t i, int64_t extent) {
    return i < extent - w ? 0 : i < extent - s ? 1 : 2;
  };
  auto region = [&](int64_t p) {
    return 3 * band((k / across) * w + p / w, height) + band((k % across) * w + p % w, width);
  };
  return region(a) == region(b) ? 0.0f : kMaskedScore;
}

}  // namespace onnx_windows
}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_WINDOWS_H_
