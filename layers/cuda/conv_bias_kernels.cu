// The 16-bit convolution's bias kernels (conv_bias_kernels_cuda.h).
#include "layers/cuda/conv_bias_kernels_cuda.h"
#include "layers/cuda/kernel_util_cuda.cuh"

namespace spill {
namespace cuda {
namespace {

template <typename T>
__global__ void AddChannelBias(int64_t n, int64_t channels, int64_t plane, const float* bias,
                               T* y) {
  SPILL_GRID_LOOP(i, n) { Store(&y[i], Load(y[i]) + bias[(i / plane) % channels]); }
}

// One block per channel; each thread sums its strided share of every
// image's plane, then the block's fixed tree adds the threads' sums.
template <typename T>
__global__ void ChannelSums(int64_t images, int64_t channels, int64_t plane, const T* dy, float* db,
                            bool accumulate) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x;
  double sum = 0;
  for (int64_t n = 0; n < images; ++n) {
    const T* p = dy + (n * channels + c) * plane;
    for (int64_t i = threadIdx.x; i < plane; i += kThreads) sum += Load(p[i]);
  }
  const double total = BlockSum(sum, shared);
  if (threadIdx.x == 0) {
    const float value = static_cast<float>(total);
    db[c] = accumulate ? db[c] + value : value;
  }
}

}  // namespace

void LaunchAddChannelBias(Stored stored, int64_t images, int64_t channels, int64_t plane,
                          const float* bias, void* y, cudaStream_t stream) {
  const int64_t n = images * channels * plane;
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    AddChannelBias<<<Blocks(n), kThreads, 0, stream>>>(n, channels, plane, bias,
                                                       static_cast<T*>(y));
  });
}

void LaunchChannelSums(Stored stored, int64_t images, int64_t channels, int64_t plane,
                       const void* dy, float* db, bool accumulate, cudaStream_t stream) {
  if (channels <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ChannelSums<<<static_cast<unsigned>(channels), kThreads, 0, stream>>>(
        images, channels, plane, static_cast<const T*>(dy), db, accumulate);
  });
}

}  // namespace cuda
}  // namespace spill
