// The CUDA layers' own kernels. See layer_kernels_cuda.h: every output
// element is computed by one thread, or reduced by one block in a fixed tree,
// so results never depend on scheduling.
#include <math.h>

#include <algorithm>
#include <cfloat>

#include "layers/cuda/kernel_util_cuda.cuh"
#include "layers/cuda/layer_kernels_cuda.h"

namespace spill {
namespace cuda {
namespace {

// ---- Elementwise ----

template <typename T>
__global__ void ReluForward(int64_t n, const T* x, T* y, float slope) {
  SPILL_GRID_LOOP(i, n) {
    const float v = Load(x[i]);
    Store(&y[i], v > 0 ? v : v * slope);
  }
}

template <typename T>
__global__ void ReluBackward(int64_t n, const T* y, const T* dy, T* dx, float slope,
                             bool accumulate) {
  SPILL_GRID_LOOP(i, n) {
    const float d = Load(dy[i]);
    const float g = Load(y[i]) > 0 ? d : d * slope;
    Store(&dx[i], accumulate ? Load(dx[i]) + g : g);
  }
}

__global__ void Axpy(int64_t n, float alpha, const float* x, float* y) {
  SPILL_GRID_LOOP(i, n) { y[i] += alpha * x[i]; }
}

template <typename T>
__global__ void CopyOrAdd2d(int64_t rows, int64_t cols, const T* src, int64_t src_stride, T* dst,
                            int64_t dst_stride, bool accumulate) {
  SPILL_GRID_LOOP(i, rows * cols) {
    const int64_t r = i / cols, j = i - r * cols;
    T* out = dst + r * dst_stride + j;
    if (accumulate) {
      Store(out, Load(*out) + Load(src[r * src_stride + j]));
    } else {
      *out = src[r * src_stride + j];  // a copy: the same bits in any type
    }
  }
}

struct AddInputs {
  const void* p[kMaxAddInputs];
};

template <typename T>
__device__ __forceinline__ float InputAt(const AddInputs& in, int k, int64_t i) {
  return Load(static_cast<const T*>(in.p[k])[i]);
}

// y = in[0] + ... (first pass) or y += in[0] + ... (later passes), left to
// right: the same association as the CPU's y = x0; y += x1; y += x2; ...
template <typename T>
__global__ void AddChunk(int64_t n, AddInputs in, int count, T* y, bool first) {
  SPILL_GRID_LOOP(i, n) {
    float v = first ? InputAt<T>(in, 0, i) : Load(y[i]) + InputAt<T>(in, 0, i);
    for (int k = 1; k < count; ++k) v += InputAt<T>(in, k, i);
    Store(&y[i], v);
  }
}

template <typename T>
__global__ void WeightedAdd(int64_t n, float weight, AddInputs in, int count, T* y) {
  SPILL_GRID_LOOP(i, n) {
    float v = 0.0f + weight * InputAt<T>(in, 0, i);
    for (int k = 1; k < count; ++k) v += InputAt<T>(in, k, i);
    Store(&y[i], v);
  }
}

template <typename T>
__global__ void DropoutForward(int64_t n, const T* x, T* y, float* mask, uint64_t seed,
                               int64_t first, float ratio, float keep, bool draw) {
  SPILL_GRID_LOOP(i, n) {
    float m;
    if (draw) {
      m = UniformAt(seed, static_cast<uint64_t>(first + i)) < ratio ? 0.0f : keep;
      mask[i] = m;
    } else {
      m = mask[i];
    }
    Store(&y[i], Load(x[i]) * m);
  }
}

template <typename T>
__global__ void MulBackward(int64_t n, const T* dy, const float* mask, T* dx, bool accumulate) {
  SPILL_GRID_LOOP(i, n) {
    const float g = Load(dy[i]) * mask[i];
    Store(&dx[i], accumulate ? Load(dx[i]) + g : g);
  }
}

// ---- Fully connected helpers ----

template <typename T>
__global__ void AddRowBias(int64_t rows, int64_t cols, const float* b, T* y) {
  SPILL_GRID_LOOP(i, rows * cols) { Store(&y[i], Load(y[i]) + b[i % cols]); }
}

template <typename T>
__global__ void ColumnSums(int64_t rows, int64_t cols, const T* dy, float* db) {
  SPILL_GRID_LOOP(j, cols) {
    double sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += Load(dy[i * cols + j]);
    db[j] = static_cast<float>(sum);
  }
}

// db[j] (=|+=) the column's values, row after row, in float: a call over
// a slice continues the sum where the previous slice's left it.
template <typename T>
__global__ void ColumnSumsInOrder(int64_t rows, int64_t cols, const T* dy, float* db,
                                  bool accumulate) {
  SPILL_GRID_LOOP(j, cols) {
    float sum = accumulate ? db[j] : 0.0f;
    for (int64_t i = 0; i < rows; ++i) sum += Load(dy[i * cols + j]);
    db[j] = sum;
  }
}

// ---- Pooling ----

// The window of output o along one axis, as PoolGeometry::Window computes it:
// [begin, end) clipped to the input, and the divisor's factor.
struct AxisWindow {
  int64_t begin, end, span;
};

__device__ __forceinline__ AxisWindow Window(int64_t o, int64_t in, int64_t kernel, int64_t stride,
                                             int64_t pad, bool count_pad) {
  const int64_t s = o * stride - pad;
  const int64_t e = min(s + kernel, in + pad);
  AxisWindow w;
  w.begin = max(s, static_cast<int64_t>(0));
  w.end = min(e, in);
  w.span = count_pad ? e - s : w.end - w.begin;
  return w;
}

// The outputs whose windows cover input position h along one axis:
// o * stride - pad <= h < o * stride - pad + kernel.
__device__ __forceinline__ void Covering(int64_t h, int64_t out, int64_t kernel, int64_t stride,
                                         int64_t pad, int64_t* lo, int64_t* hi) {
  const int64_t t = h + pad - kernel;
  *lo = t < 0 ? 0 : t / stride + 1;
  *hi = min((h + pad) / stride, out - 1);
}

// The window of forward output i: its rows and columns, and the plane it
// reads.
struct OutputWindow {
  AxisWindow r, c;
  int64_t plane;
};

__device__ __forceinline__ OutputWindow WindowOf(const PoolShape& s, int64_t i) {
  const int64_t ow = i % s.out_width, t = i / s.out_width;
  const int64_t oh = t % s.out_height, p = t / s.out_height;
  return {Window(oh, s.height, s.kernel_h, s.stride_h, s.pad_h, s.count_include_pad),
          Window(ow, s.width, s.kernel_w, s.stride_w, s.pad_w, s.count_include_pad), p};
}

template <typename T>
__global__ void MaxPoolForward(PoolShape s, const T* x, T* y) {
  SPILL_GRID_LOOP(i, s.planes * s.out_height * s.out_width) {
    const OutputWindow win = WindowOf(s, i);
    const AxisWindow &r = win.r, &c = win.c;
    const T* in = x + win.plane * s.height * s.width;
    float v = -FLT_MAX;
    for (int64_t h = r.begin; h < r.end; ++h) {
      for (int64_t w = c.begin; w < c.end; ++w) v = MaxOf(v, Load(in[h * s.width + w]));
    }
    Store(&y[i], v);
  }
}

template <typename T>
__global__ void AvgPoolForward(PoolShape s, const T* x, T* y) {
  SPILL_GRID_LOOP(i, s.planes * s.out_height * s.out_width) {
    const OutputWindow win = WindowOf(s, i);
    const AxisWindow &r = win.r, &c = win.c;
    const T* in = x + win.plane * s.height * s.width;
    float v = 0.0f;
    for (int64_t h = r.begin; h < r.end; ++h) {
      for (int64_t w = c.begin; w < c.end; ++w) v = v + Load(in[h * s.width + w]);
    }
    Store(&y[i], v / static_cast<float>(r.span * c.span));
  }
}

template <typename T>
__global__ void MaxPoolBackward(PoolShape s, const T* x, const T* y, const T* dy, T* dx,
                                bool accumulate) {
  SPILL_GRID_LOOP(i, s.planes * s.height * s.width) {
    const int64_t w = i % s.width, t = i / s.width;
    const int64_t h = t % s.height, p = t / s.height;
    const T* in = x + p * s.height * s.width;
    const float value = Load(x[i]);
    float acc = accumulate ? Load(dx[i]) : 0.0f;
    int64_t oh0, oh1, ow0, ow1;
    Covering(h, s.out_height, s.kernel_h, s.stride_h, s.pad_h, &oh0, &oh1);
    Covering(w, s.out_width, s.kernel_w, s.stride_w, s.pad_w, &ow0, &ow1);
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = (p * s.out_height + oh) * s.out_width + ow;
        const float top = Load(y[o]);
        if (!(value == top)) continue;
        const AxisWindow r = Window(oh, s.height, s.kernel_h, s.stride_h, s.pad_h, true);
        const AxisWindow c = Window(ow, s.width, s.kernel_w, s.stride_w, s.pad_w, true);
        if (h < r.begin || h >= r.end || w < c.begin || w >= c.end) continue;
        // The window's gradient goes to the first position holding its maximum.
        int64_t first = -1;
        for (int64_t hh = r.begin; hh < r.end && first < 0; ++hh) {
          for (int64_t ww = c.begin; ww < c.end; ++ww) {
            if (Load(in[hh * s.width + ww]) == top) {
              first = hh * s.width + ww;
              break;
            }
          }
        }
        if (first == h * s.width + w) acc += Load(dy[o]);
      }
    }
    Store(&dx[i], acc);
  }
}

template <typename T>
__global__ void AvgPoolBackward(PoolShape s, const T* dy, T* dx, bool accumulate) {
  SPILL_GRID_LOOP(i, s.planes * s.height * s.width) {
    const int64_t w = i % s.width, t = i / s.width;
    const int64_t h = t % s.height, p = t / s.height;
    float acc = accumulate ? Load(dx[i]) : 0.0f;
    int64_t oh0, oh1, ow0, ow1;
    Covering(h, s.out_height, s.kernel_h, s.stride_h, s.pad_h, &oh0, &oh1);
    Covering(w, s.out_width, s.kernel_w, s.stride_w, s.pad_w, &ow0, &ow1);
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      const AxisWindow r =
          Window(oh, s.height, s.kernel_h, s.stride_h, s.pad_h, s.count_include_pad);
      if (h < r.begin || h >= r.end) continue;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const AxisWindow c =
            Window(ow, s.width, s.kernel_w, s.stride_w, s.pad_w, s.count_include_pad);
        if (w < c.begin || w >= c.end) continue;
        const int64_t o = (p * s.out_height + oh) * s.out_width + ow;
        acc += Load(dy[o]) / static_cast<float>(r.span * c.span);
      }
    }
    Store(&dx[i], acc);
  }
}

