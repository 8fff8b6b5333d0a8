// space_to_depth: Swin Transformer's patch merging rearrangement. Each b x b
// block of pixels becomes one pixel with b*b times the channels:
// N x C x H x W to N x (b*b*C) x (H/b) x (W/b), H and W multiples of b.
// Cheap to recompute; backward reads neither input nor output.
//
//   - {name: merge, type: space_to_depth, block_size: 2}      block_size: 2 by default
//
// The order is torchvision's PatchMerging (x0 = x[0::2, 0::2],
// x1 = x[1::2, 0::2], x2 = x[0::2, 1::2], x3 = x[1::2, 1::2], concatenated
// on the channels): output channel k * C + c at (i, j) is input channel c at
// (i * b + dy, j * b + dx), with k = dx * b + dy - the row offset dy varies
// fastest. This is not PixelUnshuffle's (ONNX's SpaceToDepth) order, whose
// output channel is c * b * b + dy * b + dx.
#ifndef SPILL_LAYERS_SPACE_TO_DEPTH_LAYER_H_
#define SPILL_LAYERS_SPACE_TO_DEPTH_LAYER_H_

#include "layers/rearranging_layer.h"
#include "layers/space_to_depth_math.h"

namespace spill {

class SpaceToDepthLayer : public RearrangingLayer {
 public:
  explicit SpaceToDepthLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  // The geometry of an input of shape `in` (a slice of the batch, or all of it).
  SpaceToDepthShape Geometry(const Shape& in) const;

  int64_t block_ = 2;
};

}  // namespace spill

#endif  // SPILL_LAYERS_SPACE_TO_DEPTH_LAYER_H_
