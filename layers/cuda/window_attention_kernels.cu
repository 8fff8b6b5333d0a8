// window_attention's kernels. See window_attention_kernels_cuda.h; the
// arithmetic follows layers/cpu/window_attention_cpu.cc step for step, on
// x, y, dy and dx as they are stored (Load, Store: stored_cuda.h).
#include <cmath>

#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/cuda/sequence_kernels_cuda.h"  // kMaxAttentionDepth
#include "layers/cuda/window_attention_kernels_cuda.h"

namespace spill {
namespace cuda {
namespace {

// Token t of a unit, and where its window's channels start.
struct WindowToken {
  int64_t unit, image, window, head, t, d, plane, q0, k0, v0;
};

// index = unit T + t, unit = (image windows + window) heads + head.
__device__ inline WindowToken TokenOf(const WindowAttentionShape& s, int64_t index) {
  WindowToken w;
  const int64_t tokens = s.grid.tokens();
  w.t = index % tokens;
  w.unit = index / tokens;
  w.head = w.unit % s.heads;
  const int64_t pair = w.unit / s.heads;
  w.window = pair % s.grid.windows();
  w.image = pair / s.grid.windows();
  w.d = s.channels / s.heads;
  w.plane = s.grid.height * s.grid.width;
  w.q0 = w.head * w.d;
  w.k0 = s.channels + w.q0;
  w.v0 = 2 * s.channels + w.q0;
  return w;
}

// Channel `channel`'s element at token t of the unit's window, in an
// N x channels x H x W tensor.
__device__ inline int64_t At(const WindowAttentionShape& s, const WindowToken& w, int64_t channels,
                             int64_t channel, int64_t t) {
  return (w.image * channels + channel) * w.plane + WindowPixel(s.grid, w.window, t);
}

// Channels [first, first + d) of token t of x into `row`, divided by
// max(|row|, 1e-12) (cosine attention's F.normalize); returns |row|.
template <typename T>
__device__ inline float NormalizedRow(const WindowAttentionShape& s, const WindowToken& w,
                                      const T* x, int64_t first, int64_t t, float* row) {
  for (int64_t i = 0; i < w.d; ++i) row[i] = Load(x[At(s, w, 3 * s.channels, first + i, t)]);
  return NormalizeRow(row, w.d);
}

// The cosine of query t (q_hat, normalized) and key u, summed in order.
template <typename T>
__device__ inline float Cosine(const WindowAttentionShape& s, const WindowToken& w, const T* x,
                               const float* q_hat, int64_t u) {
  float k_hat[kMaxAttentionDepth];
  NormalizedRow(s, w, x, w.k0, u, k_hat);
  float dot = 0;
  for (int64_t i = 0; i < w.d; ++i) dot += q_hat[i] * k_hat[i];
  return dot;
}

// The head's clamped exp(logit_scale) with cosine attention, else 1.
__device__ inline float HeadScale(const WindowAttentionShape& s, const WindowToken& w,
                                  const float* logit_scale) {
  return s.cosine ? CosineScale(logit_scale[w.head]) : 1.0f;
}

// S[t][u] = (q_t d^-1/2) . k_u + bias + mask, or with cosine attention
// cos(q_t, k_u) head_scale + bias + mask (q_hat: query t normalized).
template <typename T>
__device__ inline float Score(const WindowAttentionShape& s, const WindowToken& w, const T* x,
                              const float* table, const float* q_hat, float head_scale, int64_t t,
                              int64_t u) {
  const int64_t c3 = 3 * s.channels;
  float dot = 0;
  if (s.cosine) {
    dot = Cosine(s, w, x, q_hat, u) * head_scale;
  } else {
    for (int64_t i = 0; i < w.d; ++i) {
      dot += Load(x[At(s, w, c3, w.q0 + i, t)]) * s.scale * Load(x[At(s, w, c3, w.k0 + i, u)]);
    }
  }
  const float bias = table[RelativeIndex(s.grid.window, t, u) * s.heads + w.head];
  return dot + bias + WindowMask(s.grid, w.window, t, u);
}

// dP[t][u] = dO_t . v_u.
template <typename T>
__device__ inline float DotOutputGrad(const WindowAttentionShape& s, const WindowToken& w,
                                      const T* x, const T* dy, int64_t t, int64_t u) {
  float dot = 0;
  for (int64_t i = 0; i < w.d; ++i) {
    dot += Load(dy[At(s, w, s.channels, w.q0 + i, t)]) *
           Load(x[At(s, w, 3 * s.channels, w.v0 + i, u)]);
  }
  return dot;
}

__device__ inline const float* UnitProbabilities(const WindowAttentionShape& s, const float* saved,
                                                 int64_t unit) {
  return saved + unit * s.grid.tokens() * s.grid.tokens();
}

template <typename T>
__global__ void WindowAttentionForward(WindowAttentionShape s, const T* x, const float* table,
                                       const float* logit_scale, T* y, float* saved) {
  const int64_t tokens = s.grid.tokens();
  SPILL_GRID_LOOP(index, s.images * s.grid.windows() * s.heads * tokens) {
    const WindowToken w = TokenOf(s, index);
    float q_hat[kMaxAttentionDepth];
    if (s.cosine) NormalizedRow(s, w, x, w.q0, w.t, q_hat);
    const float head_scale = HeadScale(s, w, logit_scale);
    auto score = [&](int64_t u) { return Score(s, w, x, table, q_hat, head_scale, w.t, u); };
    float max = -INFINITY;
    for (int64_t u = 0; u < tokens; ++u) max = fmaxf(max, score(u));
    float sum = 0;
    for (int64_t u = 0; u < tokens; ++u) sum += expf(score(u) - max);
    float o[kMaxAttentionDepth];
    for (int64_t i = 0; i < w.d; ++i) o[i] = 0;
    float* row = saved + index * tokens;
    for (int64_t u = 0; u < tokens; ++u) {
      const float p = expf(score(u) - max) / sum;
      row[u] = p;
      for (int64_t i = 0; i < w.d; ++i) {
        o[i] += p * Load(x[At(s, w, 3 * s.channels, w.v0 + i, u)]);
      }
    }
    for (int64_t i = 0; i < w.d; ++i) Store(&y[At(s, w, s.channels, w.q0 + i, w.t)], o[i]);
  }
}

// A thread per query: D = sum(P dP) into rows, then dQ = d^-1/2 dS K. With
// cosine attention dQ^ = head_scale dS K^ taken back through the
// normalization, and the row's sum(dS cos) into `cosines` where it is not
// null.
template <typename T>
__global__ void WindowAttentionQueryGrad(WindowAttentionShape s, const T* x, const T* dy,
                                         const float* saved, const float* logit_scale, float* rows,
                                         float* cosines, T* dx, bool add) {
  const int64_t tokens = s.grid.tokens();
  SPILL_GRID_LOOP(index, s.images * s.grid.windows() * s.heads * tokens) {
    const WindowToken w = TokenOf(s, index);
    const float* p = saved + index * tokens;
    double total = 0;
    for (int64_t u = 0; u < tokens; ++u) {
      total += static_cast<double>(p[u]) * DotOutputGrad(s, w, x, dy, w.t, u);
    }
    const float mean = static_cast<float>(total);
    rows[index] = mean;
    if (dx == nullptr && cosines == nullptr) continue;
    float q_hat[kMaxAttentionDepth], k_hat[kMaxAttentionDepth];
    const float q_norm = s.cosine ? NormalizedRow(s, w, x, w.q0, w.t, q_hat) : 0.0f;
    float dq[kMaxAttentionDepth];
    for (int64_t i = 0; i < w.d; ++i) dq[i] = 0;
    float cosine_sum = 0;
    for (int64_t u = 0; u < tokens; ++u) {
      const float ds = p[u] * (DotOutputGrad(s, w, x, dy, w.t, u) - mean);
      if (s.cosine) {
        NormalizedRow(s, w, x, w.k0, u, k_hat);
        float cos = 0;
        for (int64_t i = 0; i < w.d; ++i) cos += q_hat[i] * k_hat[i];
        cosine_sum += ds * cos;
        for (int64_t i = 0; i < w.d; ++i) dq[i] += ds * k_hat[i];
      } else {
        for (int64_t i = 0; i < w.d; ++i) {
          dq[i] += ds * Load(x[At(s, w, 3 * s.channels, w.k0 + i, u)]);
        }
      }
    }
    if (cosines != nullptr) cosines[index] = cosine_sum;
    if (dx == nullptr) continue;
    const float scale = s.cosine ? HeadScale(s, w, logit_scale) : s.scale;
    for (int64_t i = 0; i < w.d; ++i) dq[i] *= scale;
    if (s.cosine) NormalizeRowGrad(q_hat, q_norm, w.d, dq);
    for (int64_t i = 0; i < w.d; ++i) {
      T* out = &dx[At(s, w, 3 * s.channels, w.q0 + i, w.t)];
      Store(out, add ? Load(*out) + dq[i] : dq[i]);
    }
  }
}

// A thread per key: dK = dS^T (Q d^-1/2) and dV = P^T dO over the queries
// in order; with cosine attention dK^ = head_scale dS^T Q^ taken back
// through the normalization.
template <typename T>
__global__ void WindowAttentionKeyGrad(WindowAttentionShape s, const T* x, const T* dy,
                                       const float* saved, const float* logit_scale,
                                       const float* rows, T* dx, bool add) {
  const int64_t tokens = s.grid.tokens(), c3 = 3 * s.channels;
  SPILL_GRID_LOOP(index, s.images * s.grid.windows() * s.heads * tokens) {
    const WindowToken w = TokenOf(s, index);  // w.t: the key
    const float* p = UnitProbabilities(s, saved, w.unit);
    float q_hat[kMaxAttentionDepth], k_hat[kMaxAttentionDepth];
    const float k_norm = s.cosine ? NormalizedRow(s, w, x, w.k0, w.t, k_hat) : 0.0f;
    float dk[kMaxAttentionDepth], dv[kMaxAttentionDepth];
    for (int64_t i = 0; i < w.d; ++i) dk[i] = dv[i] = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      const float pt = p[t * tokens + w.t];
      const float ds = pt * (DotOutputGrad(s, w, x, dy, t, w.t) - rows[w.unit * tokens + t]);
      if (s.cosine) NormalizedRow(s, w, x, w.q0, t, q_hat);
      for (int64_t i = 0; i < w.d; ++i) {
        dk[i] += ds * (s.cosine ? q_hat[i] : Load(x[At(s, w, c3, w.q0 + i, t)]) * s.scale);
        dv[i] += pt * Load(dy[At(s, w, s.channels, w.q0 + i, t)]);
      }
    }
    if (s.cosine) {
      const float scale = HeadScale(s, w, logit_scale);
      for (int64_t i = 0; i < w.d; ++i) dk[i] *= scale;
      NormalizeRowGrad(k_hat, k_norm, w.d, dk);
    }
    for (int64_t i = 0; i < w.d; ++i) {
      T* k = &dx[At(s, w, c3, w.k0 + i, w.t)];
      T* v = &dx[At(s, w, c3, w.v0 + i, w.t)];
      Store(k, add ? Load(*k) + dk[i] : dk[i]);
      Store(v, add ? Load(*v) + dv[i] : dv[i]);
    }
  }
}

// A thread per table entry (r, head): each unit of the head adds its sum of
// dS over the pairs (t, u) of row r, t ascending (for each t at most one u).
template <typename T>
__global__ void WindowAttentionTableGrad(WindowAttentionShape s, const T* x, const T* dy,
                                         const float* saved, const float* rows, float* dtable) {
  const int64_t w = s.grid.window, tokens = s.grid.tokens(), side = 2 * w - 1;
  SPILL_GRID_LOOP(entry, s.grid.table_rows() * s.heads) {
    const int64_t r = entry / s.heads, head = entry % s.heads;
    const int64_t dr = r / side - (w - 1), dc = r % side - (w - 1);  // r_t - r_u, c_t - c_u
    float sum = dtable[entry];
    for (int64_t pair = 0; pair < s.images * s.grid.windows(); ++pair) {
      const int64_t unit = pair * s.heads + head;
      const WindowToken at = TokenOf(s, unit * tokens);
      const float* p = UnitProbabilities(s, saved, unit);
      float part = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t ru = t / w - dr, cu = t % w - dc;
        if (ru < 0 || ru >= w || cu < 0 || cu >= w) continue;
        const int64_t u = ru * w + cu;
        const float dp = DotOutputGrad(s, at, x, dy, t, u);
        part += p[t * tokens + u] * (dp - rows[unit * tokens + t]);
      }
      sum += part;
    }
    dtable[entry] = sum;
  }
}

// A thread per head: each unit of the head adds head_scale times its sum of
// dS cos (the rows' sums in `cosines`, t ascending), unit by unit in order
// - where the clamp passes the gradient.
__global__ void WindowAttentionLogitScaleGrad(WindowAttentionShape s, const float* logit_scale,
                                              const float* cosines, float* dlogit) {
  const int64_t tokens = s.grid.tokens();
  SPILL_GRID_LOOP(head, s.heads) {
    if (!CosineScaleLearns(logit_scale[head])) continue;
    const float scale = CosineScale(logit_scale[head]);
    float sum = dlogit[head];
    for (int64_t pair = 0; pair < s.images * s.grid.windows(); ++pair) {
      const float* row = cosines + (pair * s.heads + head) * tokens;
      float part = 0;
      for (int64_t t = 0; t < tokens; ++t) part += row[t];
      sum += scale * part;
    }
    dlogit[head] = sum;
  }
}

}  // namespace

