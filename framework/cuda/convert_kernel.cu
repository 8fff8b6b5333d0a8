// Conversions between float32 and the 16-bit storage types, one element per
// thread in a grid-stride loop. CUDA's _rn conversions round to nearest even
// with gradual underflow and overflow to infinity, as the host's
// (framework/device/convert.h) do.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "framework/cuda/convert_kernel_cuda.h"

namespace spill {
namespace cuda {
namespace {

constexpr int kConvertThreads = 256;
// Enough blocks to fill any current GPU several times over; larger counts
// loop in the grid-stride loop instead of launching more blocks.
constexpr int64_t kMaxConvertBlocks = 8192;

struct ToBf16 {
  __device__ __nv_bfloat16 operator()(float x) const { return __float2bfloat16_rn(x); }
};
struct ToHalf {
  __device__ __half operator()(float x) const { return __float2half_rn(x); }
};
struct FromBf16 {
  __device__ float operator()(__nv_bfloat16 x) const { return __bfloat162float(x); }
};
struct FromHalf {
  __device__ float operator()(__half x) const { return __half2float(x); }
};

template <typename In, typename Out, typename Op>
__global__ void ConvertKernel(Out* dst, const In* src, int64_t count, Op op) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    dst[i] = op(src[i]);
  }
}

template <typename In, typename Out, typename Op>
void Launch(void* dst, const void* src, int64_t count, cudaStream_t stream, Op op) {
  if (count <= 0) return;
  const int64_t blocks =
      std::min(kMaxConvertBlocks, (count + kConvertThreads - 1) / kConvertThreads);
  ConvertKernel<<<static_cast<unsigned>(blocks), kConvertThreads, 0, stream>>>(
      static_cast<Out*>(dst), static_cast<const In*>(src), count, op);
}

}  // namespace

void FloatToBf16Async(void* dst, const void* src, int64_t count, cudaStream_t stream) {
  Launch<float, __nv_bfloat16>(dst, src, count, stream, ToBf16());
}

void FloatToHalfAsync(void* dst, const void* src, int64_t count, cudaStream_t stream) {
  Launch<float, __half>(dst, src, count, stream, ToHalf());
}

void Bf16ToFloatAsync(void* dst, const void* src, int64_t count, cudaStream_t stream) {
  Launch<__nv_bfloat16, float>(dst, src, count, stream, FromBf16());
}

void HalfToFloatAsync(void* dst, const void* src, int64_t count, cudaStream_t stream) {
  Launch<__half, float>(dst, src, count, stream, FromHalf());
}

}  // namespace cuda
}  // namespace spill
