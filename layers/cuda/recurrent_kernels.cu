// The kernels of lstm and gru on the GPU. See recurrent_kernels_cuda.h:
// every output element is computed by one thread, so results never depend
// on scheduling; the cells' formulas are the CPU's (layers/recurrent_math.h).
#include <math.h>

#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/cuda/recurrent_kernels_cuda.h"
#include "layers/recurrent_math.h"

namespace spill {
namespace cuda {
namespace {

// One thread per element of rows (n*t x c): coalesced writes.
__global__ void SequenceToRows(int64_t n, int64_t c, int64_t t, const float* x, float* rows) {
  const int64_t per_image = t * c;
  SPILL_GRID_LOOP(k, n * per_image) {
    const int64_t i = k / per_image, r = k - i * per_image;
    const int64_t s = r / c, ch = r - s * c;
    rows[k] = x[(i * c + ch) * t + s];
  }
}

// One thread per element of x (n x c x t): coalesced writes.
__global__ void RowsToSequence(int64_t n, int64_t c, int64_t t, const float* rows,
                               int64_t image_stride, float* x, bool accumulate) {
  const int64_t per_image = c * t;
  SPILL_GRID_LOOP(k, n * per_image) {
    const int64_t i = k / per_image, r = k - i * per_image;
    const int64_t ch = r / t, s = r - ch * t;
    const float v = rows[i * image_stride + s * c + ch];
    x[k] = accumulate ? x[k] + v : v;
  }
}

// One thread per (image, unit). The gate values go through registers (the
// formulas' stride 1) and the saved values are written over the gate slots,
// as the CPU's cell writes them in place.
template <bool kLstm>
__global__ void ForwardStep(RecurrentStepShape s, float* reserve, const float* recurrent,
                            const float* b_ih, const float* b_hh) {
  constexpr int kGates = kLstm ? 4 : 3;
  constexpr int kSaved = kGates + 1;
  const int64_t h = s.hidden, gh = kGates * h, sw = gh + h, width = s.directions * h;
  SPILL_GRID_LOOP(k, s.images * h) {
    const int64_t i = k / h, j = k - i * h;
    float* image = reserve + i * s.reserve_stride;
    float* saved = image + s.gates_at + s.t * sw + j;
    const float* hh = recurrent + i * gh + j;
    float x[kGates], r[kGates], out[kSaved];
#pragma unroll
    for (int g = 0; g < kGates; ++g) {
      const float xv = saved[g * h];
      x[g] = b_ih != nullptr ? xv + b_ih[g * h + j] : xv;
      if (!s.has_prev) {  // h_prev = 0: the recurrent product is its bias
        r[g] = b_hh != nullptr ? b_hh[g * h + j] : 0.0f;
      } else {
        const float hv = hh[g * h];
        r[g] = b_hh != nullptr ? hv + b_hh[g * h + j] : hv;
      }
    }
    float* state = image + s.hidden_at + j;  // the unit's hidden state at step 0
    float y;
    if (kLstm) {
      const float c_prev = s.has_prev ? image[s.gates_at + s.prev * sw + 4 * h + j] : 0.0f;
      y = LstmForward(x, r, 1, c_prev, out);
    } else {
      const float h_prev = s.has_prev ? state[s.prev * width] : 0.0f;
      y = GruForward(x, r, 1, h_prev, out);
    }
#pragma unroll
    for (int g = 0; g < kSaved; ++g) saved[g * h] = out[g];
    state[s.t * width] = y;
  }
}

// One thread per (image, unit): reads and writes only its own dh and dc.
template <bool kLstm>
__global__ void BackwardStep(RecurrentStepShape s, const float* reserve, const float* above,
                             float* dh, float* dc, float* gate_grads, float* recurrent_grads) {
  constexpr int kGates = kLstm ? 4 : 3;
  const int64_t h = s.hidden, gh = kGates * h, sw = gh + h, width = s.directions * h;
  SPILL_GRID_LOOP(k, s.images * h) {
    const int64_t i = k / h, j = k - i * h;
    const float* image = reserve + i * s.reserve_stride;
    const float* saved = image + s.gates_at + s.t * sw + j;
    const int64_t row = i * s.steps + s.t;
    float* dg = gate_grads + row * gh + j;
    const float grad = above[row * width + s.direction * h + j] + (s.carried ? dh[k] : 0.0f);
    if (kLstm) {
      const float c_prev = s.has_prev ? image[s.gates_at + s.prev * sw + 4 * h + j] : 0.0f;
      float cell = s.carried ? dc[k] : 0.0f;
      LstmBackward(saved, static_cast<int>(h), c_prev, grad, &cell, dg);
      dc[k] = cell;
    } else {
      const float h_prev = s.has_prev ? image[s.hidden_at + s.prev * width + j] : 0.0f;
      dh[k] =
          GruBackward(saved, static_cast<int>(h), h_prev, grad, dg, recurrent_grads + row * gh + j);
    }
  }
}

// One thread per (image, element of the layer's hidden states).
__global__ void Dropout(RecurrentDropoutShape s, float* reserve) {
  SPILL_GRID_LOOP(k, s.images * s.count) {
    const int64_t i = k / s.count, e = k - i * s.count;
    float* image = reserve + i * s.reserve_stride;
    if (s.draw) {
      const int64_t first = ((s.first_image + i) * s.layers + s.layer) * s.count;
      image[s.mask_at + e] =
          UniformAt(s.seed, static_cast<uint64_t>(first) + static_cast<uint64_t>(e)) < s.ratio
              ? 0.0f
              : s.keep;
    }
    image[s.masked_at + e] = image[s.hidden_at + e] * image[s.mask_at + e];
  }
}

__global__ void Unmask(int64_t images, int64_t count, const float* reserve, int64_t reserve_stride,
                       int64_t mask_at, float* grads) {
  SPILL_GRID_LOOP(k, images * count) {
    const int64_t i = k / count, e = k - i * count;
    grads[k] *= reserve[i * reserve_stride + mask_at + e];
  }
}

}  // namespace

void LaunchSequenceToRows(int64_t n, int64_t c, int64_t t, const float* x, float* rows,
                          cudaStream_t stream) {
  const int64_t total = n * c * t;
  if (total <= 0) return;
  SequenceToRows<<<Blocks(total), kThreads, 0, stream>>>(n, c, t, x, rows);
}

void LaunchRowsToSequence(int64_t n, int64_t c, int64_t t, const float* rows, int64_t image_stride,
                          float* x, bool accumulate, cudaStream_t stream) {
  const int64_t total = n * c * t;
  if (total <= 0) return;
  RowsToSequence<<<Blocks(total), kThreads, 0, stream>>>(n, c, t, rows, image_stride, x,
                                                         accumulate);
}

void LaunchRecurrentForwardStep(const RecurrentStepShape& s, float* reserve, const float* recurrent,
                                const float* b_ih, const float* b_hh, cudaStream_t stream) {
  const int64_t total = s.images * s.hidden;
  if (total <= 0) return;
  if (s.lstm) {
    ForwardStep<true><<<Blocks(total), kThreads, 0, stream>>>(s, reserve, recurrent, b_ih, b_hh);
  } else {
    ForwardStep<false><<<Blocks(total), kThreads, 0, stream>>>(s, reserve, recurrent, b_ih, b_hh);
  }
}

void LaunchRecurrentBackwardStep(const RecurrentStepShape& s, const float* reserve,
                                 const float* above, float* dh, float* dc, float* gate_grads,
                                 float* recurrent_grads, cudaStream_t stream) {
  const int64_t total = s.images * s.hidden;
  if (total <= 0) return;
  if (s.lstm) {
    BackwardStep<true><<<Blocks(total), kThreads, 0, stream>>>(s, reserve, above, dh, dc,
                                                               gate_grads, recurrent_grads);
  } else {
    BackwardStep<false><<<Blocks(total), kThreads, 0, stream>>>(s, reserve, above, dh, dc,
                                                                gate_grads, recurrent_grads);
  }
}

void LaunchRecurrentDropout(const RecurrentDropoutShape& s, float* reserve, cudaStream_t stream) {
  const int64_t total = s.images * s.count;
  if (total <= 0) return;
  Dropout<<<Blocks(total), kThreads, 0, stream>>>(s, reserve);
}

void LaunchRecurrentUnmask(int64_t images, int64_t count, const float* reserve,
                           int64_t reserve_stride, int64_t mask_at, float* grads,
                           cudaStream_t stream) {
  const int64_t total = images * count;
  if (total <= 0) return;
  Unmask<<<Blocks(total), kThreads, 0, stream>>>(images, count, reserve, reserve_stride, mask_at,
                                                 grads);
}

}  // namespace cuda
}  // namespace spill
