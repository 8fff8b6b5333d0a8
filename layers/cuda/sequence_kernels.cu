// The sequence layers' kernels. See sequence_kernels_cuda.h.
#include <cmath>

#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/cuda/sequence_kernels_cuda.h"

namespace spill {
namespace cuda {
namespace {

template <typename T>
__global__ void PositionsForward(int64_t images, int64_t channels, int64_t steps, int64_t length,
                                 const T* x, const float* table, T* y) {
  SPILL_GRID_LOOP(e, images * channels * steps) {
    const int64_t t = e % steps, k = (e / steps) % channels;
    Store(&y[e], Load(x[e]) + table[k * length + t]);
  }
}

template <typename T>
__global__ void PositionsTableGrad(int64_t images, int64_t channels, int64_t steps, int64_t length,
                                   const T* dy, float* dtable) {
  SPILL_GRID_LOOP(kt, channels * steps) {
    const int64_t k = kt / steps, t = kt % steps;
    float sum = dtable[k * length + t];
    for (int64_t i = 0; i < images; ++i) sum += Load(dy[(i * channels + k) * steps + t]);
    dtable[k * length + t] = sum;
  }
}

// Element (image, channel, t) of an N x channels x 1 x T tensor.
__device__ inline int64_t At(int64_t image, int64_t channels, int64_t channel, int64_t steps,
                             int64_t t) {
  return (image * channels + channel) * steps + t;
}

struct Head {
  int64_t image, head, t, d, c3, q0, k0, v0;
};

__device__ inline Head HeadOf(const AttentionShape& s, int64_t index) {
  Head h;
  h.t = index % s.steps;
  const int64_t pair = index / s.steps;
  h.head = pair % s.heads;
  h.image = pair / s.heads;
  h.d = s.channels / s.heads;
  h.c3 = 3 * s.channels;
  h.q0 = h.head * h.d;
  h.k0 = s.channels + h.q0;
  h.v0 = 2 * s.channels + h.q0;
  return h;
}

template <typename T>
__device__ inline float Score(const AttentionShape& s, const Head& h, const T* x, int64_t q,
                              int64_t key, float scale) {
  float dot = 0;
  for (int64_t i = 0; i < h.d; ++i) {
    dot += Load(x[At(h.image, h.c3, h.q0 + i, s.steps, q)]) *
           Load(x[At(h.image, h.c3, h.k0 + i, s.steps, key)]);
  }
  return dot * scale;
}

// P[q][key] from what forward saved.
template <typename T>
__device__ inline float Probability(const AttentionShape& s, const Head& h, const T* x,
                                    const float* saved, int64_t q, int64_t key, float scale) {
  const int64_t row = (h.image * s.heads + h.head) * s.steps + q;
  if (!s.tiled) return saved[row * s.steps + key];
  return expf(Score(s, h, x, q, key, scale) - saved[2 * row]) * saved[2 * row + 1];
}

template <typename T>
__global__ void AttentionForward(AttentionShape s, const T* x, T* y, float* saved) {
  SPILL_GRID_LOOP(index, s.images * s.heads * s.steps) {
    const Head h = HeadOf(s, index);
    const float scale = rsqrtf(static_cast<float>(h.d));
    const int64_t end = s.causal ? h.t + 1 : s.steps;
    float max = -INFINITY;
    for (int64_t key = 0; key < end; ++key) max = fmaxf(max, Score(s, h, x, h.t, key, scale));
    double sum = 0;
    for (int64_t key = 0; key < end; ++key) sum += expf(Score(s, h, x, h.t, key, scale) - max);
    const float inverse = static_cast<float>(1.0 / sum);
    float o[kMaxAttentionDepth];
    for (int64_t i = 0; i < h.d; ++i) o[i] = 0;
    const int64_t row = (h.image * s.heads + h.head) * s.steps + h.t;
    for (int64_t key = 0; key < s.steps; ++key) {
      const float p = key < end ? expf(Score(s, h, x, h.t, key, scale) - max) * inverse : 0.0f;
      if (!s.tiled) saved[row * s.steps + key] = p;
      if (key >= end) continue;
      for (int64_t i = 0; i < h.d; ++i) {
        o[i] += p * Load(x[At(h.image, h.c3, h.v0 + i, s.steps, key)]);
      }
    }
    if (s.tiled) {
      saved[2 * row] = max;
      saved[2 * row + 1] = inverse;
    }
    for (int64_t i = 0; i < h.d; ++i) {
      Store(&y[At(h.image, s.channels, h.q0 + i, s.steps, h.t)], o[i]);
    }
  }
}

template <typename T>
__device__ inline float DotOutputGrad(const AttentionShape& s, const Head& h, const T* x,
                                      const T* dy, int64_t q, int64_t key) {
  float dot = 0;
  for (int64_t i = 0; i < h.d; ++i) {
    dot += Load(dy[At(h.image, s.channels, h.q0 + i, s.steps, q)]) *
           Load(x[At(h.image, h.c3, h.v0 + i, s.steps, key)]);
  }
  return dot;
}

// A thread per query: D = sum(P dP) into rows, then dQ.
template <typename T>
__global__ void AttentionQueryGrad(AttentionShape s, const T* x, const T* dy, const float* saved,
                                   float* rows, T* dx, bool add) {
  SPILL_GRID_LOOP(index, s.images * s.heads * s.steps) {
    const Head h = HeadOf(s, index);
    const float scale = rsqrtf(static_cast<float>(h.d));
    const int64_t end = s.causal ? h.t + 1 : s.steps;
    double total = 0;
    for (int64_t key = 0; key < end; ++key) {
      total += static_cast<double>(Probability(s, h, x, saved, h.t, key, scale)) *
               DotOutputGrad(s, h, x, dy, h.t, key);
    }
    const float mean = static_cast<float>(total);
    rows[index] = mean;
    float dq[kMaxAttentionDepth];
    for (int64_t i = 0; i < h.d; ++i) dq[i] = 0;
    for (int64_t key = 0; key < end; ++key) {
      const float p = Probability(s, h, x, saved, h.t, key, scale);
      const float ds = p * (DotOutputGrad(s, h, x, dy, h.t, key) - mean) * scale;
      for (int64_t i = 0; i < h.d; ++i) {
        dq[i] += ds * Load(x[At(h.image, h.c3, h.k0 + i, s.steps, key)]);
      }
    }
    for (int64_t i = 0; i < h.d; ++i) {
      T* out = &dx[At(h.image, h.c3, h.q0 + i, s.steps, h.t)];
      Store(out, add ? Load(*out) + dq[i] : dq[i]);
    }
  }
}

// A thread per key: dK and dV over the queries that attend to it, in order.
template <typename T>
__global__ void AttentionKeyGrad(AttentionShape s, const T* x, const T* dy, const float* saved,
                                 const float* rows, T* dx, bool add) {
  SPILL_GRID_LOOP(index, s.images * s.heads * s.steps) {
    const Head h = HeadOf(s, index);  // h.t: the key
    const float scale = rsqrtf(static_cast<float>(h.d));
    float dk[kMaxAttentionDepth], dv[kMaxAttentionDepth];
    for (int64_t i = 0; i < h.d; ++i) dk[i] = dv[i] = 0;
    const int64_t first = s.causal ? h.t : 0;
    for (int64_t q = first; q < s.steps; ++q) {
      const float p = Probability(s, h, x, saved, q, h.t, scale);
      const float mean = rows[(h.image * s.heads + h.head) * s.steps + q];
      const float ds = p * (DotOutputGrad(s, h, x, dy, q, h.t) - mean) * scale;
      for (int64_t i = 0; i < h.d; ++i) {
        dk[i] += ds * Load(x[At(h.image, h.c3, h.q0 + i, s.steps, q)]);
        dv[i] += p * Load(dy[At(h.image, s.channels, h.q0 + i, s.steps, q)]);
      }
    }
    for (int64_t i = 0; i < h.d; ++i) {
      T* k = &dx[At(h.image, h.c3, h.k0 + i, s.steps, h.t)];
      T* v = &dx[At(h.image, h.c3, h.v0 + i, s.steps, h.t)];
      Store(k, add ? Load(*k) + dk[i] : dk[i]);
      Store(v, add ? Load(*v) + dv[i] : dv[i]);
    }
  }
}

}  // namespace

void LaunchPositionsForward(Stored stored, int64_t images, int64_t channels, int64_t steps,
                            int64_t length, const void* x, const float* table, void* y,
                            cudaStream_t stream) {
  const int64_t total = images * channels * steps;
  if (total <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    PositionsForward<<<Blocks(total), kThreads, 0, stream>>>(
        images, channels, steps, length, static_cast<const T*>(x), table, static_cast<T*>(y));
  });
}

void LaunchPositionsTableGrad(Stored stored, int64_t images, int64_t channels, int64_t steps,
                              int64_t length, const void* dy, float* dtable, cudaStream_t stream) {
  if (images <= 0 || channels * steps <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    PositionsTableGrad<<<Blocks(channels * steps), kThreads, 0, stream>>>(
        images, channels, steps, length, static_cast<const T*>(dy), dtable);
  });
}

void LaunchAttentionForward(Stored stored, const AttentionShape& s, const void* x, void* y,
                            float* saved, cudaStream_t stream) {
  const int64_t total = s.images * s.heads * s.steps;
  if (total <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    AttentionForward<<<Blocks(total), kThreads, 0, stream>>>(s, static_cast<const T*>(x),
                                                             static_cast<T*>(y), saved);
  });
}

void LaunchAttentionBackward(Stored stored, const AttentionShape& s, const void* x, const void* dy,
                             const float* saved, float* rows, void* dx, bool add,
                             cudaStream_t stream) {
  const int64_t total = s.images * s.heads * s.steps;
  if (total <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    T* dxt = static_cast<T*>(dx);
    AttentionQueryGrad<<<Blocks(total), kThreads, 0, stream>>>(s, xt, dyt, saved, rows, dxt, add);
    AttentionKeyGrad<<<Blocks(total), kThreads, 0, stream>>>(s, xt, dyt, saved, rows, dxt, add);
  });
}

}  // namespace cuda
}  // namespace spill
