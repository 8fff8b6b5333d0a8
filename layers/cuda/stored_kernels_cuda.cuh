// The element types of stored_cuda.h in kernels (included by .cu files
// only): Load widens an element to float32 exactly, Store rounds a float32
// to nearest even (as framework/device/convert.h), and ForStored launches a
// kernel template for the type a Stored names.
#ifndef SPILL_LAYERS_CUDA_STORED_KERNELS_CUDA_CUH_
#define SPILL_LAYERS_CUDA_STORED_KERNELS_CUDA_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "layers/cuda/stored_cuda.h"

namespace spill {
namespace cuda {

__device__ __forceinline__ float Load(float x) { return x; }
__device__ __forceinline__ float Load(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float Load(__half x) { return __half2float(x); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void Store(__half* p, float v) { *p = __float2half_rn(v); }

// Calls `launch(T())` with T the element type `stored` names (float,
// __nv_bfloat16, __half): one launcher for every storage type.
template <typename Launch>
void ForStored(Stored stored, Launch&& launch) {
  switch (stored) {
    case Stored::kF32:
      launch(float());
      return;
    case Stored::kBf16:
      launch(__nv_bfloat16());
      return;
    case Stored::kF16:
      launch(__half());
      return;
  }
}

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_STORED_KERNELS_CUDA_CUH_
