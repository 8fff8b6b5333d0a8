#include "layers/cpu/blocked.h"

#include "layers/cpu/typed_elements.h"

namespace spill {
namespace cpu {

namespace {

// One (image, channel block) pair per iteration: kChannelBlock planes on the
// plain side, one contiguous run on the blocked side. `convert` maps one
// element.
template <typename From, typename To, typename Convert>
void ToPlain(const From* blocked, const Shape& shape, To* plain, Convert convert) {
  const int64_t blocks = shape.n() * ChannelBlocks(shape), plane = shape.h() * shape.w();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const From* from = blocked + b * plane * kChannelBlock;
    To* to = plain + b * plane * kChannelBlock;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        to[l * plane + p] = convert(from[p * kChannelBlock + l]);
      }
    }
  }
}

template <typename From, typename To, typename Convert>
void ToBlocked(const From* plain, const Shape& shape, To* blocked, Convert convert) {
  const int64_t blocks = shape.n() * ChannelBlocks(shape), plane = shape.h() * shape.w();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const From* from = plain + b * plane * kChannelBlock;
    To* to = blocked + b * plane * kChannelBlock;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t l = 0; l < kChannelBlock; ++l) {
        to[p * kChannelBlock + l] = convert(from[l * plane + p]);
      }
    }
  }
}

}  // namespace

void BlockedToPlain(const float* blocked, const Shape& shape, float* plain) {
  ToPlain(blocked, shape, plain, Float32Elements::Load);
}

void PlainToBlocked(const float* plain, const Shape& shape, float* blocked) {
  ToBlocked(plain, shape, blocked, Float32Elements::Store);
}

void BlockedToPlain(const void* blocked, DType dtype, const Shape& shape, float* plain) {
  WithElements(dtype, [&](auto e) {
    using E = decltype(e);
    ToPlain(static_cast<const typename E::T*>(blocked), shape, plain, E::Load);
  });
}

void PlainToBlocked(const float* plain, const Shape& shape, void* blocked, DType dtype) {
  WithElements(dtype, [&](auto e) {
    using E = decltype(e);
    ToBlocked(plain, shape, static_cast<typename E::T*>(blocked), E::Store);
  });
}

}  // namespace cpu
}  // namespace spill
