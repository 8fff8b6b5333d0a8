// The vision layers' CUDA kernels (vision_kernels_cuda.h). One thread per
// output element, grid-stride loops; reductions over a plane by one block,
// warps first (shuffles) and then the warps' sums in warp order: a fixed
// tree, so results never depend on scheduling.
#include <math.h>

#include <algorithm>

#include "layers/cuda/stored_kernels_cuda.cuh"
#include "layers/cuda/vision_kernels_cuda.h"
#include "layers/layer_norm_math.h"
#include "layers/upsample_math.h"

namespace spill {
namespace cuda {
namespace {

constexpr int kThreads = 256;  // threads per block, a multiple of the warp
constexpr int kWarp = 32;
constexpr int64_t kMaxBlocks = 8192;  // grid-stride loops cover the rest

int Blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

int PlaneBlocks(int64_t planes) { return static_cast<int>(std::min<int64_t>(planes, kMaxBlocks)); }

#define SPILL_VISION_LOOP(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The sum of `v` over the block (blockDim.x == kThreads), for every thread.
__device__ double BlockTotal(double v) {
  __shared__ double warp_sums[kThreads / kWarp];
  __shared__ double total;
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / kWarp ? warp_sums[lane] : 0.0;
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
      v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    if (lane == 0) total = v;
  }
  __syncthreads();
  const double result = total;
  __syncthreads();  // before the next call overwrites the shared sums
  return result;
}

__device__ __forceinline__ float Store(float old, float v, bool accumulate) {
  return accumulate ? old + v : v;
}
// Beside it, the stored types' (stored_kernels_cuda.cuh).
using ::spill::cuda::Load;
using ::spill::cuda::Store;

// ---- Activations ----

template <typename T>
__global__ void ActivationForward(int64_t n, ActivationConstants k, const T* x, T* y) {
  SPILL_VISION_LOOP(i, n) { Store(&y[i], Activate(k, Load(x[i]))); }
}

template <typename T>
__global__ void ActivationBackward(int64_t n, ActivationConstants k, const T* v, const T* dy, T* dx,
                                   bool accumulate) {
  SPILL_VISION_LOOP(i, n) {
    Store(&dx[i], Store(Load(dx[i]), ActivationGrad(k, Load(v[i]), Load(dy[i])), accumulate));
  }
}

// ---- Broadcast ----

__global__ void BroadcastForward(BroadcastShape s, const float* a, const float* b, float* y) {
  SPILL_VISION_LOOP(i, s.planes * s.plane) {
    const int64_t p = i / s.plane;
    const float va = s.spread[0] ? a[p] : a[i], vb = s.spread[1] ? b[p] : b[i];
    y[i] = s.multiply ? va * vb : va + vb;
  }
}

__global__ void BroadcastGrad(BroadcastShape s, int input, const float* dy, const float* other,
                              float* dx, bool accumulate) {
  const bool spread_other = s.spread[1 - input];
  SPILL_VISION_LOOP(i, s.planes * s.plane) {
    const float v = other != nullptr ? dy[i] * other[spread_other ? i / s.plane : i] : dy[i];
    dx[i] = Store(dx[i], v, accumulate);
  }
}

// One block per plane: the plane's sum of dy (times the other input).
__global__ void BroadcastSpreadGrad(BroadcastShape s, const float* dy, const float* other,
                                    float* dx, bool accumulate) {
  for (int64_t p = blockIdx.x; p < s.planes; p += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < s.plane; j += blockDim.x) {
      const int64_t i = p * s.plane + j;
      sum += other != nullptr ? dy[i] * other[i] : dy[i];
    }
    sum = BlockTotal(sum);
    if (threadIdx.x == 0) dx[p] = Store(dx[p], static_cast<float>(sum), accumulate);
  }
}

// ---- Channel shuffle ----

__global__ void ChannelShuffle(int64_t n, int64_t c, int64_t plane, int64_t groups,
                               const float* from, float* to, bool inverse, bool accumulate) {
  const int64_t per = c / groups;
  SPILL_VISION_LOOP(e, n * c * plane) {
    const int64_t image = e / (c * plane), channel = (e / plane) % c, q = e % plane;
    // Forward writes channel j * groups + i from i * per + j; inverse the reverse.
    const int64_t source = inverse ? (channel % per) * groups + channel / per
                                   : (channel % groups) * per + channel / groups;
    to[e] = Store(to[e], from[(image * c + source) * plane + q], accumulate);
  }
}

// ---- Layer norm and scale ----

// layers/layer_norm_math.h's element policy for a stored type.
template <typename T>
struct Pixels;
template <>
struct Pixels<float> : FloatPixels {};
template <>
struct Pixels<__nv_bfloat16> {
  using T = __nv_bfloat16;
  __host__ __device__ static float Load(T v) { return __bfloat162float(v); }
  __host__ __device__ static T Store(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Pixels<__half> {
  using T = __half;
  __host__ __device__ static float Load(T v) { return __half2float(v); }
  __host__ __device__ static T Store(float v) { return __float2half_rn(v); }
};

template <typename T>
__global__ void LayerNormForward(int64_t n, int64_t c, int64_t plane, const T* x,
                                 const float* gamma, const float* beta, double eps, T* y) {
  SPILL_VISION_LOOP(r, n * plane) {
    const int64_t offset = (r / plane) * c * plane + r % plane;
    LayerNormPixel<Pixels<T>>(x + offset, gamma, beta, c, plane, eps, y + offset);
  }
}

template <typename T>
__global__ void LayerNormInputGrad(int64_t n, int64_t c, int64_t plane, const T* x, const T* dy,
                                   const float* gamma, double eps, double* stats, T* dx,
                                   bool accumulate) {
  SPILL_VISION_LOOP(r, n * plane) {
    const int64_t offset = (r / plane) * c * plane + r % plane;
    const PixelStats st = PixelStatistics<Pixels<T>>(x + offset, c, plane, eps);
    stats[2 * r] = st.mean;
    stats[2 * r + 1] = st.inv_std;
    if (dx != nullptr) {
      LayerNormPixelGrad<Pixels<T>>(x + offset, dy + offset, gamma, c, plane, st, dx + offset,
                                    accumulate);
    }
  }
}

// One block per channel; each image's plane is reduced, then added to the
// carried sums in image order.
template <typename T>
__global__ void ChannelGradSums(int64_t n, int64_t c, int64_t plane, const T* x, const T* dy,
                                const double* stats, double* carry, bool start, float* dgamma,
                                float* dbeta) {
  for (int64_t k = blockIdx.x; k < c; k += gridDim.x) {
    double sum_gamma = start ? 0.0 : carry[k], sum_beta = start ? 0.0 : carry[c + k];
    for (int64_t i = 0; i < n; ++i) {
      double a = 0, b = 0;
      for (int64_t q = threadIdx.x; q < plane; q += blockDim.x) {
        const int64_t e = (i * c + k) * plane + q;
        const float g = Load(dy[e]);
        if (stats != nullptr) {
          const int64_t pixel = 2 * (i * plane + q);
          a += g * Normalized(Load(x[e]), PixelStats{stats[pixel], stats[pixel + 1]});
        } else if (x != nullptr) {
          a += g * Load(x[e]);
        }
        b += g;
      }
      sum_gamma += BlockTotal(a);
      sum_beta += BlockTotal(b);
    }
    if (threadIdx.x == 0) {
      carry[k] = sum_gamma;
      carry[c + k] = sum_beta;
      if (dgamma != nullptr) dgamma[k] = static_cast<float>(sum_gamma);
      if (dbeta != nullptr) dbeta[k] = static_cast<float>(sum_beta);
    }
  }
}

__global__ void ScaleForward(int64_t n, int64_t c, int64_t plane, const float* x,
                             const float* gamma, const float* beta, float* y) {
  SPILL_VISION_LOOP(i, n * c * plane) {
    const int64_t k = (i / plane) % c;
    const float v = x[i] * gamma[k];
    y[i] = beta != nullptr ? v + beta[k] : v;
  }
}

__global__ void ScaleInputGrad(int64_t n, int64_t c, int64_t plane, const float* dy,
                               const float* gamma, float* dx, bool accumulate) {
  SPILL_VISION_LOOP(i, n * c * plane) {
    dx[i] = Store(dx[i], dy[i] * gamma[(i / plane) % c], accumulate);
  }
}

// ---- Upsampling and padding ----

__global__ void UpsampleForward(UpsampleShape s, const float* x, float* y) {
  const int64_t out_plane = s.out_h * s.out_w, in_plane = s.in_h * s.in_w;
  SPILL_VISION_LOOP(e, s.planes * out_plane) {
    const int64_t p = e / out_plane, oh = (e % out_plane) / s.out_w, ow = e % s.out_w;
    const float* src = x + p * in_plane;
    if (!s.bilinear) {
      y[e] = src[(oh / s.factor_h) * s.in_w + ow / s.factor_w];
      continue;
    }
    const LinearTap r = BilinearTap(oh, s.in_h, s.out_h, s.align_corners);
    const LinearTap c = BilinearTap(ow, s.in_w, s.out_w, s.align_corners);
    const float* top = src + r.i0 * s.in_w;
    const float* bottom = src + r.i1 * s.in_w;
    y[e] = r.w0 * (c.w0 * top[c.i0] + c.w1 * top[c.i1]) +
           r.w1 * (c.w0 * bottom[c.i0] + c.w1 * bottom[c.i1]);
  }
}

__global__ void UpsampleNearestBackward(UpsampleShape s, const float* dy, float* dx,
                                        bool accumulate) {
  const int64_t out_plane = s.out_h * s.out_w, in_plane = s.in_h * s.in_w;
  SPILL_VISION_LOOP(e, s.planes * in_plane) {
    const int64_t p = e / in_plane, ih = (e % in_plane) / s.in_w, iw = e % s.in_w;
    float sum = accumulate ? dx[e] : 0.0f;
    for (int64_t oh = ih * s.factor_h; oh < (ih + 1) * s.factor_h; ++oh) {
      for (int64_t ow = iw * s.factor_w; ow < (iw + 1) * s.factor_w; ++ow) {
        sum += dy[p * out_plane + oh * s.out_w + ow];
      }
    }
    dx[e] = sum;
  }
}

// One thread per plane, in the CPU layer's order.
__global__ void UpsampleBilinearBackward(UpsampleShape s, const float* dy, float* dx,
                                         bool accumulate) {
  const int64_t out_plane = s.out_h * s.out_w, in_plane = s.in_h * s.in_w;
  SPILL_VISION_LOOP(p, s.planes) {
    float* grad = dx + p * in_plane;
    if (!accumulate) {
      for (int64_t i = 0; i < in_plane; ++i) grad[i] = 0.0f;
    }
    const float* g = dy + p * out_plane;
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const LinearTap r = BilinearTap(oh, s.in_h, s.out_h, s.align_corners);
      float* top = grad + r.i0 * s.in_w;
      float* bottom = grad + r.i1 * s.in_w;
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        const LinearTap c = BilinearTap(ow, s.in_w, s.out_w, s.align_corners);
        const float v = g[oh * s.out_w + ow];
        top[c.i0] += r.w0 * c.w0 * v;
        top[c.i1] += r.w0 * c.w1 * v;
        bottom[c.i0] += r.w1 * c.w0 * v;
        bottom[c.i1] += r.w1 * c.w1 * v;
      }
    }
  }
}

__global__ void PadForward(PadShape s, float value, const float* x, float* y) {
  const int64_t out_plane = s.out_h * s.out_w;
  SPILL_VISION_LOOP(e, s.planes * out_plane) {
    const int64_t p = e / out_plane;
    const int64_t h = (e % out_plane) / s.out_w - s.top, w = e % s.out_w - s.left;
    const bool inside = h >= 0 && h < s.in_h && w >= 0 && w < s.in_w;
    y[e] = inside ? x[(p * s.in_h + h) * s.in_w + w] : value;
  }
}

__global__ void PadBackward(PadShape s, const float* dy, float* dx, bool accumulate) {
  const int64_t in_plane = s.in_h * s.in_w;
  SPILL_VISION_LOOP(e, s.planes * in_plane) {
    const int64_t p = e / in_plane;
    const int64_t h = (e % in_plane) / s.in_w + s.top, w = e % s.in_w + s.left;
    const bool inside = h >= 0 && h < s.out_h && w >= 0 && w < s.out_w;  // else cropped
    dx[e] = Store(dx[e], inside ? dy[(p * s.out_h + h) * s.out_w + w] : 0.0f, accumulate);
  }
}

// ---- Space to depth ----

template <typename T>
__global__ void SpaceToDepth(SpaceToDepthShape s, const T* from, T* to, bool inverse,
                             bool accumulate) {
  const int64_t width = SpaceToDepthRowLength(s);
  SPILL_VISION_LOOP(e, SpaceToDepthRows(s) * width) {
    const int64_t source = SpaceToDepthRowStart(s, e / width) + (e % width) * s.block;
    if (inverse) {
      Store(&to[source], Store(Load(to[source]), Load(from[e]), accumulate));
    } else {
      to[e] = from[source];  // a copy: the same bits in any type
    }
  }
}

// ---- im2col / col2im ----

__global__ void Im2Col(WindowShape s, const float* image, float* col) {
  const int64_t positions = s.out_h * s.out_w, taps = s.kernel_h * s.kernel_w;
  SPILL_VISION_LOOP(e, s.channels * taps * positions) {
    const int64_t row = e / positions, q = e % positions;
    const int64_t channel = row / taps, ki = (row % taps) / s.kernel_w, kj = row % s.kernel_w;
    const int64_t h = (q / s.out_w) * s.stride_h - s.pad_h + ki * s.dilation_h;
    const int64_t w = (q % s.out_w) * s.stride_w - s.pad_w + kj * s.dilation_w;
    const bool inside = h >= 0 && h < s.height && w >= 0 && w < s.width;
    col[e] = inside ? image[(channel * s.height + h) * s.width + w] : 0.0f;
  }
}

__global__ void Col2Im(WindowShape s, const float* col, float* image) {
  const int64_t positions = s.out_h * s.out_w;
  SPILL_VISION_LOOP(e, s.channels * s.height * s.width) {
    const int64_t channel = e / (s.height * s.width);
    const int64_t h = (e / s.width) % s.height, w = e % s.width;
    float sum = 0.0f;
    for (int64_t ki = 0; ki < s.kernel_h; ++ki) {
      const int64_t hs = h + s.pad_h - ki * s.dilation_h;
      if (hs < 0 || hs % s.stride_h != 0 || hs / s.stride_h >= s.out_h) continue;
      for (int64_t kj = 0; kj < s.kernel_w; ++kj) {
        const int64_t ws = w + s.pad_w - kj * s.dilation_w;
        if (ws < 0 || ws % s.stride_w != 0 || ws / s.stride_w >= s.out_w) continue;
        const int64_t row = (channel * s.kernel_h + ki) * s.kernel_w + kj;
        sum += col[row * positions + (hs / s.stride_h) * s.out_w + ws / s.stride_w];
      }
    }
    image[e] = sum;
  }
}

__global__ void AddChannelBias(int64_t n, int64_t c, int64_t plane, const float* bias, float* y) {
  SPILL_VISION_LOOP(i, n * c * plane) { y[i] += bias[(i / plane) % c]; }
}

// ---- Softmax per pixel ----

__global__ void PixelSoftmaxForward(int64_t n, int64_t c, int64_t pixels, const float* x,
                                    float* p) {
  SPILL_VISION_LOOP(r, n * pixels) {
    const int64_t base = (r / pixels) * c * pixels + r % pixels;
    float top = x[base];
    for (int64_t j = 1; j < c; ++j) top = top < x[base + j * pixels] ? x[base + j * pixels] : top;
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += exp(static_cast<double>(x[base + j * pixels] - top));
    for (int64_t j = 0; j < c; ++j) {
      const int64_t i = base + j * pixels;
      p[i] = static_cast<float>(exp(static_cast<double>(x[i] - top)) / sum);
    }
  }
}

__global__ void PixelSoftmaxLossBackward(int64_t n, int64_t c, int64_t pixels, const float* p,
                                         const float* labels, int64_t ignored, float scale,
                                         float* dx, bool accumulate) {
  SPILL_VISION_LOOP(i, n * c * pixels) {
    const int64_t image = i / (c * pixels), j = (i / pixels) % c, q = i % pixels;
    const int64_t label = static_cast<int64_t>(labels[image * pixels + q]);
    const float g = label == ignored ? 0.0f : (p[i] - (j == label ? 1.0f : 0.0f)) * scale;
    dx[i] = Store(dx[i], g, accumulate);
  }
}

}  // namespace

