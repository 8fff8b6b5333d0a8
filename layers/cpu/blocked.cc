#include "layers/cpu/blocked.h"

namespace spill {
namespace cpu {

// One (image, channel block) pair per iteration: kChannelBlock planes on the
// plain side, one contiguous run on the blocked side.
void BlockedToPlain(const float* blocked, const Shape& shape, float* plain) {
  const int64_t blocks = shape.n() * ChannelBlocks(shape), plane = shape.h() * shape.w();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const float* from = blocked + b * plane * kChannelBlock;
    float* to = plain + b * plane * kChannelBlock;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t l = 0; l < kChannelBlock; ++l) to[l * plane + p] = from[p * kChannelBlock + l];
    }
  }
}

void PlainToBlocked(const float* plain, const Shape& shape, float* blocked) {
  const int64_t blocks = shape.n() * ChannelBlocks(shape), plane = shape.h() * shape.w();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const float* from = plain + b * plane * kChannelBlock;
    float* to = blocked + b * plane * kChannelBlock;
    for (int64_t p = 0; p < plane; ++p) {
      for (int64_t l = 0; l < kChannelBlock; ++l) to[p * kChannelBlock + l] = from[l * plane + p];
    }
  }
}

}  // namespace cpu
}  // namespace spill
