// How a CUDA kernel's activations are stored, for the kernels that take
// 16-bit tensors as they are (Layer::computes_16_bit): float32, or bfloat16
// and binary16 widened to float32 for the arithmetic and rounded to nearest
// even on the way out - the bits the executor's float32 copies would give
// (framework/graph/precision.h). Host and device code alike.
#ifndef SPILL_LAYERS_CUDA_STORED_CUDA_H_
#define SPILL_LAYERS_CUDA_STORED_CUDA_H_

namespace spill {
namespace cuda {

enum class Stored { kF32, kBf16, kF16 };

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_STORED_CUDA_H_
