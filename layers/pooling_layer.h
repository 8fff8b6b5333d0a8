// Pooling layers. Cheap to recompute.
//
//   - {name: pool1, type: max_pool, kernel: 3, stride: 2}
//   - {name: pool5, type: avg_pool, kernel: 7}
//   - {name: gap, type: global_avg_pool}
//   kernel (required), stride (default: kernel), pad: an integer or [h, w];
//   ceil_mode: false (Caffe rounds up, PyTorch down);
//   avg_pool count_include_pad: true (divide by the window clipped to the
//   padded input, as PyTorch and Caffe do).
//
// Max pooling's backward reads its input and output (as cuDNN does); average
// pooling's reads neither.
#ifndef SPILL_LAYERS_POOLING_LAYER_H_
#define SPILL_LAYERS_POOLING_LAYER_H_

#include <array>

#include "framework/graph/layer.h"

namespace spill {

struct PoolGeometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t out_height = 0, out_width = 0;
  std::array<int64_t, 2> kernel{}, stride{}, pad{};
  bool count_include_pad = true;

  // The window of output (oh, ow), clipped to the input; `area` is the
  // divisor of average pooling.
  void Window(int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0, int64_t* w1,
              int64_t* area) const;
};

class PoolingLayer : public Layer {
 public:
  enum class Kind { kMax, kAverage, kGlobalAverage };
  PoolingLayer(LayerParams& params, Kind kind);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  BackwardNeeds backward_needs() const override {
    return kind_ == Kind::kMax ? BackwardNeeds{{true}, true} : BackwardNeeds{{false}, false};
  }
  LayerCost cost() const override { return LayerCost::kCheap; }
  MemoryTraits memory_traits() const override { return MemoryTraits::FeatureMaps(); }
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

  Kind kind() const { return kind_; }
  const PoolGeometry& geometry() const { return geom_; }

 protected:
  Kind kind_;
  PoolGeometry geom_;
  bool ceil_mode_ = false;
};

}  // namespace spill

#endif  // SPILL_LAYERS_POOLING_LAYER_H_