// ---- LRN ----

// k + alpha / size * sum of x^2 over the channels [ch - half, ch + half] of
// one pixel; `image` is the sample's first element, `pixel` the offset in
// the plane.
__device__ float LrnScale(const float* image, int64_t ch, int64_t c, int64_t plane, int64_t pixel,
                          int64_t half, double alpha_over_size, double k) {
  const int64_t lo = max(static_cast<int64_t>(0), ch - half), hi = min(c - 1, ch + half);
  double sum = 0;
  for (int64_t j = lo; j <= hi; ++j) {
    const double v = image[j * plane + pixel];
    sum += v * v;
  }
  return static_cast<float>(k + alpha_over_size * sum);
}

__global__ void LrnForward(int64_t n, int64_t c, int64_t plane, const float* x, float* y,
                           int64_t half, double alpha_over_size, float beta, double k) {
  SPILL_GRID_LOOP(i, n * c * plane) {
    const int64_t pixel = i % plane, t = i / plane;
    const int64_t ch = t % c, sample = t / c;
    const float scale =
        LrnScale(x + sample * c * plane, ch, c, plane, pixel, half, alpha_over_size, k);
    y[i] = x[i] * powf(scale, -beta);
  }
}

__global__ void LrnBackward(int64_t n, int64_t c, int64_t plane, const float* x, const float* y,
                            const float* dy, float* dx, int64_t half, double alpha_over_size,
                            float beta, double k, float coeff, bool accumulate) {
  SPILL_GRID_LOOP(i, n * c * plane) {
    const int64_t pixel = i % plane, t = i / plane;
    const int64_t ch = t % c, sample = t / c;
    const int64_t offset = sample * c * plane;
    const float* image = x + offset;
    double window = 0;  // sum over the window of dy * y / scale
    const int64_t lo = max(static_cast<int64_t>(0), ch - half), hi = min(c - 1, ch + half);
    for (int64_t j = lo; j <= hi; ++j) {
      const int64_t at = offset + j * plane + pixel;
      const float scale_j = LrnScale(image, j, c, plane, pixel, half, alpha_over_size, k);
      window += dy[at] * y[at] / scale_j;
    }
    const float scale = LrnScale(image, ch, c, plane, pixel, half, alpha_over_size, k);
    const float v = dy[i] * powf(scale, -beta) - coeff * x[i] * static_cast<float>(window);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

// ---- Softmax ----

// One block per row.
__global__ void SoftmaxForward(int64_t cols, const float* x, float* p) {
  __shared__ float top_shared[kThreads];
  __shared__ double sum_shared[kThreads];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* out = p + static_cast<int64_t>(blockIdx.x) * cols;
  float top = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) top = MaxOf(top, row[j]);
  top = BlockMax(top, top_shared);
  double sum = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += exp(static_cast<double>(row[j] - top));
  sum = BlockSum(sum, sum_shared);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    out[j] = static_cast<float>(exp(static_cast<double>(row[j] - top)) / sum);
  }
}

