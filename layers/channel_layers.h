// Layers that rearrange channels. Cheap to recompute; backward reads neither
// inputs nor outputs.
//
//   channel_shuffle: ShuffleNet's shuffle. The C channels, seen as `groups`
//     rows of C / groups, are transposed: output channel j * groups + i is
//     input channel i * (C / groups) + j.
//     - {name: shuffle, type: channel_shuffle, groups: 2}
//   slice: channels [begin, end) of the input (ShuffleNetV2's channel split,
//     ONNX's Split and Slice along the channels).
//     - {name: left, type: slice, begin: 0, end: 58}
#ifndef SPILL_LAYERS_CHANNEL_LAYERS_H_
#define SPILL_LAYERS_CHANNEL_LAYERS_H_

#include "layers/rearranging_layer.h"

namespace spill {

class ChannelShuffleLayer : public RearrangingLayer {
 public:
  explicit ChannelShuffleLayer(LayerParams& params);
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  int64_t groups_ = 1;
};

class SliceLayer : public RearrangingLayer {
 public:
  explicit SliceLayer(LayerParams& params);
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  int64_t begin_ = 0, end_ = 1;
  int64_t channels_ = 0;  // of the input
};

}  // namespace spill

#endif  // SPILL_LAYERS_CHANNEL_LAYERS_H_
