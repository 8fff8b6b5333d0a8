// Elementwise work on tensors stored in any element type (framework/graph/
// precision.h): a layer that runs its float32 loop through ForEachFloatBlock
// takes 16-bit activations and gradients as they are (Layer::
// computes_16_bit), with no whole-tensor float32 copies. Each block of
// kFloatBlock elements of the 16-bit operands is widened into a per-thread
// buffer, the loop runs on floats, and the written blocks are rounded back
// (round to nearest even): for an elementwise loop, the bits of converting
// the whole tensors around it. float32 operands are used in place.
#ifndef SPILL_LAYERS_CPU_TYPED_BLOCKS_H_
#define SPILL_LAYERS_CPU_TYPED_BLOCKS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "framework/device/tensor.h"

namespace spill {
namespace cpu {

constexpr int64_t kFloatBlock = 4096;

// One tensor of an elementwise loop: `read`, its values are widened before
// the loop; `written`, the loop's values are rounded back into it (both: a
// gradient added into).
struct BlockOperand {
  const Tensor* tensor;
  bool read;
  bool written;
};

// Calls body(count, floats) for consecutive blocks of the operands' first
// `n` elements, in parallel: floats[k] holds operand k's `count` elements
// of the block as float32.
using FloatBlockBody = std::function<void(int64_t count, float* const* floats)>;
void ForEachFloatBlock(const std::vector<BlockOperand>& operands, int64_t n,
                       const FloatBlockBody& body);

// Sets a tensor of any element type to zero.
void Zero(const Tensor& t);

// y = x, or y += x (in float32) when `accumulate`, for tensors of any
// element types and x.numel() elements: a byte copy where the types match.
void CopyOrAdd(const Tensor& x, const Tensor& y, bool accumulate);

}  // namespace cpu
}  // namespace spill

#endif  // SPILL_LAYERS_CPU_TYPED_BLOCKS_H_
