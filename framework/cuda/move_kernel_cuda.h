// Moves `bytes` from `src` down to `dst` (dst < src; the ranges may
// overlap) on `stream`, as memmove would, with one kernel
// (framework/device/downward_move.h says when a device uses it).
#ifndef SPILL_FRAMEWORK_CUDA_MOVE_KERNEL_CUDA_H_
#define SPILL_FRAMEWORK_CUDA_MOVE_KERNEL_CUDA_H_

#include <cuda_runtime.h>

#include <cstddef>

namespace spill {
namespace cuda {

void MoveDownAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_MOVE_KERNEL_CUDA_H_
