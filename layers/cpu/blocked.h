// Helpers for tensors in the blocked layout (framework/device/tensor.h): conversions
// to and from the plain layout, for code that computes in only one of them.
// Plain copies; the values are exactly the same.
#ifndef SPILL_LAYERS_CPU_BLOCKED_H_
#define SPILL_LAYERS_CPU_BLOCKED_H_

#include <cstdint>

#include "framework/device/tensor.h"

namespace spill {
namespace cpu {

// Blocks of kChannelBlock channels in a tensor of `shape` (blocked only when
// the channels fill whole blocks).
inline int64_t ChannelBlocks(const Shape& shape) { return shape.c() / kChannelBlock; }

// `plain` = `blocked` in the plain layout; the two must not overlap.
void BlockedToPlain(const float* blocked, const Shape& shape, float* plain);
// `blocked` = `plain` in the blocked layout.
void PlainToBlocked(const float* plain, const Shape& shape, float* blocked);

// The same between float32 and 16-bit elements (DType): widening exactly on
// the way to float32, rounding to nearest even on the way back (as
// framework/device/convert.h does). kF32 is the plain move above.
void BlockedToPlain(const void* blocked, DType dtype, const Shape& shape, float* plain);
void PlainToBlocked(const float* plain, const Shape& shape, void* blocked, DType dtype);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_BLOCKED_H_