void LaunchWindowAttentionForward(Stored stored, const WindowAttentionShape& s, const void* x,
                                  const float* table, const float* logit_scale, void* y,
                                  float* saved, cudaStream_t stream) {
  const int64_t total = s.images * s.grid.windows() * s.heads * s.grid.tokens();
  if (total <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    WindowAttentionForward<<<Blocks(total), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), table, logit_scale, static_cast<T*>(y), saved);
  });
}

void LaunchWindowAttentionBackward(Stored stored, const WindowAttentionShape& s, const void* x,
                                   const void* dy, const float* saved, const float* logit_scale,
                                   float* rows, void* dx, bool add, float* dtable, float* dlogit,
                                   cudaStream_t stream) {
  const int64_t total = s.images * s.grid.windows() * s.heads * s.grid.tokens();
  if (total <= 0) return;
  float* cosines = s.cosine && dlogit != nullptr ? rows + total : nullptr;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    T* dxt = static_cast<T*>(dx);
    WindowAttentionQueryGrad<<<Blocks(total), kThreads, 0, stream>>>(s, xt, dyt, saved, logit_scale,
                                                                     rows, cosines, dxt, add);
    if (dxt != nullptr) {
      WindowAttentionKeyGrad<<<Blocks(total), kThreads, 0, stream>>>(s, xt, dyt, saved, logit_scale,
                                                                     rows, dxt, add);
    }
    if (cosines != nullptr) {
      WindowAttentionLogitScaleGrad<<<Blocks(s.heads), kThreads, 0, stream>>>(s, logit_scale,
                                                                              cosines, dlogit);
    }
    if (dtable != nullptr) {
      const int64_t entries = s.grid.table_rows() * s.heads;
      WindowAttentionTableGrad<<<Blocks(entries), kThreads, 0, stream>>>(s, xt, dyt, saved, rows,
                                                                         dtable);
    }
  });
}

}  // namespace cuda
}  // namespace spill
