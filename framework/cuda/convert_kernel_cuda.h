// Converts `count` elements between float32 and the 16-bit storage types on
// `stream` (Device::ConvertAsync on a GPU). Rounding is to nearest even, as
// framework/device/convert.h does on the host, so both devices give the same
// bits apart from NaN payloads.
#ifndef SPILL_FRAMEWORK_CUDA_CONVERT_KERNEL_CUDA_H_
#define SPILL_FRAMEWORK_CUDA_CONVERT_KERNEL_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace spill {
namespace cuda {

// float32 -> bfloat16 / binary16: `src` holds floats, `dst` 16-bit elements.
void FloatToBf16Async(void* dst, const void* src, int64_t count, cudaStream_t stream);
void FloatToHalfAsync(void* dst, const void* src, int64_t count, cudaStream_t stream);
// bfloat16 / binary16 -> float32, exactly.
void Bf16ToFloatAsync(void* dst, const void* src, int64_t count, cudaStream_t stream);
void HalfToFloatAsync(void* dst, const void* src, int64_t count, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_FRAMEWORK_CUDA_CONVERT_KERNEL_CUDA_H_
