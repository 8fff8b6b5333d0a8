// embedding: a lookup table from symbol ids to vectors (PyTorch's
// nn.Embedding). The input holds ids as numbers - N x 1 x 1 x T, a sequence
// along the width, as a text dataset gives them - and the output is
// N x size x 1 x T, the vector of each id along the channels. An id outside
// [0, vocabulary) gives a zero vector and no gradient (the trainer checks
// that a dataset's symbols fit the vocabulary before training).
//
//   - {name: embed, type: embedding, vocabulary: 96, size: 64}
//
// Its one parameter, weight (vocabulary x size), starts normal with
// standard deviation 1, as PyTorch's does. No gradient reaches the ids.
#ifndef SPILL_LAYERS_EMBEDDING_LAYER_H_
#define SPILL_LAYERS_EMBEDDING_LAYER_H_

#include "framework/graph/layer.h"
#include "layers/embedding_math.h"

namespace spill {

class EmbeddingLayer : public Layer {
 public:
  explicit EmbeddingLayer(LayerParams& params);

  bool propagates_to(int input) const override { return false; }
  bool reads_indices(int input) const override { return true; }
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheap; }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

  int64_t vocabulary() const { return vocabulary_; }

 protected:
  // The table row of an id, or -1 when it is not a whole number in range
  // (layers/embedding_math.h, which the CUDA kernels share).
  int64_t Row(float id) const { return EmbeddingRow(id, vocabulary_); }

  int64_t vocabulary_ = 0;
  int64_t size_ = 0;
  int64_t steps_ = 0;
};

class Net;

// The ids a network's input takes: the smallest vocabulary among the
// embeddings reading its input layers, or 0 when none does (synthetic data
// then fills the input with values, not ids; a dataset's symbols must fit).
int64_t InputVocabulary(const Net& net);

}  // namespace spill

#endif  // SPILL_LAYERS_EMBEDDING_LAYER_H_