void LaunchActivationForward(Stored stored, int64_t n, const ActivationConstants& k, const void* x,
                             void* y, cudaStream_t stream) {
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ActivationForward<<<Blocks(n), kThreads, 0, stream>>>(n, k, static_cast<const T*>(x),
                                                          static_cast<T*>(y));
  });
}

void LaunchActivationBackward(Stored stored, int64_t n, const ActivationConstants& k, const void* v,
                              const void* dy, void* dx, bool accumulate, cudaStream_t stream) {
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ActivationBackward<<<Blocks(n), kThreads, 0, stream>>>(
        n, k, static_cast<const T*>(v), static_cast<const T*>(dy), static_cast<T*>(dx), accumulate);
  });
}

void LaunchBroadcastForward(const BroadcastShape& s, const float* a, const float* b, float* y,
                            cudaStream_t stream) {
  if (s.planes * s.plane <= 0) return;
  BroadcastForward<<<Blocks(s.planes * s.plane), kThreads, 0, stream>>>(s, a, b, y);
}

void LaunchBroadcastBackward(const BroadcastShape& s, int i, const float* dy, const float* other,
                             float* dx, bool accumulate, cudaStream_t stream) {
  if (s.planes * s.plane <= 0) return;
  const float* o = s.multiply ? other : nullptr;
  if (s.spread[i]) {
    // The other input is the map, never spread itself.
    BroadcastSpreadGrad<<<PlaneBlocks(s.planes), kThreads, 0, stream>>>(s, dy, o, dx, accumulate);
  } else {
    BroadcastGrad<<<Blocks(s.planes * s.plane), kThreads, 0, stream>>>(s, i, dy, o, dx, accumulate);
  }
}

