// Layers of matrices between activations, from which attention (or any
// product of two activations) can be written out step by step in YAML -
// spill's `attention` layer computes the same in one step with less memory.
// Each image's channel c is a matrix of H rows and W columns.
//
//   matmul: two inputs, A (N x C x H x W) and B (N x C x H' x W'); for each
//     image and channel, Y = alpha op(A) op(B), op the matrix or, with
//     `transpose_a` / `transpose_b`, its transpose; op(A) M x K and op(B)
//     K x P give Y N x C x M x P. Each element is one dot product in k
//     order, so the bits depend neither on the thread count nor on slices
//     of the batch. Backward reads both inputs.
//     - {name: scores, type: matmul, inputs: [q, k], transpose_a: true, alpha: 0.25}
//   softmax: over one axis (`axis: w`, the default; or h, c), each row
//     shifted by its maximum, its sum in double. Backward reads the output.
//     - {name: p, type: softmax, axis: w}
//   reshape: each image's values, row after row, as `shape: [C, H, W]` (one
//     entry may be -1: what the others leave). A copy; backward reads
//     neither input nor output.
//     - {name: heads, type: reshape, shape: [4, 16, -1]}
//
// Attention over a sequence N x 3C x 1 x T, heads of d: slices give Q, K
// and V, reshapes make each N x heads x d x T, S = matmul(Q, K,
// transpose_a) scaled by d^-1/2 is N x heads x T x T, P = softmax(S) over w,
// O = matmul(V, P, transpose_b) is N x heads x d x T, and a reshape gives
// back N x C x 1 x T (tests/matrix_layers_test.cc checks it against the
// attention layer).
#ifndef SPILL_LAYERS_MATRIX_LAYERS_H_
#define SPILL_LAYERS_MATRIX_LAYERS_H_

#include <array>

#include "layers/matrix_math.h"
#include "layers/rearranging_layer.h"

namespace spill {

class MatmulLayer : public Layer {
 public:
  explicit MatmulLayer(LayerParams& params);

  int min_inputs() const override { return 2; }
  int max_inputs() const override { return 2; }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override { return {{true, true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }
  MemoryTraits memory_traits() const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  MatmulGeometry geometry_;  // M, K, P, the transposes, alpha (the batch set per call)
};

class SoftmaxLayer : public Layer {
 public:
  explicit SoftmaxLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override { return {{false}, true}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override;

 protected:
  // The rows along the axis in a tensor of shape `x` (the batch or a slice).
  SoftmaxRows RowsOf(const Shape& x) const;

  int axis_ = 3;  // of N x C x H x W: 1, 2 or 3
};

class ReshapeLayer : public RearrangingLayer {
 public:
  explicit ReshapeLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  std::vector<int64_t> shape_;  // C, H, W as given, -1 for the rest
};

}  // namespace spill

#endif  // SPILL_LAYERS_MATRIX_LAYERS_H_
