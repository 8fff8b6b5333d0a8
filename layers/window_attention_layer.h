// window_attention: multi-head self-attention within windows of an image,
// shifted or not - the core of a Swin Transformer block (Liu et al.), as
// torchvision 0.14's shifted_window_attention computes it between its qkv
// and proj linears. The input is N x 3C x H x W - each pixel's query, key
// and value stacked along the channels ([0, C), [C, 2C), [2C, 3C)), what a
// 1x1 convolution with 3C filters gives - and the output N x C x H x W.
// Head h of `heads` reads channels [h d, (h + 1) d) of each, d = C / heads.
//
//   1. The image is rolled up and left by `shift` (torch.roll by -shift):
//      position (i, j) of the rolled grid is pixel ((i + s) mod H,
//      (j + s) mod W).
//   2. The rolled grid is cut into windows of w x w (`window`), row after
//      row; token t = r w + c of a window is its row r, column c.
//   3. In each window and head, with T = w w tokens:
//        S[t][u] = (q_t d^-1/2) . k_u + table[index(t, u)][h] + mask[t][u],
//        O = softmax(S) V,
//      index(t, u) = (r_t - r_u + w - 1) (2w - 1) + (c_t - c_u + w - 1),
//      and mask -100 where t and u come from different regions of the
//      rolled grid (each axis cut at extent - w and extent - shift), the
//      pieces the roll brought together; 0 otherwise, and everywhere
//      without a shift.
//   4. Each output goes back to the pixel its query came from.
//
// `cosine: true` gives Swin V2's cosine attention (torchvision 0.14's
// shifted_window_attention given a logit_scale): step 3's scaled dot
// product becomes the cosine of the query and the key times a learned
// per-head scale,
//        S[t][u] = (q^_t . k^_u) exp(min(logit_scale[h], ln 100)) + table + mask,
//      q^ = q / max(|q|, 1e-12) and k^ likewise (F.normalize), no d^-1/2;
// the clamp compares the float parameter with ln 100 rounded to float, as
// PyTorch's clamp with math.log(100.0) does, and passes the gradient where
// the parameter is at most that bound (0 above it).
//
//   - {name: attn, type: window_attention, heads: 3, window: 7}
//   - {name: attn, type: window_attention, heads: 3, window: 7, shift: 3}
//   - {name: attn, type: window_attention, heads: 3, window: 8, shift: 4, cosine: true}
//
// `grid: true` gives MaxViT's grid attention (torchvision 0.14's
// PartitionAttentionLayer of partition_type "grid"): the w x w tokens a
// group attends among are spread over the whole image, token (r, c) of
// group (a, b) at pixel (r H/w + a, c W/w + b) - a dilated window, with
// the same relative position bias over (r, c). It takes no shift.
//
//   - {name: attn, type: window_attention, heads: 2, window: 7, grid: true}
//
// `scale` replaces d^-1/2 in step 3 (MaxViT scales by C^-1/2, the whole
// width's); not with `cosine`.
//
// As in torchvision, an axis that one window spans is not rolled (a 7 x 7
// map with windows of 7 is attended unshifted and unmasked whatever
// `shift` says). H and W must be multiples of the window: pad the image
// first (`pad`).
//
// The parameter `table`, (2w - 1)^2 x heads (entry [r, h] at r heads + h,
// torchvision's relative_position_bias_table), starts normal with standard
// deviation 0.02 - Swin truncates at +-2, 100 deviations away - without
// weight decay, as Swin's no_weight_decay leaves it. With `cosine` a second
// parameter follows, `logit_scale`, heads x 1 x 1 x 1, starting at ln 10
// (torchvision's torch.log(10 * ones)), also without weight decay; without
// it the parameters are the table alone, as before. Forward keeps the
// probabilities for backward, N x (windows heads) x T x T, the aux tensor
// `probabilities` (attention's naive algorithm); the workspace holds one
// window's Q, K and V per unit in flight, never a T x T matrix (backward's
// cosine mode adds the norms of the unit's queries and keys, recomputed
// from the input).
#ifndef SPILL_LAYERS_WINDOW_ATTENTION_LAYER_H_
#define SPILL_LAYERS_WINDOW_ATTENTION_LAYER_H_

#include "framework/graph/layer.h"
#include "layers/window_attention_math.h"

namespace spill {

class WindowAttentionLayer : public Layer {
 public:
  explicit WindowAttentionLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<ParamSpec> params() const override;
  std::vector<AuxSpec> aux() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }
  MemoryTraits memory_traits() const override;
  size_t workspace_bytes(Pass pass) const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

 protected:
  // Units - one head of one window of one image - computed at once, each
  // with its own part of the workspace: fixed, so the workspace (and the
  // bits) do not depend on the thread count.
  static constexpr int64_t kUnitsInFlight = 8;
  int64_t Units(int64_t images) const { return images * grid_.windows() * heads_; }
  int64_t InFlight() const;
  // Floats of one unit's part of the workspace in `pass`.
  int64_t UnitWorkspace(Pass pass) const;
  // d^-1/2 as PyTorch forms it: the double (C // heads) ** -0.5, rounded
  // to float when it multiplies the float queries.
  float Scale() const;

  int64_t heads_ = 1;
  int64_t window_ = 1;
  int64_t shift_ = 0;
  bool cosine_ = false;     // Swin V2's cosine attention, with the parameter logit_scale
  bool grid_mode_ = false;  // MaxViT's grid attention: groups spread over the image
  float scale_ = 0;         // what multiplies the queries; 0: d^-1/2
  int64_t n_ = 0, channels_ = 0, depth_ = 0;  // C, d = C / heads
  WindowGrid grid_;                           // H, W, w and the shift of each axis
};

}  // namespace spill

#endif  // SPILL_LAYERS_WINDOW_ATTENTION_LAYER_H_