void LaunchChannelShuffle(int64_t n, int64_t c, int64_t plane, int64_t groups, const float* from,
                          float* to, bool inverse, bool accumulate, cudaStream_t stream) {
  if (n * c * plane <= 0) return;
  ChannelShuffle<<<Blocks(n * c * plane), kThreads, 0, stream>>>(n, c, plane, groups, from, to,
                                                                 inverse, accumulate);
}

void LaunchLayerNormForward(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                            const float* gamma, const float* beta, double eps, void* y,
                            cudaStream_t stream) {
  if (n * plane <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    LayerNormForward<<<Blocks(n * plane), kThreads, 0, stream>>>(
        n, c, plane, static_cast<const T*>(x), gamma, beta, eps, static_cast<T*>(y));
  });
}

void LaunchLayerNormInputGrad(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                              const void* dy, const float* gamma, double eps, double* stats,
                              void* dx, bool accumulate, cudaStream_t stream) {
  if (n * plane <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    LayerNormInputGrad<<<Blocks(n * plane), kThreads, 0, stream>>>(
        n, c, plane, static_cast<const T*>(x), static_cast<const T*>(dy), gamma, eps, stats,
        static_cast<T*>(dx), accumulate);
  });
}

void LaunchChannelGradSums(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                           const void* dy, const double* stats, double* carry, bool start,
                           float* dgamma, float* dbeta, cudaStream_t stream) {
  if (c <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ChannelGradSums<<<PlaneBlocks(c), kThreads, 0, stream>>>(n, c, plane, static_cast<const T*>(x),
                                                             static_cast<const T*>(dy), stats,
                                                             carry, start, dgamma, dbeta);
  });
}

