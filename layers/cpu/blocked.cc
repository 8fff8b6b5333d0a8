#include "layers/cpu/blocked.h"

#include "framework/device/convert.h"
#include "layers/cpu/typed_elements.h"

namespace spill {
namespace cpu {

namespace {

// One (image, channel block) run per iteration: kChannelBlock planes on the
// plain side, the run's lanes on the other. `convert` maps one element.
template <typename From, typename To, typename Convert>
void LanesToPlain(const From* t, const Lanes& lanes, To* plain, Convert convert) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < lanes.count(); ++r) {
    const From* from = t + lanes.start(r);
    To* to = plain + (lanes.image(r) * lanes.channels + lanes.channel(r)) * lanes.plane;
    for (int64_t p = 0; p < lanes.plane; ++p) {
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        to[l * lanes.plane + p] = convert(from[p * lanes.stride + l]);
      }
    }
  }
}

template <typename From, typename To, typename Convert>
void PlainToLanes(const From* plain, const Lanes& lanes, To* t, Convert convert) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < lanes.count(); ++r) {
    const From* from = plain + (lanes.image(r) * lanes.channels + lanes.channel(r)) * lanes.plane;
    To* to = t + lanes.start(r);
    for (int64_t p = 0; p < lanes.plane; ++p) {
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        to[p * lanes.stride + l] = convert(from[l * lanes.plane + p]);
      }
    }
  }
}

}  // namespace

void ToPlain(const void* t, DType dtype, Layout layout, const Shape& shape, float* plain) {
  if (layout == Layout::kPlain) return ConvertToFloat(t, dtype, plain, shape.numel());
  WithElements(dtype, [&](auto e) {
    using E = decltype(e);
    LanesToPlain(static_cast<const typename E::T*>(t), Lanes(shape, layout), plain, E::Load);
  });
}

void FromPlain(const float* plain, const Shape& shape, void* t, DType dtype, Layout layout) {
  if (layout == Layout::kPlain) return ConvertFromFloat(plain, t, dtype, shape.numel());
  WithElements(dtype, [&](auto e) {
    using E = decltype(e);
    PlainToLanes(plain, Lanes(shape, layout), static_cast<typename E::T*>(t), E::Store);
  });
}

}  // namespace cpu
}  // namespace spill
