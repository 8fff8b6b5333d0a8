// upsample: enlarges each plane by integer factors, nearest or bilinear
// (PyTorch's nn.Upsample; ONNX's Resize). Cheap to recompute; backward reads
// neither input nor output.
//
//   - {name: up, type: upsample, factor: 2}                          nearest
//   - {name: up, type: upsample, factor: 2, mode: bilinear}          align_corners: false
//   - {name: up, type: upsample, size: [28, 28], mode: bilinear, align_corners: true}
//   factor: an integer or [h, w]; or size: the output's [height, width], a
//   whole multiple of the input's.
//
// Bilinear sampling follows PyTorch: with align_corners false, output pixel
// centres map to (o + 0.5) / factor - 0.5 in the input (clamped at 0); with
// true, the corner pixels of input and output align.
#ifndef SPILL_LAYERS_UPSAMPLE_LAYER_H_
#define SPILL_LAYERS_UPSAMPLE_LAYER_H_

#include <array>

#include "layers/rearranging_layer.h"
#include "layers/upsample_math.h"

namespace spill {

class UpsampleLayer : public RearrangingLayer {
 public:
  explicit UpsampleLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  std::array<int64_t, 2> factor_{1, 1};
  std::array<int64_t, 2> size_{0, 0};  // given instead of the factor; 0: not given
  bool bilinear_ = false;
  bool align_corners_ = false;
};

}  // namespace spill

#endif  // SPILL_LAYERS_UPSAMPLE_LAYER_H_