void LaunchScaleForward(int64_t n, int64_t c, int64_t plane, const float* x, const float* gamma,
                        const float* beta, float* y, cudaStream_t stream) {
  if (n * c * plane <= 0) return;
  ScaleForward<<<Blocks(n * c * plane), kThreads, 0, stream>>>(n, c, plane, x, gamma, beta, y);
}

void LaunchScaleInputGrad(int64_t n, int64_t c, int64_t plane, const float* dy, const float* gamma,
                          float* dx, bool accumulate, cudaStream_t stream) {
  if (n * c * plane <= 0) return;
  ScaleInputGrad<<<Blocks(n * c * plane), kThreads, 0, stream>>>(n, c, plane, dy, gamma, dx,
                                                                 accumulate);
}

void LaunchUpsampleForward(const UpsampleShape& s, const float* x, float* y, cudaStream_t stream) {
  const int64_t n = s.planes * s.out_h * s.out_w;
  if (n <= 0) return;
  UpsampleForward<<<Blocks(n), kThreads, 0, stream>>>(s, x, y);
}

void LaunchUpsampleBackward(const UpsampleShape& s, const float* dy, float* dx, bool accumulate,
                            cudaStream_t stream) {
  if (s.planes * s.in_h * s.in_w <= 0) return;
  if (s.bilinear) {
    UpsampleBilinearBackward<<<Blocks(s.planes), kThreads, 0, stream>>>(s, dy, dx, accumulate);
  } else {
    UpsampleNearestBackward<<<Blocks(s.planes * s.in_h * s.in_w), kThreads, 0, stream>>>(
        s, dy, dx, accumulate);
  }
}

