// The two ends of a vision transformer's token sequence (ViT's class token):
//
//   class_token: a learned token put before the sequence, N x C x 1 x T ->
//     N x C x 1 x (T + 1): position 0 holds the token (C values, the same
//     for every image), positions 1..T the input. The token (1 x C x 1 x 1)
//     starts at zero, as torchvision's ViT starts it, without weight decay.
//     - {name: cls, type: class_token}
//   token: one position of a sequence, N x C x 1 x T -> N x C x 1 x 1 (the
//     class token after the last block, read by the classifier). `index`
//     counts from 0; a negative one counts from the end.
//     - {name: first, type: token, index: 0}
//
// Both move values only: cheap to recompute, and backward reads neither
// their inputs nor their outputs.
#ifndef SPILL_LAYERS_TOKEN_LAYERS_H_
#define SPILL_LAYERS_TOKEN_LAYERS_H_

#include "layers/rearranging_layer.h"

namespace spill {

class ClassTokenLayer : public RearrangingLayer {
 public:
  explicit ClassTokenLayer(LayerParams&) {}
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;

 protected:
  int64_t channels_ = 0;
};

class TokenLayer : public RearrangingLayer {
 public:
  explicit TokenLayer(LayerParams& params);
  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;

 protected:
  int64_t index_ = 0;     // as given
  int64_t position_ = 0;  // in [0, T)
};

}  // namespace spill

#endif  // SPILL_LAYERS_TOKEN_LAYERS_H_
