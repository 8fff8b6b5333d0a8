// Launchers of the CUDA layers' own kernels (layer_kernels.cu). Each one
// enqueues its work on `stream` and launches nothing when there is nothing
// to do; callers check the launch with SPILL_CUDA_CHECK_LAUNCH().
//
// Arithmetic follows the CPU layers (layers/cpu/*_cpu.cc) operation by
// operation where that is cheap - the same accumulation orders for pooling
// and the same double-precision sums for BatchNorm, LRN windows and softmax -
// so results agree with the CPU closely, and every kernel is deterministic:
// each output element is computed by one thread (or reduced by one block in
// a fixed tree), never with atomics.
#ifndef SPILL_LAYERS_CUDA_LAYER_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_LAYER_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/cuda/stored_cuda.h"

namespace spill {
namespace cuda {

// ---- Elementwise ----

// y = x > 0 ? x : x * slope, every tensor stored as `stored`
// (stored_cuda.h; the float32 form below is kF32's).
void LaunchReluForward(Stored stored, int64_t n, const void* x, void* y, float slope,
                       cudaStream_t stream);
void LaunchReluForward(int64_t n, const float* x, float* y, float slope, cudaStream_t stream);
// dx (=|+=) y > 0 ? dy : dy * slope
void LaunchReluBackward(Stored stored, int64_t n, const void* y, const void* dy, void* dx,
                        float slope, bool accumulate, cudaStream_t stream);

// dst[r * dst_stride + j] (=|+=) src[r * src_stride + j] for r < rows, j < cols
// (strides in elements), both stored as `stored`.
void LaunchCopyOrAdd2d(Stored stored, int64_t rows, int64_t cols, const void* src,
                       int64_t src_stride, void* dst, int64_t dst_stride, bool accumulate,
                       cudaStream_t stream);
void LaunchCopyOrAdd2d(int64_t rows, int64_t cols, const float* src, int64_t src_stride, float* dst,
                       int64_t dst_stride, bool accumulate, cudaStream_t stream);

// Inputs one pass of LaunchAddN sums; more take several passes, each
// storing its partial sum in y - rounded in 16 bits, so the layers that sum
// 16-bit tensors as they are take at most this many.
constexpr int kMaxAddInputs = 8;

// y = x[0] + x[1] + ... + x[count - 1], summed left to right as the CPU does,
// every tensor stored as `stored`. `inputs` is a host array of `count`
// device pointers.
void LaunchAddN(Stored stored, int64_t n, const void* const* inputs, int count, void* y,
                cudaStream_t stream);

// y = (0 + weight * x[0]) + x[1] + ... left to right in float32, stored once
// (count <= kMaxAddInputs): a residual branch scaled by its survival, as
// the CPU adds it into float32.
void LaunchWeightedAdd(Stored stored, int64_t n, float weight, const void* const* inputs, int count,
                       void* y, cudaStream_t stream);

// y[i] += alpha * x[i] (a residual branch scaled by its survival, as the CPU).
void LaunchAxpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream);

// Dropout in training: when `draw`, mask[i] = Uniform(seed, first + i) <
// ratio ? 0 : keep (the CPU's counter-based generator, framework/base/random.h,
// bit for bit; `first` is the element's place in the whole batch when x is
// a slice of it); then y = x * mask. x, y, dy and dx stored as `stored`;
// the mask float32.
void LaunchDropoutForward(Stored stored, int64_t n, const void* x, void* y, float* mask,
                          uint64_t seed, int64_t first, float ratio, float keep, bool draw,
                          cudaStream_t stream);
// dx (=|+=) dy * mask
void LaunchMulBackward(Stored stored, int64_t n, const void* dy, const float* mask, void* dx,
                       bool accumulate, cudaStream_t stream);

// ---- Fully connected helpers ----

// y[i * cols + j] += b[j], y stored as `stored` (b float32).
void LaunchAddRowBias(Stored stored, int64_t rows, int64_t cols, const float* b, void* y,
                      cudaStream_t stream);
// db[j] = sum_i dy[i * cols + j], accumulated in double in row order.
void LaunchColumnSums(Stored stored, int64_t rows, int64_t cols, const void* dy, float* db,
                      cudaStream_t stream);
// db[j] (=|+=) dy[0][j] + dy[1][j] + ..., added row after row in float:
// slices of the rows, one call each, give the bits of one call over all.
void LaunchColumnSumsInOrder(Stored stored, int64_t rows, int64_t cols, const void* dy, float* db,
                             bool accumulate, cudaStream_t stream);
void LaunchColumnSumsInOrder(int64_t rows, int64_t cols, const float* dy, float* db,
                             bool accumulate, cudaStream_t stream);

// ---- Pooling (max, average, global average) ----

struct PoolShape {
  int64_t planes = 0;  // N * C
  int64_t height = 0, width = 0, out_height = 0, out_width = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  bool count_include_pad = true;
};

// x, y, dy and dx stored as `stored` (stored_cuda.h).
void LaunchMaxPoolForward(Stored stored, const PoolShape& s, const void* x, void* y,
                          cudaStream_t stream);
void LaunchAvgPoolForward(Stored stored, const PoolShape& s, const void* x, void* y,
                          cudaStream_t stream);
// Each input element gathers its gradient from the windows covering it, in
// the CPU's order; max pooling routes a window's gradient to the first
// position (row-major) holding the window's maximum.
void LaunchMaxPoolBackward(Stored stored, const PoolShape& s, const void* x, const void* y,
                           const void* dy, void* dx, bool accumulate, cudaStream_t stream);
void LaunchAvgPoolBackward(Stored stored, const PoolShape& s, const void* dy, void* dx,
                           bool accumulate, cudaStream_t stream);

// ---- BatchNorm (spatial: per channel over N, H, W) ----
// Reductions go image by image in batch order into per-channel double sums
// carried in `carry` (2 * c doubles, the layer's workspace), so a batch run
// slice by slice gives the bits of one call (layers/slice_plans.h). One
// block per channel; each image's plane is summed by one warp in a fixed
// order. x, y, dy and dx are stored as `stored` (stored_cuda.h); the
// statistics and parameters are float32.

// carry[ch] (=|+=) the sum of each image's channel plane; with `squares`,
// carry[c + ch] (=|+=) the squared deviations from carry[ch] / count.
// `start`: the carried sum starts at zero.
void LaunchBatchNormSums(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                         double* carry, bool start, bool squares, double count,
                         cudaStream_t stream);
// From finished sums: mean and 1 / sqrt(biased var + eps), and the running
// statistics updated with `momentum` (unbiased variance).
void LaunchBatchNormFinish(int64_t c, const double* carry, double count, double eps,
                           double momentum, float* mean, float* inv_std, float* running_mean,
                           float* running_var, cudaStream_t stream);
// Evaluation: mean = running_mean, inv_std = 1 / sqrt(running_var + eps).
void LaunchBatchNormFromRunning(int64_t c, const float* running_mean, const float* running_var,
                                double eps, float* mean, float* inv_std, cudaStream_t stream);
// y = (x - mean) * (gamma * inv_std) + beta
void LaunchBatchNormApply(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                          const float* gamma, const float* beta, const float* mean,
                          const float* inv_std, void* y, cudaStream_t stream);
// carry[ch] (=|+=) sum dy, carry[c + ch] (=|+=) sum dy * (x - mean).
void LaunchBatchNormGradientSums(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                                 const void* dy, const float* mean, double* carry, bool start,
                                 cudaStream_t stream);
// dgamma = carry[c + ch] * inv_std, dbeta = carry[ch] (either may be null).
void LaunchBatchNormParamGrads(int64_t c, const double* carry, const float* inv_std, float* dgamma,
                               float* dbeta, cudaStream_t stream);
// dx (=|+=) gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)).
void LaunchBatchNormInputGrad(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                              const void* dy, const float* gamma, const float* mean,
                              const float* inv_std, const double* carry, double count, void* dx,
                              bool accumulate, cudaStream_t stream);

// ---- LRN across channels ----

// scale = k + alpha_over_size * sum of x^2 over the window; y = x * scale^-beta
void LaunchLrnForward(int64_t n, int64_t c, int64_t plane, const float* x, float* y, int64_t size,
                      double alpha_over_size, float beta, double k, cudaStream_t stream);
// dx (=|+=) dy * scale^-beta - coeff * x * sum_window(dy * y / scale),
// coeff = 2 * alpha * beta / size.
void LaunchLrnBackward(int64_t n, int64_t c, int64_t plane, const float* x, const float* y,
                       const float* dy, float* dx, int64_t size, double alpha_over_size, float beta,
                       double k, float coeff, bool accumulate, cudaStream_t stream);

// ---- Softmax with cross-entropy ----

// p = softmax(x) per row of `cols`, with double sums. One block per row.
void LaunchSoftmaxForward(int64_t rows, int64_t cols, const float* x, float* p,
                          cudaStream_t stream);
// dx (=|+=) (p - onehot(label)) * scale, 0 where the label is `ignored`
void LaunchSoftmaxLossBackward(int64_t rows, int64_t cols, const float* p, const float* labels,
                               int64_t ignored, float scale, float* dx, bool accumulate,
                               cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_LAYER_KERNELS_CUDA_H_
