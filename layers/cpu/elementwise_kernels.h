// Elementwise loops whose formulas (layers/activation_math.h) select between
// computed values: built without trapping math (-fno-trapping-math, its own
// target in layers/BUILD), so the compiler may evaluate both sides of a
// select and the loops vectorize. The values are those of the same formulas
// element by element: no reassociation, no contraction.
#ifndef SPILL_LAYERS_CPU_ELEMENTWISE_KERNELS_H_
#define SPILL_LAYERS_CPU_ELEMENTWISE_KERNELS_H_

#include <cstdint>

namespace spill {
namespace cpu {

// ReLU with a negative slope over n values, on one thread (for the blocks of
// layers/cpu/typed_blocks.h): y = x > 0 ? x : x * slope, and backward
// dx (= or +=) y > 0 ? dy : dy * slope.
void ReluBlock(const float* x, float* y, int64_t n, float slope);
void ReluGradBlock(const float* y, const float* dy, float* dx, int64_t n, float slope,
                   bool accumulate);

// y = GELU(x) over n values.
void GeluForward(const float* x, float* y, int64_t n);
// dx (= or +=) GELU'(v) dy over n values (v: the layer's input).
void GeluBackward(const float* v, const float* dy, float* dx, int64_t n, bool accumulate);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_ELEMENTWISE_KERNELS_H_