__global__ void SoftmaxLossBackward(int64_t rows, int64_t cols, const float* p, const float* labels,
                                    int64_t ignored, float scale, float* dx, bool accumulate) {
  SPILL_GRID_LOOP(i, rows * cols) {
    const int64_t r = i / cols, j = i - r * cols;
    const int64_t label = static_cast<int64_t>(labels[r]);
    const float g = label == ignored ? 0.0f : (p[i] - (j == label ? 1.0f : 0.0f)) * scale;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

}  // namespace

void LaunchReluForward(Stored stored, int64_t n, const void* x, void* y, float slope,
                       cudaStream_t stream) {
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ReluForward<<<Blocks(n), kThreads, 0, stream>>>(n, static_cast<const T*>(x), static_cast<T*>(y),
                                                    slope);
  });
}

void LaunchReluForward(int64_t n, const float* x, float* y, float slope, cudaStream_t stream) {
  LaunchReluForward(Stored::kF32, n, x, y, slope, stream);
}

void LaunchReluBackward(Stored stored, int64_t n, const void* y, const void* dy, void* dx,
                        float slope, bool accumulate, cudaStream_t stream) {
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ReluBackward<<<Blocks(n), kThreads, 0, stream>>>(n, static_cast<const T*>(y),
                                                     static_cast<const T*>(dy), static_cast<T*>(dx),
                                                     slope, accumulate);
  });
}

