// attention: multi-head scaled dot-product attention over a sequence
// (Vaswani et al.), the core between a transformer's projections. The input
// is N x 3C x 1 x T - each position's query, key and value stacked along the
// channels ([0, C), [C, 2C), [2C, 3C)), what a 1x1 convolution with 3C
// filters gives (GPT-2's c_attn) - and the output N x C x 1 x T. Head h of
// `heads` reads channels [h d, (h + 1) d) of each, d = C / heads:
//
//   O = softmax(Q K^T / sqrt(d)) V, with causal: true a query at position t
//   attending to positions <= t only (a decoder's mask).
//
//   - {name: attn, type: attention, heads: 4, causal: true}
//   - {name: attn, type: attention, heads: 4, algorithm: naive}
//
// `algorithm` is what forward keeps for backward:
//   tiled (default)  each query's row maximum and 1 / sum (2 floats): backward
//                    computes the row's scores again, one row at a time, never
//                    holding a T x T matrix (FlashAttention's trade: O(T)
//                    saved per query instead of O(T^2), for a second pass of
//                    Q K^T);
//   naive            the probabilities, N x heads x T x T;
//   auto             chosen per run by the programs: naive (backward does not
//                    compute the scores again) where the plan fits, tiled
//                    where it does not (tools/common/net_options.h) - and
//                    tiled under the workspace policy memory_optimal. A layer
//                    built outside a network computes naive.
// Both compute a row the same way, in the same order, so they give the same
// bits: the choice changes the memory and the backward's work only. A
// T x T matrix is never the workspace either: a row of scores per head in
// flight.
#ifndef SPILL_LAYERS_ATTENTION_LAYER_H_
#define SPILL_LAYERS_ATTENTION_LAYER_H_

#include "framework/graph/layer.h"

namespace spill {

class AttentionLayer : public Layer {
 public:
  explicit AttentionLayer(LayerParams& params);

  Status Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) override;
  std::vector<AuxSpec> aux() const override;
  BackwardNeeds backward_needs() const override { return {{true}, false}; }
  LayerCost cost() const override { return LayerCost::kCheckpoint; }
  MemoryTraits memory_traits() const override;
  size_t workspace_bytes(Pass pass) const override;
  LayerWork work(Pass pass, const std::vector<Shape>& inputs,
                 const std::vector<Shape>& outputs) const override;

  bool tiled() const { return tiled_; }

 protected:
  // Heads computed at once, each with its own part of the workspace: fixed,
  // so the workspace (and the bits) do not depend on the thread count.
  static constexpr int64_t kHeadsInFlight = 8;
  int64_t InFlight() const;
  // Floats of one head's part of the workspace in `pass`.
  int64_t HeadWorkspace(Pass pass) const;

  int64_t heads_ = 1;
  bool causal_ = false;
  bool tiled_ = true;
  int64_t n_ = 0, channels_ = 0, steps_ = 0, depth_ = 0;  // C, T, d = C / heads
};

}  // namespace spill

#endif  // SPILL_LAYERS_ATTENTION_LAYER_H_
