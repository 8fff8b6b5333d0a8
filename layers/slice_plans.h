// How a device layer computes a slice of the batch (framework/graph/layer.h's
// BatchSlice), decided on the host in plain C++ so that tests without a GPU
// check it; layers/cuda/ enqueues what these return.
//
// The promise: a step run slice by slice gives the bits of the step run
// over the whole batch in image order. A GPU layer keeps it by reducing over
// the batch image by image, in batch order, from a carry that persists
// between the calls of a step:
//   * parameter gradients (convolution, fully connected) are the carry:
//     each image's contribution is added into them, the step's first image
//     overwriting (ImageCalls);
//   * batch norm carries its per-channel double sums in its workspace
//     (which stays with the step across its slices), started by the first
//     slice of a sweep and finished by the last (PlanBatchNormForward,
//     PlanBatchNormBackward);
//   * per-image work (dropout's mask, the loss gradient's scale) uses the
//     image's place in the whole batch.
#ifndef SPILL_LAYERS_SLICE_PLANS_H_
#define SPILL_LAYERS_SLICE_PLANS_H_

#include <cstdint>
#include <vector>

#include "framework/graph/layer.h"

namespace spill {

// One image of a call: its index in the slice and in the whole batch, and
// whether its contribution overwrites the carried sum (the step's first).
struct ImageCall {
  int64_t index = 0;   // in the call's tensors
  int64_t image = 0;   // in the whole batch
  bool first = false;  // the first image of the step
};

// The images of a call over `images` images (the slice, or the batch), in
// order.
std::vector<ImageCall> ImageCalls(const BatchSlice& slice, int64_t images);

// The element where a call's first image starts in the whole batch's
// tensor, for per-element streams (dropout's mask).
inline int64_t SliceElementOffset(const BatchSlice& slice, int64_t sample_size) {
  return slice.begin * sample_size;
}

// Batch norm forward over one call. Sweeps: 0 sums, 1 squared deviations
// about the mean, 2 normalization (BatchNormSweeps).
struct BatchNormForwardPlan {
  bool from_running = false;  // evaluation: mean and 1/std from the running statistics
  bool sums = false;          // add the images' per-channel sums to the carry
  bool squares = false;       // add their squared deviations from carry / count
  bool finish = false;        // batch statistics and running update from the carry
  bool normalize = false;     // y from the saved statistics
  bool start = false;         // the carry starts at zero (the step's first call of a sweep)
  double count = 0;           // elements per channel in the whole batch
};

// Batch norm backward over one call. Sweeps: 0 the gradient sums (sum dy,
// sum dy (x - mean)), 1 the input gradient.
struct BatchNormBackwardPlan {
  bool sums = false;
  bool param_grads = false;  // gamma's and beta's gradients from the carry
  bool input_grad = false;
  bool start = false;
  double count = 0;
};

constexpr int kBatchNormForwardSweeps = 3;
constexpr int kBatchNormBackwardSweeps = 2;

BatchNormForwardPlan PlanBatchNormForward(const BatchSlice& slice, int64_t images, int64_t plane,
                                          Phase phase, bool recompute);
BatchNormBackwardPlan PlanBatchNormBackward(const BatchSlice& slice, int64_t images, int64_t plane,
                                            bool input_grad);

}  // namespace spill

#endif  // SPILL_LAYERS_SLICE_PLANS_H_
