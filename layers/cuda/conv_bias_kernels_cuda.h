// The bias of a convolution computed in 16 bits (convolution_cuda.h): the
// float32 bias added into stored outputs, and its float32 gradient summed
// from stored output gradients. Each enqueues on `stream`; callers check the
// launch with SPILL_CUDA_CHECK_LAUNCH().
#ifndef SPILL_LAYERS_CUDA_CONV_BIAS_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_CONV_BIAS_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/cuda/stored_cuda.h"

namespace spill {
namespace cuda {

// y[n][c][p] (=) y[n][c][p] + bias[c] over `images` NCHW images of
// `channels` planes of `plane` elements, y stored as `stored`.
void LaunchAddChannelBias(Stored stored, int64_t images, int64_t channels, int64_t plane,
                          const float* bias, void* y, cudaStream_t stream);

// db[c] (=|+=) the sum of dy[n][c][p] over the images and the plane: one
// block per channel, in double, in a fixed order, so the result never
// depends on scheduling.
void LaunchChannelSums(Stored stored, int64_t images, int64_t channels, int64_t plane,
                       const void* dy, float* db, bool accumulate, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_CONV_BIAS_KERNELS_CUDA_H_
