// Augmentation: the per-example transform that every dataset shares.
//
// Order: (resize, done by the image folder reader before this) -> zero pad ->
// crop (random or centre) -> horizontal flip -> scale to [0, 1] ->
// (x - mean) / std. Padding inserts raw pixel value 0, so a padded pixel
// normalizes to -mean / std (as torchvision's RandomCrop(padding=...) does).
// Random choices come only from the augment seed through framework/base/random.h:
// the same (image, seed) always gives the same floats. Scaling and
// normalization are one 256-entry table per channel, so applying costs one
// lookup per output value and allocates nothing.
#ifndef SPILL_DATA_AUGMENT_H_
#define SPILL_DATA_AUGMENT_H_

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "framework/base/status.h"
#include "framework/device/tensor.h"

namespace spill {

// Read-only view of 8-bit pixels: value of (c, y, x) is
// data[c * channel_stride + y * row_stride + x * pixel_stride].
struct PixelView {
  const uint8_t* data = nullptr;
  int height = 0;
  int width = 0;
  int64_t channel_stride = 0;
  int64_t row_stride = 0;
  int64_t pixel_stride = 0;

  // C x H x W planes, one after the other (idx, CIFAR-10).
  static PixelView Planar(const uint8_t* data, int height, int width);
  // H x W pixels of C interleaved channels, rows `row_stride` bytes apart (OpenCV).
  static PixelView Interleaved(const uint8_t* data, int channels, int height, int width,
                               int64_t row_stride);
};

// Where the output window lies in the padded source, and whether it is mirrored.
struct CropWindow {
  int top = 0;
  int left = 0;
  bool flip = false;
};

class Augmenter {
 public:
  // `height` x `width` is the source size, or 0 x 0 when it varies per image
  // (then `augment.crop` must be set). `default_mean` / `default_std` apply
  // when `augment` leaves them empty; one value is broadcast to all channels.
  static StatusOr<Augmenter> Create(const Augmentation& augment, int channels, int height,
                                    int width, const std::vector<float>& default_mean,
                                    const std::vector<float>& default_std);

  int channels() const { return channels_; }
  // Output size for a source of `height` x `width` (the fixed one by default).
  int OutHeight(int height) const { return crop_ > 0 ? crop_ : height + 2 * pad_; }
  int OutWidth(int width) const { return crop_ > 0 ? crop_ : width + 2 * pad_; }
  // 1 x C x H x W of one output, for a fixed source size.
  Shape example_shape() const;

  // The crop and flip that `seed` selects for a source of `height` x `width`.
  CropWindow Choose(int height, int width, uint64_t seed) const;

  // Writes C x OutHeight x OutWidth floats to `out`. Fails only when the
  // source is smaller than the crop (possible when sizes vary).
  Status Apply(const PixelView& pixels, uint64_t seed, float* out) const;

 private:
  Augmenter() = default;

  int channels_ = 0;
  int height_ = 0, width_ = 0;
  int crop_ = 0, pad_ = 0;
  bool random_crop_ = false, flip_ = false;
  std::vector<float> table_;  // channels x 256: (v / 255 - mean) / std
};

}  // namespace spill

#endif  // SPILL_DATA_AUGMENT_H_
