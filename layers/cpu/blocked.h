// Helpers for tensors in the layouts that keep channels innermost
// (framework/device/tensor.h): blocked nChw16c and channels-last NHWC. In
// both, a pixel's channels lie in runs of kChannelBlock adjacent elements,
// the vector lanes; they differ only in where the runs start and how far
// apart one pixel's run is from the next. Lanes describes that, so one loop
// serves both, and conversions to and from the plain layout for code that
// computes in only one of them. Plain copies; the values are exactly the same.
#ifndef SPILL_LAYERS_CPU_BLOCKED_H_
#define SPILL_LAYERS_CPU_BLOCKED_H_

#include <cstdint>

#include "framework/device/tensor.h"

namespace spill {
namespace cpu {

// Blocks of kChannelBlock channels in a tensor of `shape` (a tensor leaves
// the plain layout only when its channels fill whole blocks).
inline int64_t ChannelBlocks(const Shape& shape) { return shape.c() / kChannelBlock; }

// The (image, channel block) runs of a tensor in kBlocked16 or
// kChannelsLast: run r is image r / blocks, channels from
// (r % blocks) * width; pixel p's `width` lanes start at
// start(r) + p * stride. Runs never overlap, so threads may take them apart.
// A run is kChannelBlock channels wide, or, where `whole_pixels`, in
// channels-last, every channel of the pixel (one contiguous run per image).
struct Lanes {
  Lanes(const Shape& s, Layout layout, bool whole_pixels = false)
      : images(s.n()),
        channels(s.c()),
        plane(s.h() * s.w()),
        stride(layout == Layout::kChannelsLast ? s.c() : kChannelBlock),
        width(layout == Layout::kChannelsLast && whole_pixels ? s.c() : kChannelBlock),
        blocks(s.c() / width) {}
  int64_t count() const { return images * blocks; }
  int64_t image(int64_t r) const { return r / blocks; }
  int64_t channel(int64_t r) const { return (r % blocks) * width; }
  int64_t start(int64_t r) const { return image(r) * plane * channels + channel(r) * pixel_span(); }
  // partial[] index of run r's first lane: image-major, channel-minor.
  int64_t slot(int64_t r) const { return image(r) * channels + channel(r); }
  int64_t images, channels, plane, stride, width, blocks;

 private:
  // How far the next run of an image starts: a whole plane of runs in
  // blocked, the next channels of the same pixel in channels-last.
  int64_t pixel_span() const { return stride == kChannelBlock ? plane : 1; }
};

// `plain` = `t` (of `shape`, in `layout`, its elements of `dtype`) in the
// plain layout as float32: widened exactly from 16 bits. `layout` may be
// plain (a conversion only). The two must not overlap.
void ToPlain(const void* t, DType dtype, Layout layout, const Shape& shape, float* plain);
// `t` = `plain` in `layout`, rounded to `dtype` to nearest even (as
// framework/device/convert.h does).
void FromPlain(const float* plain, const Shape& shape, void* t, DType dtype, Layout layout);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_BLOCKED_H_