void LaunchCopyOrAdd2d(Stored stored, int64_t rows, int64_t cols, const void* src,
                       int64_t src_stride, void* dst, int64_t dst_stride, bool accumulate,
                       cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    CopyOrAdd2d<<<Blocks(rows * cols), kThreads, 0, stream>>>(
        rows, cols, static_cast<const T*>(src), src_stride, static_cast<T*>(dst), dst_stride,
        accumulate);
  });
}

void LaunchCopyOrAdd2d(int64_t rows, int64_t cols, const float* src, int64_t src_stride, float* dst,
                       int64_t dst_stride, bool accumulate, cudaStream_t stream) {
  LaunchCopyOrAdd2d(Stored::kF32, rows, cols, src, src_stride, dst, dst_stride, accumulate, stream);
}

void LaunchAddN(Stored stored, int64_t n, const void* const* inputs, int count, void* y,
                cudaStream_t stream) {
  if (n <= 0 || count <= 0) return;
  for (int done = 0; done < count; done += kMaxAddInputs) {
    AddInputs chunk = {};
    const int m = std::min(kMaxAddInputs, count - done);
    for (int k = 0; k < m; ++k) chunk.p[k] = inputs[done + k];
    ForStored(stored, [&](auto element) {
      using T = decltype(element);
      AddChunk<<<Blocks(n), kThreads, 0, stream>>>(n, chunk, m, static_cast<T*>(y), done == 0);
    });
  }
}

void LaunchWeightedAdd(Stored stored, int64_t n, float weight, const void* const* inputs, int count,
                       void* y, cudaStream_t stream) {
  if (n <= 0 || count <= 0) return;
  AddInputs in = {};
  for (int k = 0; k < count && k < kMaxAddInputs; ++k) in.p[k] = inputs[k];
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    WeightedAdd<<<Blocks(n), kThreads, 0, stream>>>(n, weight, in, std::min(count, kMaxAddInputs),
                                                    static_cast<T*>(y));
  });
}

void LaunchAxpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream) {
  if (n <= 0) return;
  Axpy<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, x, y);
}

void LaunchDropoutForward(Stored stored, int64_t n, const void* x, void* y, float* mask,
                          uint64_t seed, int64_t first, float ratio, float keep, bool draw,
                          cudaStream_t stream) {
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    DropoutForward<<<Blocks(n), kThreads, 0, stream>>>(
        n, static_cast<const T*>(x), static_cast<T*>(y), mask, seed, first, ratio, keep, draw);
  });
}

void LaunchMulBackward(Stored stored, int64_t n, const void* dy, const float* mask, void* dx,
                       bool accumulate, cudaStream_t stream) {
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    MulBackward<<<Blocks(n), kThreads, 0, stream>>>(n, static_cast<const T*>(dy), mask,
                                                    static_cast<T*>(dx), accumulate);
  });
}

