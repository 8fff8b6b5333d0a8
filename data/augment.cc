// Augmentation: validation at construction, then a branch-light per-pixel
// loop. Random numbers: UniformAt(seed, 0) picks the crop row, (seed, 1) the
// crop column and (seed, 2) the flip, so each choice is independent of the
// others and of the image.
#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "framework/base/random.h"

namespace spill {
namespace {

constexpr int kMaxSize = 1 << 16;  // bound on crop, pad and resize

// Picks the per-channel values: `given`, or `fallback` when `given` is empty.
StatusOr<std::vector<float>> PerChannel(const std::vector<float>& given,
                                        const std::vector<float>& fallback, int channels,
                                        const char* what) {
  const std::vector<float>& values = given.empty() ? fallback : given;
  if (values.size() != 1 && values.size() != static_cast<size_t>(channels)) {
    return InvalidArgument("augmentation " + std::string(what) + " has " +
                           std::to_string(values.size()) + " values; expected 1 or " +
                           std::to_string(channels) + " (one per channel)");
  }
  std::vector<float> result(channels);
  for (int c = 0; c < channels; ++c) result[c] = values.size() == 1 ? values[0] : values[c];
  return result;
}

// Uniform integer in [0, count) from (seed, stream).
int PickBelow(uint64_t seed, uint64_t stream, int count) {
  int value = static_cast<int>(UniformAt(seed, stream) * static_cast<float>(count));
  return std::min(value, count - 1);
}

}  // namespace

PixelView PixelView::Planar(const uint8_t* data, int height, int width) {
  PixelView view;
  view.data = data;
  view.height = height;
  view.width = width;
  view.channel_stride = static_cast<int64_t>(height) * width;
  view.row_stride = width;
  view.pixel_stride = 1;
  return view;
}

PixelView PixelView::Interleaved(const uint8_t* data, int channels, int height, int width,
                                 int64_t row_stride) {
  PixelView view;
  view.data = data;
  view.height = height;
  view.width = width;
  view.channel_stride = 1;
  view.row_stride = row_stride;
  view.pixel_stride = channels;
  return view;
}

StatusOr<Augmenter> Augmenter::Create(const Augmentation& augment, int channels, int height,
                                      int width, const std::vector<float>& default_mean,
                                      const std::vector<float>& default_std) {
  if (augment.crop < 0 || augment.pad < 0 || augment.resize < 0 || augment.crop > kMaxSize ||
      augment.pad > kMaxSize || augment.resize > kMaxSize) {
    return InvalidArgument("augmentation resize " + std::to_string(augment.resize) + ", crop " +
                           std::to_string(augment.crop) + ", pad " + std::to_string(augment.pad) +
                           ": expected each in [0, " + std::to_string(kMaxSize) + "]");
  }
  if (height > 0 && augment.crop > 0 &&
      (augment.crop > height + 2 * augment.pad || augment.crop > width + 2 * augment.pad)) {
    return InvalidArgument("augmentation crop " + std::to_string(augment.crop) +
                           " is larger than the padded image: " + std::to_string(height) + "x" +
                           std::to_string(width) + " with pad " + std::to_string(augment.pad));
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<float> mean,
                         PerChannel(augment.mean, default_mean, channels, "mean"));
  SPILL_ASSIGN_OR_RETURN(std::vector<float> std,
                         PerChannel(augment.std, default_std, channels, "std"));
  Augmenter result;
  result.channels_ = channels;
  result.height_ = height;
  result.width_ = width;
  result.crop_ = augment.crop;
  result.pad_ = augment.pad;
  result.random_crop_ = augment.random_crop;
  result.flip_ = augment.flip;
  result.table_.resize(static_cast<size_t>(channels) * 256);
  for (int c = 0; c < channels; ++c) {
    if (!(std[c] > 0.0f) || !std::isfinite(std[c]) || !std::isfinite(mean[c])) {
      return InvalidArgument("augmentation channel " + std::to_string(c) + ": mean " +
                             std::to_string(mean[c]) + ", std " + std::to_string(std[c]) +
                             "; expected a finite mean and a positive std");
    }
    for (int v = 0; v < 256; ++v) {
      result.table_[c * 256 + v] = (static_cast<float>(v) / 255.0f - mean[c]) / std[c];
    }
  }
  return result;
}

Shape Augmenter::example_shape() const {
  return Shape(1, channels_, OutHeight(height_), OutWidth(width_));
}

CropWindow Augmenter::Choose(int height, int width, uint64_t seed) const {
  int room_y = std::max(0, height + 2 * pad_ - OutHeight(height));
  int room_x = std::max(0, width + 2 * pad_ - OutWidth(width));
  CropWindow window;
  if (random_crop_) {
    window.top = PickBelow(seed, 0, room_y + 1);
    window.left = PickBelow(seed, 1, room_x + 1);
  } else {
    window.top = room_y / 2;
    window.left = room_x / 2;
  }
  window.flip = flip_ && UniformAt(seed, 2) < 0.5f;
  return window;
}

Status Augmenter::Apply(const PixelView& pixels, uint64_t seed, float* out) const {
  const int out_h = OutHeight(pixels.height), out_w = OutWidth(pixels.width);
  if (out_h > pixels.height + 2 * pad_ || out_w > pixels.width + 2 * pad_) {
    return InvalidArgument("image is " + std::to_string(pixels.width) + "x" +
                           std::to_string(pixels.height) + ", smaller than the crop " +
                           std::to_string(crop_) + " with pad " + std::to_string(pad_) +
                           "; set a larger resize");
  }
  const CropWindow window = Choose(pixels.height, pixels.width, seed);
  // Output column x reads source column first_x + step * x; columns
  // [x_begin, x_end) fall inside the source, the rest is padding.
  const int step = window.flip ? -1 : 1;
  const int first_x = window.left - pad_ + (window.flip ? out_w - 1 : 0);
  const int x_begin = std::min(
      out_w, window.flip ? std::max(0, first_x - pixels.width + 1) : std::max(0, -first_x));
  const int x_end = std::max(x_begin, window.flip ? std::min(out_w, first_x + 1)
                                                  : std::min(out_w, pixels.width - first_x));
  const int64_t x_stride = step * pixels.pixel_stride;
  for (int c = 0; c < channels_; ++c) {
    const float* table = table_.data() + c * 256;
    const float padding = table[0];
    for (int y = 0; y < out_h; ++y) {
      float* dst = out + (static_cast<int64_t>(c) * out_h + y) * out_w;
      const int sy = window.top - pad_ + y;
      if (sy < 0 || sy >= pixels.height) {
        std::fill(dst, dst + out_w, padding);
        continue;
      }
      std::fill(dst, dst + x_begin, padding);
      if (x_end > x_begin) {
        const uint8_t* src = pixels.data + c * pixels.channel_stride + sy * pixels.row_stride +
                             (first_x + step * x_begin) * pixels.pixel_stride;
        for (int x = x_begin; x < x_end; ++x, src += x_stride) dst[x] = table[*src];
      }
      std::fill(dst + x_end, dst + out_w, padding);
    }
  }
  return Status::Ok();
}

}  // namespace spill
