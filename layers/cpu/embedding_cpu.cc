// embedding on the CPU: a gather forward; backward adds each position's
// gradient into its id's row, image by image and position by position in
// order (each thread owns columns of the table), so a step over slices of
// the batch gives the bits of the whole batch.
#include <algorithm>

#include "framework/graph/layer_registry.h"
#include "layers/embedding_layer.h"

namespace spill {
namespace {

class CpuEmbeddingLayer : public EmbeddingLayer {
 public:
  using EmbeddingLayer::EmbeddingLayer;

  bool supports_slices() const override { return true; }

  void Forward(const ForwardArgs& args) const override {
    const int64_t n = args.inputs[0].shape().n();
    const float* ids = args.inputs[0].data();
    const float* table = args.params[0].data();
    float* y = args.outputs[0].data();
#pragma omp parallel for schedule(static) if (n * steps_ * size_ > (1 << 15))
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t t = 0; t < steps_; ++t) {
        const int64_t row = Row(ids[i * steps_ + t]);
        for (int64_t e = 0; e < size_; ++e) {
          y[(i * size_ + e) * steps_ + t] = row < 0 ? 0.0f : table[row * size_ + e];
        }
      }
    }
  }

  void Backward(const BackwardArgs& args) const override {
    if (!args.param_grads[0].valid()) return;
    const int64_t n = args.output_grads[0].shape().n();
    const float* ids = args.inputs[0].data();
    const float* dy = args.output_grads[0].data();
    float* dw = args.param_grads[0].data();
    if (args.slice.first()) std::fill_n(dw, vocabulary_ * size_, 0.0f);
#pragma omp parallel for schedule(static) if (n * steps_ * size_ > (1 << 15))
    for (int64_t e = 0; e < size_; ++e) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t t = 0; t < steps_; ++t) {
          const int64_t row = Row(ids[i * steps_ + t]);
          if (row >= 0) dw[row * size_ + e] += dy[(i * size_ + e) * steps_ + t];
        }
      }
    }
  }
};

}  // namespace

SPILL_REGISTER_LAYER(embedding, kCpu, CpuEmbeddingLayer);

}  // namespace spill
