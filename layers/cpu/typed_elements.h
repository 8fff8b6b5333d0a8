// Loops over tensors stored in any element type (framework/device/tensor.h)
// that read and write the elements in place - for layers whose loops are
// not elementwise (batch norm's reductions over channels), where the blocks
// of typed_blocks.h do not apply. Load widens an element to float32
// exactly; Store rounds a float32 to nearest, ties to even, as
// framework/device/convert.h does. So a loop over 16-bit tensors gives the
// bits of the same loop over float32 copies of them, with its results
// rounded afterwards - the executor's conversions (Layer::computes_16_bit).
#ifndef SPILL_LAYERS_CPU_TYPED_ELEMENTS_H_
#define SPILL_LAYERS_CPU_TYPED_ELEMENTS_H_

#include <cstdint>

#include "framework/device/convert.h"
#include "framework/device/tensor.h"

namespace spill {
namespace cpu {

struct Float32Elements {
  using T = float;
  static float Load(float v) { return v; }
  static float Store(float v) { return v; }
};

struct Bf16Elements {
  using T = uint16_t;
  static float Load(uint16_t v) { return Bf16BitsToFloat(v); }
  static uint16_t Store(float v) { return FloatToBf16Bits(v); }
};

struct HalfElements {
  using T = uint16_t;
  static float Load(uint16_t v) { return HalfBitsToFloat(v); }
  static uint16_t Store(float v) { return FloatToHalfBits(v); }
};

// Calls body(Elements{}) with the element type of `dtype`.
template <typename Body>
void WithElements(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::kF32:
      return body(Float32Elements{});
    case DType::kBF16:
      return body(Bf16Elements{});
    case DType::kF16:
      return body(HalfElements{});
  }
}

// A tensor's elements, typed as E says they are stored.
template <typename E>
typename E::T* ElementsOf(const Tensor& t) {
  return static_cast<typename E::T*>(t.raw());
}

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_TYPED_ELEMENTS_H_