void LaunchAddRowBias(Stored stored, int64_t rows, int64_t cols, const float* b, void* y,
                      cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    AddRowBias<<<Blocks(rows * cols), kThreads, 0, stream>>>(rows, cols, b, static_cast<T*>(y));
  });
}

void LaunchColumnSums(Stored stored, int64_t rows, int64_t cols, const void* dy, float* db,
                      cudaStream_t stream) {
  if (cols <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ColumnSums<<<Blocks(cols), kThreads, 0, stream>>>(rows, cols, static_cast<const T*>(dy), db);
  });
}

void LaunchColumnSumsInOrder(Stored stored, int64_t rows, int64_t cols, const void* dy, float* db,
                             bool accumulate, cudaStream_t stream) {
  if (cols <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    ColumnSumsInOrder<<<Blocks(cols), kThreads, 0, stream>>>(rows, cols, static_cast<const T*>(dy),
                                                             db, accumulate);
  });
}

void LaunchColumnSumsInOrder(int64_t rows, int64_t cols, const float* dy, float* db,
                             bool accumulate, cudaStream_t stream) {
  LaunchColumnSumsInOrder(Stored::kF32, rows, cols, dy, db, accumulate, stream);
}

void LaunchMaxPoolForward(Stored stored, const PoolShape& s, const void* x, void* y,
                          cudaStream_t stream) {
  const int64_t n = s.planes * s.out_height * s.out_width;
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    MaxPoolForward<<<Blocks(n), kThreads, 0, stream>>>(s, static_cast<const T*>(x),
                                                       static_cast<T*>(y));
  });
}

void LaunchAvgPoolForward(Stored stored, const PoolShape& s, const void* x, void* y,
                          cudaStream_t stream) {
  const int64_t n = s.planes * s.out_height * s.out_width;
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    AvgPoolForward<<<Blocks(n), kThreads, 0, stream>>>(s, static_cast<const T*>(x),
                                                       static_cast<T*>(y));
  });
}

void LaunchMaxPoolBackward(Stored stored, const PoolShape& s, const void* x, const void* y,
                           const void* dy, void* dx, bool accumulate, cudaStream_t stream) {
  const int64_t n = s.planes * s.height * s.width;
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    MaxPoolBackward<<<Blocks(n), kThreads, 0, stream>>>(
        s, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
        static_cast<T*>(dx), accumulate);
  });
}

void LaunchAvgPoolBackward(Stored stored, const PoolShape& s, const void* dy, void* dx,
                           bool accumulate, cudaStream_t stream) {
  const int64_t n = s.planes * s.height * s.width;
  if (n <= 0) return;
  ForStored(stored, [&](auto element) {
    using T = decltype(element);
    AvgPoolBackward<<<Blocks(n), kThreads, 0, stream>>>(s, static_cast<const T*>(dy),
                                                        static_cast<T*>(dx), accumulate);
  });
}

void LaunchLrnForward(int64_t n, int64_t c, int64_t plane, const float* x, float* y, int64_t size,
                      double alpha_over_size, float beta, double k, cudaStream_t stream) {
  const int64_t total = n * c * plane;
  if (total <= 0) return;
  LrnForward<<<Blocks(total), kThreads, 0, stream>>>(n, c, plane, x, y, (size - 1) / 2,
                                                     alpha_over_size, beta, k);
}

void LaunchLrnBackward(int64_t n, int64_t c, int64_t plane, const float* x, const float* y,
                       const float* dy, float* dx, int64_t size, double alpha_over_size, float beta,
                       double k, float coeff, bool accumulate, cudaStream_t stream) {
  const int64_t total = n * c * plane;
  if (total <= 0) return;
  LrnBackward<<<Blocks(total), kThreads, 0, stream>>>(n, c, plane, x, y, dy, dx, (size - 1) / 2,
                                                      alpha_over_size, beta, k, coeff, accumulate);
}

void LaunchSoftmaxForward(int64_t rows, int64_t cols, const float* x, float* p,
                          cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  SoftmaxForward<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(cols, x, p);
}

void LaunchSoftmaxLossBackward(int64_t rows, int64_t cols, const float* p, const float* labels,
                               int64_t ignored, float scale, float* dx, bool accumulate,
                               cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  SoftmaxLossBackward<<<Blocks(rows * cols), kThreads, 0, stream>>>(rows, cols, p, labels, ignored,
                                                                    scale, dx, accumulate);
}

}  // namespace cuda
}  // namespace spill