void LaunchPadForward(const PadShape& s, float value, const float* x, float* y,
                      cudaStream_t stream) {
  const int64_t n = s.planes * s.out_h * s.out_w;
  if (n <= 0) return;
  PadForward<<<Blocks(n), kThreads, 0, stream>>>(s, value, x, y);
}

void LaunchPadBackward(const PadShape& s, const float* dy, float* dx, bool accumulate,
                       cudaStream_t stream) {
  const int64_t n = s.planes * s.in_h * s.in_w;
  if (n <= 0) return;
  PadBackward<<<Blocks(n), kThreads, 0, stream>>>(s, dy, dx, accumulate);
}

void LaunchSpaceToDepth(Stored stored, const SpaceToDepthShape& s, const void* from, void* to,
                        bool inverse, bool accumulate, cudaStream_t stream) {
  const int64_t n = s.n * s.c * s.h * s.w;
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    SpaceToDepth<<<Blocks(n), kThreads, 0, stream>>>(s, static_cast<const T*>(from),
                                                     static_cast<T*>(to), inverse, accumulate);
  });
}

void LaunchIm2Col(const WindowShape& s, const float* image, float* col, cudaStream_t stream) {
  const int64_t n = s.channels * s.kernel_h * s.kernel_w * s.out_h * s.out_w;
  if (n <= 0) return;
  Im2Col<<<Blocks(n), kThreads, 0, stream>>>(s, image, col);
}

