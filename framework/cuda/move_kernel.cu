// A block moved down over itself by one kernel (framework/device/downward_move.h):
// one thread block walks the block in waves; each wave its threads load a
// wave's bytes into registers, synchronise, and store them. A wave's stores
// land below the source bytes still to be loaded (the destination is below
// the source), and every load of a wave happens before any store of it, so
// each byte is read before it is overwritten - memmove's result, whatever
// the distance moved.
#include <cstdint>

#include "framework/cuda/move_kernel_cuda.h"

namespace spill {
namespace cuda {
namespace {

constexpr int kMoveThreads = 1024;
constexpr int kPerThread = 4;  // elements each thread holds per wave

template <typename T>
__global__ void MoveDown(T* dst, const T* src, size_t count) {
  const size_t wave = static_cast<size_t>(blockDim.x) * kPerThread;
  for (size_t base = 0; base < count; base += wave) {
    T held[kPerThread];
    for (int k = 0; k < kPerThread; ++k) {
      const size_t i = base + k * blockDim.x + threadIdx.x;
      if (i < count) held[k] = src[i];
    }
    __syncthreads();
    for (int k = 0; k < kPerThread; ++k) {
      const size_t i = base + k * blockDim.x + threadIdx.x;
      if (i < count) dst[i] = held[k];
    }
  }
}

}  // namespace

void MoveDownAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const auto address = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if ((address(dst) | address(src) | bytes) % sizeof(uint4) == 0) {
    MoveDown<<<1, kMoveThreads, 0, stream>>>(static_cast<uint4*>(dst),
                                             static_cast<const uint4*>(src), bytes / sizeof(uint4));
  } else {
    MoveDown<<<1, kMoveThreads, 0, stream>>>(static_cast<unsigned char*>(dst),
                                             static_cast<const unsigned char*>(src), bytes);
  }
}

}  // namespace cuda
}  // namespace spill
