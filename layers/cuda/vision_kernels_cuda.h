// Launchers of the kernels of the vision layers' CUDA implementations
// (vision_kernels.cu): activations, broadcast products, channel shuffles,
// layer norm, per-channel scales, upsampling, padding, space to depth, the
// transposed convolution's im2col / col2im, and the per-pixel softmax. As in
// layer_kernels_cuda.h, each enqueues its work on `stream`, launches nothing
// when there is nothing to do, and is deterministic: every output element is
// computed by one thread, and every sum over a plane is reduced by one block
// in a fixed tree.
//
// Sums over the batch (parameter gradients) go image by image in batch
// order into double sums carried in `carry` (zeroed when `start`: the first
// slice of the batch), and the gradient written is the float of the carried
// sum - so a step over slices of the batch gives the bits of the whole batch.
#ifndef SPILL_LAYERS_CUDA_VISION_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_VISION_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "layers/activation_math.h"
#include "layers/cuda/stored_cuda.h"
#include "layers/space_to_depth_math.h"

namespace spill {
namespace cuda {

// ---- Activations (layers/activation_math.h) ----

// Every tensor stored as `stored` (stored_cuda.h).
void LaunchActivationForward(Stored stored, int64_t n, const ActivationConstants& k, const void* x,
                             void* y, cudaStream_t stream);
// dx (=|+=) ActivationGrad(v, dy), v the output or the input as the function needs.
void LaunchActivationBackward(Stored stored, int64_t n, const ActivationConstants& k, const void* v,
                              const void* dy, void* dx, bool accumulate, cudaStream_t stream);

// ---- Broadcast products and sums over planes ----

// `planes` planes of `plane` elements; a spread input holds one value per plane.
struct BroadcastShape {
  int64_t planes = 0, plane = 0;
  bool spread[2] = {false, false};
  bool multiply = true;
};
void LaunchBroadcastForward(const BroadcastShape& s, const float* a, const float* b, float* y,
                            cudaStream_t stream);
// The gradient of input `i`: dy times the other input (multiply) or dy;
// summed over each plane (one block per plane, double) when input i is spread.
void LaunchBroadcastBackward(const BroadcastShape& s, int i, const float* dy, const float* other,
                             float* dx, bool accumulate, cudaStream_t stream);

// ---- Channel shuffle ----

// Forward moves channel i * (c / groups) + j to j * groups + i; `inverse` back.
void LaunchChannelShuffle(int64_t n, int64_t c, int64_t plane, int64_t groups, const float* from,
                          float* to, bool inverse, bool accumulate, cudaStream_t stream);

// ---- Layer norm over channels and per-channel scale ----

// x, y, dy and dx stored as `stored` (stored_cuda.h); statistics, gamma and
// beta float32 and double.
void LaunchLayerNormForward(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                            const float* gamma, const float* beta, double eps, void* y,
                            cudaStream_t stream);
// Each pixel's mean and 1 / std into `stats` (2 doubles per pixel) and,
// when dx is not null, the input gradient.
void LaunchLayerNormInputGrad(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                              const void* dy, const float* gamma, double eps, double* stats,
                              void* dx, bool accumulate, cudaStream_t stream);
// Per channel: sum dy * xhat (xhat from `stats`; x itself when stats is
// null, scale's gamma; nothing when x is null too, a bias alone) and sum dy,
// from `carry` (2c doubles); either gradient may be null.
void LaunchChannelGradSums(Stored stored, int64_t n, int64_t c, int64_t plane, const void* x,
                           const void* dy, const double* stats, double* carry, bool start,
                           float* dgamma, float* dbeta, cudaStream_t stream);
// y = x * gamma[c] (+ beta[c] when beta is not null)
void LaunchScaleForward(int64_t n, int64_t c, int64_t plane, const float* x, const float* gamma,
                        const float* beta, float* y, cudaStream_t stream);
// dx (=|+=) dy * gamma[c]
void LaunchScaleInputGrad(int64_t n, int64_t c, int64_t plane, const float* dy, const float* gamma,
                          float* dx, bool accumulate, cudaStream_t stream);

// ---- Upsampling and padding ----

struct UpsampleShape {
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, factor_h = 1, factor_w = 1;
  bool bilinear = false, align_corners = false;
};
void LaunchUpsampleForward(const UpsampleShape& s, const float* x, float* y, cudaStream_t stream);
// Nearest: each input gathers its factor_h x factor_w outputs. Bilinear: one
// thread per plane adds every output's gradient into its four taps in
// output order (the CPU layer's order).
void LaunchUpsampleBackward(const UpsampleShape& s, const float* dy, float* dx, bool accumulate,
                            cudaStream_t stream);

// top and left may be negative (a crop); a cropped input's gradient is zero.
struct PadShape {
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, top = 0, left = 0;
};
void LaunchPadForward(const PadShape& s, float value, const float* x, float* y,
                      cudaStream_t stream);
void LaunchPadBackward(const PadShape& s, const float* dy, float* dx, bool accumulate,
                       cudaStream_t stream);

// ---- Space to depth (layers/space_to_depth_math.h) ----

// One thread per output element: forward copies x into y; `inverse` writes
// (or adds) each of y's elements back to its place in x; both stored as
// `stored`.
void LaunchSpaceToDepth(Stored stored, const SpaceToDepthShape& s, const void* from, void* to,
                        bool inverse, bool accumulate, cudaStream_t stream);

// ---- im2col / col2im of one image (the transposed convolution) ----

// A convolution's window over an image of `channels` x height x width,
// giving out_h x out_w positions: the column matrix has channels * kh * kw
// rows of out_h * out_w values.
struct WindowShape {
  int64_t channels = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
};
void LaunchIm2Col(const WindowShape& s, const float* image, float* col, cudaStream_t stream);
// image = the sum of each pixel's column entries (overwritten).
void LaunchCol2Im(const WindowShape& s, const float* col, float* image, cudaStream_t stream);
// y[i][c][:] += bias[c]
void LaunchAddChannelBias(int64_t n, int64_t c, int64_t plane, const float* bias, float* y,
                          cudaStream_t stream);

// ---- Softmax over the channels of every pixel ----

// The c scores of image i, pixel j are `pixels` apart from (i * c) * pixels + j.
void LaunchPixelSoftmaxForward(int64_t n, int64_t c, int64_t pixels, const float* x, float* p,
                               cudaStream_t stream);
// dx (=|+=) (p - onehot(label)) * scale, labels one per image and pixel; 0
// where the label is `ignored`.
void LaunchPixelSoftmaxLossBackward(int64_t n, int64_t c, int64_t pixels, const float* p,
                                    const float* labels, int64_t ignored, float scale, float* dx,
                                    bool accumulate, cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_VISION_KERNELS_CUDA_H_
