// What the CUDA layers' kernels share (included by .cu files only): launch
// sizes, the grid-stride loop, reductions in a fixed order - a block's
// tree and a warp's - so results never depend on scheduling, and the
// counter-based random numbers of the dropout masks.
#ifndef SPILL_LAYERS_CUDA_KERNEL_UTIL_CUDA_CUH_
#define SPILL_LAYERS_CUDA_KERNEL_UTIL_CUDA_CUH_

#include <algorithm>
#include <cstdint>

#include "layers/cuda/stored_kernels_cuda.cuh"

namespace spill {
namespace cuda {

constexpr int kThreads = 256;     // threads per block, a power of two
constexpr int kWarpThreads = 32;  // threads per warp
constexpr int kWarps = kThreads / kWarpThreads;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride loops cover the rest

// Blocks for `n` elements of one thread each: at least one (a grid of zero
// blocks is a launch error; launchers return before launching nothing), at
// most kMaxBlocks.
inline int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

#define SPILL_GRID_LOOP(i, n)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Sum over the block in a fixed tree; every thread gets the total. Needs
// blockDim.x == kThreads and `shared` of kThreads entries.
__device__ inline double BlockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// Sum over a warp in a fixed butterfly; every lane gets the total.
__device__ inline double WarpSum(double v) {
  for (int s = kWarpThreads / 2; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
  return v;
}

// framework/base/random.h on the device (its host functions are not
// __device__), bit for bit: SplitMix64 and a 24-bit uniform in [0, 1) from
// (seed, index), for masks that match the CPU's.
__device__ __forceinline__ uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float UniformAt(uint64_t seed, uint64_t index) {
  return static_cast<float>(Mix64(seed ^ Mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

// std::max(a, b) exactly: a unless a < b.
__device__ __forceinline__ float MaxOf(float a, float b) { return a < b ? b : a; }

__device__ inline float BlockMax(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] = MaxOf(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const float top = shared[0];
  __syncthreads();
  return top;
}

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_KERNEL_UTIL_CUDA_CUH_
