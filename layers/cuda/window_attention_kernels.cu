// window_attention's kernels. See window_attention_kernels_cuda.h; the
// arithmetic follows layers/cpu/window_attention_cpu.cc step for step.
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

// S[t][u] = (q_t d^-1/2) . k_u + bias + mask.
__device__ inline float Score(const WindowAttentionShape& s, const WindowToken& w, const float* x,
                              const float* table, int64_t t, int64_t u) {
  const int64_t c3 = 3 * s.channels;
  float dot = 0;
  for (int64_t i = 0; i < w.d; ++i) {
    dot += x[At(s, w, c3, w.q0 + i, t)] * s.scale * x[At(s, w, c3, w.k0 + i, u)];
  }
  const float bias = table[RelativeIndex(s.grid.window, t, u) * s.heads + w.head];
  return dot + bias + WindowMask(s.grid, w.window, t, u);
}

// dP[t][u] = dO_t . v_u.
__device__ inline float DotOutputGrad(const WindowAttentionShape& s, const WindowToken& w,
                                      const float* x, const float* dy, int64_t t, int64_t u) {
  float dot = 0;
  for (int64_t i = 0; i < w.d; ++i) {
    dot += dy[At(s, w, s.channels, w.q0 + i, t)] * x[At(s, w, 3 * s.channels, w.v0 + i, u)];
  }
  return dot;
}

__device__ inline const float* UnitProbabilities(const WindowAttentionShape& s, const float* saved,
                                                 int64_t unit) {
  return saved + unit * s.grid.tokens() * s.grid.tokens();
}

__global__ void WindowAttentionForward(WindowAttentionShape s, const float* x, const float* table,
                                       float* y, float* saved) {
  const int64_t tokens = s.grid.tokens();
  SPILL_GRID_LOOP(index, s.images * s.grid.windows() * s.heads * tokens) {
    const WindowToken w = TokenOf(s, index);
    float max = -INFINITY;
    for (int64_t u = 0; u < tokens; ++u) max = fmaxf(max, Score(s, w, x, table, w.t, u));
    float sum = 0;
    for (int64_t u = 0; u < tokens; ++u) sum += expf(Score(s, w, x, table, w.t, u) - max);
    float o[kMaxAttentionDepth];
    for (int64_t i = 0; i < w.d; ++i) o[i] = 0;
    float* row = saved + index * tokens;
    for (int64_t u = 0; u < tokens; ++u) {
      const float p = expf(Score(s, w, x, table, w.t, u) - max) / sum;
      row[u] = p;
      for (int64_t i = 0; i < w.d; ++i) o[i] += p * x[At(s, w, 3 * s.channels, w.v0 + i, u)];
    }
    for (int64_t i = 0; i < w.d; ++i) y[At(s, w, s.channels, w.q0 + i, w.t)] = o[i];
  }
}

// A thread per query: D = sum(P dP) into rows, then dQ = d^-1/2 dS K.
__global__ void WindowAttentionQueryGrad(WindowAttentionShape s, const float* x, const float* dy,
                                         const float* saved, float* rows, float* dx, bool add) {
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
    if (dx == nullptr) continue;
    float dq[kMaxAttentionDepth];
    for (int64_t i = 0; i < w.d; ++i) dq[i] = 0;
    for (int64_t u = 0; u < tokens; ++u) {
      const float ds = p[u] * (DotOutputGrad(s, w, x, dy, w.t, u) - mean);
      for (int64_t i = 0; i < w.d; ++i) dq[i] += ds * x[At(s, w, 3 * s.channels, w.k0 + i, u)];
    }
    for (int64_t i = 0; i < w.d; ++i) {
      float& out = dx[At(s, w, 3 * s.channels, w.q0 + i, w.t)];
      out = add ? out + dq[i] * s.scale : dq[i] * s.scale;
    }
  }
}

// A thread per key: dK = dS^T (Q d^-1/2) and dV = P^T dO over the queries in order.
__global__ void WindowAttentionKeyGrad(WindowAttentionShape s, const float* x, const float* dy,
                                       const float* saved, const float* rows, float* dx, bool add) {
  const int64_t tokens = s.grid.tokens(), c3 = 3 * s.channels;
  SPILL_GRID_LOOP(index, s.images * s.grid.windows() * s.heads * tokens) {
    const WindowToken w = TokenOf(s, index);  // w.t: the key
    const float* p = UnitProbabilities(s, saved, w.unit);
    float dk[kMaxAttentionDepth], dv[kMaxAttentionDepth];
    for (int64_t i = 0; i < w.d; ++i) dk[i] = dv[i] = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      const float pt = p[t * tokens + w.t];
      const float ds = pt * (DotOutputGrad(s, w, x, dy, t, w.t) - rows[w.unit * tokens + t]);
      for (int64_t i = 0; i < w.d; ++i) {
        dk[i] += ds * (x[At(s, w, c3, w.q0 + i, t)] * s.scale);
        dv[i] += pt * dy[At(s, w, s.channels, w.q0 + i, t)];
      }
    }
    for (int64_t i = 0; i < w.d; ++i) {
      float& k = dx[At(s, w, c3, w.k0 + i, w.t)];
      float& v = dx[At(s, w, c3, w.v0 + i, w.t)];
      k = add ? k + dk[i] : dk[i];
      v = add ? v + dv[i] : dv[i];
    }
  }
}

// A thread per table entry (r, head): each unit of the head adds its sum of
// dS over the pairs (t, u) of row r, t ascending (for each t at most one u).
__global__ void WindowAttentionTableGrad(WindowAttentionShape s, const float* x, const float* dy,
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

}  // namespace

void LaunchWindowAttentionForward(const WindowAttentionShape& s, const float* x, const float* table,
                                  float* y, float* saved, cudaStream_t stream) {
  const int64_t total = s.images * s.grid.windows() * s.heads * s.grid.tokens();
  if (total <= 0) return;
  WindowAttentionForward<<<Blocks(total), kThreads, 0, stream>>>(s, x, table, y, saved);
}

void LaunchWindowAttentionBackward(const WindowAttentionShape& s, const float* x, const float* dy,
                                   const float* saved, float* rows, float* dx, bool add,
                                   float* dtable, cudaStream_t stream) {
  const int64_t total = s.images * s.grid.windows() * s.heads * s.grid.tokens();
  if (total <= 0) return;
  WindowAttentionQueryGrad<<<Blocks(total), kThreads, 0, stream>>>(s, x, dy, saved, rows, dx, add);
  if (dx != nullptr) {
    WindowAttentionKeyGrad<<<Blocks(total), kThreads, 0, stream>>>(s, x, dy, saved, rows, dx, add);
  }
  if (dtable != nullptr) {
    const int64_t entries = s.grid.table_rows() * s.heads;
    WindowAttentionTableGrad<<<Blocks(entries), kThreads, 0, stream>>>(s, x, dy, saved, rows,
                                                                       dtable);
  }
}

}  // namespace cuda
}  // namespace spill