void LaunchCol2Im(const WindowShape& s, const float* col, float* image, cudaStream_t stream) {
  const int64_t n = s.channels * s.height * s.width;
  if (n <= 0) return;
  Col2Im<<<Blocks(n), kThreads, 0, stream>>>(s, col, image);
}

void LaunchAddChannelBias(int64_t n, int64_t c, int64_t plane, const float* bias, float* y,
                          cudaStream_t stream) {
  if (n * c * plane <= 0) return;
  AddChannelBias<<<Blocks(n * c * plane), kThreads, 0, stream>>>(n, c, plane, bias, y);
}

void LaunchPixelSoftmaxForward(int64_t n, int64_t c, int64_t pixels, const float* x, float* p,
                               cudaStream_t stream) {
  if (n * pixels <= 0) return;
  PixelSoftmaxForward<<<Blocks(n * pixels), kThreads, 0, stream>>>(n, c, pixels, x, p);
}

void LaunchPixelSoftmaxLossBackward(int64_t n, int64_t c, int64_t pixels, const float* p,
                                    const float* labels, int64_t ignored, float scale, float* dx,
                                    bool accumulate, cudaStream_t stream) {
  if (n * c * pixels <= 0) return;
  PixelSoftmaxLossBackward<<<Blocks(n * c * pixels), kThreads, 0, stream>>>(
      n, c, pixels, p, labels, ignored, scale, dx, accumulate);
}

}  // namespace cuda
}  // namespace spill
