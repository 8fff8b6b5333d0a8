// BatchNorm's kernels (layer_kernels_cuda.h). Every reduction over the
// batch goes image by image in batch order into double sums carried in
// memory between calls, so slices of the batch, one call each, give the bits
// of one call over the whole batch: one block per channel; each warp sums
// one image's plane (lanes striding it, then a fixed butterfly), and thread
// 0 adds the images' sums to the carry in order. Activations are read and
// written in the type they are stored in (Load, Store); the arithmetic is
// float32's and double's.
#include <math.h>

#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/cuda/layer_kernels_cuda.h"

namespace spill {
namespace cuda {
namespace {

template <typename T>
__global__ void BatchNormSums(int64_t n, int64_t c, int64_t plane, const T* x, double* carry,
                              bool start, bool squares, double count) {
  __shared__ double image_sums[kWarps];
  const int64_t ch = blockIdx.x;
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  // Squares deviate from the mean of finished sums (sweep 0 is done).
  const double mu = squares ? carry[ch] / count : 0.0;
  double* acc = carry + (squares ? c : 0) + ch;
  double total = 0;
  if (threadIdx.x == 0 && !start) total = *acc;
  for (int64_t base = 0; base < n; base += kWarps) {
    const int64_t i = base + warp;
    if (i < n) {  // the whole warp or none of it: the butterfly needs every lane
      const T* p = x + (i * c + ch) * plane;
      double s = 0;
      for (int64_t j = lane; j < plane; j += kWarpThreads) {
        const double v = Load(p[j]);
        s += squares ? (v - mu) * (v - mu) : v;
      }
      s = WarpSum(s);
      if (lane == 0) image_sums[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 0; w < kWarps && base + w < n; ++w) total += image_sums[w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *acc = total;
}

__global__ void BatchNormFinish(int64_t c, const double* carry, double count, double eps,
                                double momentum, float* mean, float* inv_std, float* running_mean,
                                float* running_var) {
  SPILL_GRID_LOOP(ch, c) {
    const double mu = carry[ch] / count, var = carry[c + ch] / count;
    mean[ch] = static_cast<float>(mu);
    inv_std[ch] = static_cast<float>(1.0 / sqrt(var + eps));
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    running_mean[ch] = static_cast<float>((1 - momentum) * running_mean[ch] + momentum * mu);
    running_var[ch] = static_cast<float>((1 - momentum) * running_var[ch] + momentum * unbiased);
  }
}

__global__ void BatchNormFromRunning(int64_t c, const float* running_mean, const float* running_var,
                                     double eps, float* mean, float* inv_std) {
  SPILL_GRID_LOOP(ch, c) {
    mean[ch] = running_mean[ch];
    inv_std[ch] = static_cast<float>(1.0 / sqrt(static_cast<double>(running_var[ch]) + eps));
  }
}

template <typename T>
__global__ void BatchNormApply(int64_t n, int64_t c, int64_t plane, const T* x, const float* gamma,
                               const float* beta, const float* mean, const float* inv_std, T* y) {
  SPILL_GRID_LOOP(i, n * c * plane) {
    const int64_t ch = (i / plane) % c;
    const float scale = gamma[ch] * inv_std[ch];
    Store(&y[i], (Load(x[i]) - mean[ch]) * scale + beta[ch]);
  }
}

template <typename T>
__global__ void BatchNormGradientSums(int64_t n, int64_t c, int64_t plane, const T* x, const T* dy,
                                      const float* mean, double* carry, bool start) {
  __shared__ double image_dy[kWarps], image_dy_xc[kWarps];
  const int64_t ch = blockIdx.x;
  const int warp = threadIdx.x / kWarpThreads, lane = threadIdx.x % kWarpThreads;
  const float mu = mean[ch];
  double sum_dy = 0, sum_dy_xc = 0;  // xc = x - mean
  if (threadIdx.x == 0 && !start) {
    sum_dy = carry[ch];
    sum_dy_xc = carry[c + ch];
  }
  for (int64_t base = 0; base < n; base += kWarps) {
    const int64_t i = base + warp;
    if (i < n) {
      const int64_t at = (i * c + ch) * plane;
      double s_dy = 0, s_xc = 0;
      for (int64_t j = lane; j < plane; j += kWarpThreads) {
        const float g = Load(dy[at + j]);
        s_dy += g;
        s_xc += static_cast<double>(g) * (Load(x[at + j]) - mu);
      }
      s_dy = WarpSum(s_dy);
      s_xc = WarpSum(s_xc);
      if (lane == 0) {
        image_dy[warp] = s_dy;
        image_dy_xc[warp] = s_xc;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 0; w < kWarps && base + w < n; ++w) {
        sum_dy += image_dy[w];
        sum_dy_xc += image_dy_xc[w];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    carry[ch] = sum_dy;
    carry[c + ch] = sum_dy_xc;
  }
}

__global__ void BatchNormParamGrads(int64_t c, const double* carry, const float* inv_std,
                                    float* dgamma, float* dbeta) {
  SPILL_GRID_LOOP(ch, c) {
    if (dgamma != nullptr) dgamma[ch] = static_cast<float>(carry[c + ch] * inv_std[ch]);
    if (dbeta != nullptr) dbeta[ch] = static_cast<float>(carry[ch]);
  }
}

template <typename T>
__global__ void BatchNormInputGrad(int64_t n, int64_t c, int64_t plane, const T* x, const T* dy,
                                   const float* gamma, const float* mean, const float* inv_std,
                                   const double* carry, double count, T* dx, bool accumulate) {
  SPILL_GRID_LOOP(i, n * c * plane) {
    const int64_t ch = (i / plane) % c;
    const float mu = mean[ch], istd = inv_std[ch];
    const double sum_dy_xhat = carry[c + ch] * istd;
    const float k = gamma[ch] * istd;
    const float mean_dy = static_cast<float>(carry[ch] / count);
    const float coef = static_cast<float>(sum_dy_xhat / count) * istd;  // per unit of x - mean
    const float v = k * (Load(dy[i]) - mean_dy - (Load(x[i]) - mu) * coef);
    Store(&dx[i], accumulate ? Load(dx[i]) + v : v);
  }
}

}  // namespace

void LaunchBatchNormSums(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                         double* carry, bool start, bool squares, double count,
                         cudaStream_t stream) {
  if (c <= 0 || n <= 0 || plane <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    BatchNormSums<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        n, c, plane, static_cast<const T*>(x), carry, start, squares, count);
  });
}

void LaunchBatchNormFinish(int64_t c, const double* carry, double count, double eps,
                           double momentum, float* mean, float* inv_std, float* running_mean,
                           float* running_var, cudaStream_t stream) {
  if (c <= 0) return;
  BatchNormFinish<<<Blocks(c), kThreads, 0, stream>>>(c, carry, count, eps, momentum, mean, inv_std,
                                                      running_mean, running_var);
}

void LaunchBatchNormFromRunning(int64_t c, const float* running_mean, const float* running_var,
                                double eps, float* mean, float* inv_std, cudaStream_t stream) {
  if (c <= 0) return;
  BatchNormFromRunning<<<Blocks(c), kThreads, 0, stream>>>(c, running_mean, running_var, eps, mean,
                                                           inv_std);
}

void LaunchBatchNormApply(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                          const float* gamma, const float* beta, const float* mean,
                          const float* inv_std, void* y, cudaStream_t stream) {
  const int64_t total = n * c * plane;
  if (total <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    BatchNormApply<<<Blocks(total), kThreads, 0, stream>>>(
        n, c, plane, static_cast<const T*>(x), gamma, beta, mean, inv_std, static_cast<T*>(y));
  });
}

void LaunchBatchNormGradientSums(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                                 const void* dy, const float* mean, double* carry, bool start,
                                 cudaStream_t stream) {
  if (c <= 0 || n <= 0 || plane <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    BatchNormGradientSums<<<static_cast<unsigned>(c), kThreads, 0, stream>>>(
        n, c, plane, static_cast<const T*>(x), static_cast<const T*>(dy), mean, carry, start);
  });
}

void LaunchBatchNormParamGrads(int64_t c, const double* carry, const float* inv_std, float* dgamma,
                               float* dbeta, cudaStream_t stream) {
  if (c <= 0 || (dgamma == nullptr && dbeta == nullptr)) return;
  BatchNormParamGrads<<<Blocks(c), kThreads, 0, stream>>>(c, carry, inv_std, dgamma, dbeta);
}

void LaunchBatchNormInputGrad(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                              const void* dy, const float* gamma, const float* mean,
                              const float* inv_std, const double* carry, double count, void* dx,
                              bool accumulate, cudaStream_t stream) {
  const int64_t total = n * c * plane;
  if (total <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    BatchNormInputGrad<<<Blocks(total), kThreads, 0, stream>>>(
        n, c, plane, static_cast<const T*>(x), static_cast<const T*>(dy), gamma, mean, inv_std,
        carry, count, static_cast<T*>(dx), accumulate);
  });
}

}  // namespace cuda
}  // namespace spill
