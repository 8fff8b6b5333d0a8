// Launchers of the kernels of lstm and gru on the GPU (recurrent_kernels.cu):
// the transposes between sequences (N x C x 1 x T) and rows of time steps
// (N*T x C), one step of the cell forward and backward over the batch
// (layers/recurrent_math.h, the CPU's formulas), and the dropout between
// layers. As in layer_kernels_cuda.h, each enqueues its work on `stream`,
// launches nothing when there is nothing to do, and is deterministic: every
// output element is computed by one thread, with no atomics.
//
// The reserve is the layer's (layers/recurrent_layers.h): image i's floats
// start at reserve + i * reserve_stride. Every other pointer is the call's
// first image's part of its buffer.
#ifndef SPILL_LAYERS_CUDA_RECURRENT_KERNELS_CUDA_H_
#define SPILL_LAYERS_CUDA_RECURRENT_KERNELS_CUDA_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace spill {
namespace cuda {

// rows[(i * t + s) * c + ch] = x[(i * c + ch) * t + s] for n images.
void LaunchSequenceToRows(int64_t n, int64_t c, int64_t t, const float* x, float* rows,
                          cudaStream_t stream);
// x[(i * c + ch) * t + s] (=|+=) rows[i * image_stride + s * c + ch]: image i's
// rows (t x c) start image_stride floats after image i - 1's.
void LaunchRowsToSequence(int64_t n, int64_t c, int64_t t, const float* rows, int64_t image_stride,
                          float* x, bool accumulate, cudaStream_t stream);

// One time step of one layer and direction, over the call's images: one
// thread per (image, hidden unit).
struct RecurrentStepShape {
  bool lstm = true;            // else gru
  int64_t images = 0;          // of the call
  int64_t hidden = 0;          // H
  int64_t steps = 0;           // T
  int64_t directions = 1;      // the layer's hidden states are T x directions*H
  int64_t direction = 0;       // this direction's units start at direction*H
  int64_t reserve_stride = 0;  // floats of one image's reserve
  int64_t gates_at = 0;        // GatesOffset(layer, direction)
  int64_t hidden_at = 0;       // HiddenOffset(layer) + direction*H
  int64_t t = 0;               // the step
  int64_t prev = 0;            // the step before it in this direction's order
  bool has_prev = false;       // false on the direction's first step: zero states
  bool carried = false;        // backward: dh, dc hold the later step's gradients
};

// The cell at step t: the reserve's gate slots of step t hold x W_ih^T (no
// bias); `recurrent` (images x gates*H) holds h_prev W_hh^T when has_prev
// (not read otherwise). Adds b_ih and b_hh (null: no bias), applies
// LstmForward / GruForward, and writes the saved values over the gate slots
// and the hidden state of step t.
void LaunchRecurrentForwardStep(const RecurrentStepShape& s, float* reserve, const float* recurrent,
                                const float* b_ih, const float* b_hh, cudaStream_t stream);

// The cell's gradients at step t, from `above` (images*T x directions*H, the
// gradient of the layer's output rows) plus the carried dh (images x H):
// LstmBackward's pre-activation gradients into gate_grads (images*T x
// gates*H, row i*T + t) and the cell gradient into dc; GruBackward's into
// gate_grads (the input projection's) and recurrent_grads (the recurrent
// one's), and dh z into dh.
void LaunchRecurrentBackwardStep(const RecurrentStepShape& s, const float* reserve,
                                 const float* above, float* dh, float* dc, float* gate_grads,
                                 float* recurrent_grads, cudaStream_t stream);

// Dropout on the hidden states of one layer, `count` floats per image: when
// `draw`, mask[e] = UniformAt(seed, ((first_image + i) * layers + layer) *
// count + e) < ratio ? 0 : keep (the CPU's draw, first_image the call's
// first image in the whole batch); then masked = hidden * mask. The three
// are at their offsets in each image's reserve.
struct RecurrentDropoutShape {
  int64_t images = 0;
  int64_t count = 0;
  int64_t reserve_stride = 0;
  int64_t hidden_at = 0, mask_at = 0, masked_at = 0;
  int64_t first_image = 0;
  int64_t layers = 1, layer = 0;
  float ratio = 0, keep = 1;
  uint64_t seed = 0;
  bool draw = true;
};
void LaunchRecurrentDropout(const RecurrentDropoutShape& s, float* reserve, cudaStream_t stream);

// grads[i * count + e] *= reserve[i * reserve_stride + mask_at + e]
void LaunchRecurrentUnmask(int64_t images, int64_t count, const float* reserve,
                           int64_t reserve_stride, int64_t mask_at, float* grads,
                           cudaStream_t stream);

}  // namespace cuda
}  // namespace spill

#endif  // SPILL_LAYERS_CUDA_RECURRENT_KERNELS_CUDA_H_
