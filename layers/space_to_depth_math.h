// Where space_to_depth (layers/space_to_depth_layer.h) reads each output
// row, one definition for the CPU loops and the CUDA kernel (host and device
// code alike). Output row r of N x (b*b*C) x (H/b) is (n, k * C + c, i) in
// row-major order, k = dx * b + dy; it holds input row i * b + dy of
// channel c from column dx on, every b-th element.
#ifndef SPILL_LAYERS_SPACE_TO_DEPTH_MATH_H_
#define SPILL_LAYERS_SPACE_TO_DEPTH_MATH_H_

#include <cstdint>

#include "layers/activation_math.h"  // SPILL_HOST_DEVICE

namespace spill {

// The input's N x C x H x W and the block b (H and W multiples of b).
struct SpaceToDepthShape {
  int64_t n = 0, c = 0, h = 0, w = 0, block = 1;
};

// The output's rows, N x (b*b*C) x (H/b), and their length, W / b.
SPILL_HOST_DEVICE inline int64_t SpaceToDepthRows(const SpaceToDepthShape& s) {
  return s.n * s.c * s.h * s.block;
}
SPILL_HOST_DEVICE inline int64_t SpaceToDepthRowLength(const SpaceToDepthShape& s) {
  return s.w / s.block;
}

// The input element where output row `r` starts; its W / b elements are
// `block` apart.
SPILL_HOST_DEVICE inline int64_t SpaceToDepthRowStart(const SpaceToDepthShape& s, int64_t r) {
  const int64_t out_h = s.h / s.block;
  const int64_t i = r % out_h, plane = r / out_h;
  const int64_t channel = plane % s.c, k = (plane / s.c) % (s.block * s.block);
  const int64_t image = plane / (s.c * s.block * s.block);
  const int64_t dy = k % s.block, dx = k / s.block;
  return ((image * s.c + channel) * s.h + i * s.block + dy) * s.w + dx;
}

}  // namespace spill

#endif  // SPILL_LAYERS_SPACE_TO_DEPTH_MATH_H_
