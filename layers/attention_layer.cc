#include "layers/attention_layer.h"

#include <algorithm>

#include "framework/config/layer_params.h"

namespace spill {

AttentionLayer::AttentionLayer(LayerParams& params)
    : heads_(params.RequiredInt("heads", 1, kMaxLayerExtent)),
      causal_(params.Bool("causal", false)),
      tiled_(params.Choice("algorithm", {"tiled", "naive", "auto"}, "tiled") == "tiled") {}

Status AttentionLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  if (x.h() != 1 || x.c() % 3 != 0) {
    return InvalidArgument(
        "attention takes queries, keys and values stacked along the channels, N x 3C x 1 x T "
        "(a 1x1 convolution with 3C filters gives them), got " +
        x.ToString());
  }
  n_ = x.n();
  channels_ = x.c() / 3;
  steps_ = x.w();
  if (channels_ % heads_ != 0) {
    return InvalidArgument("heads: " + std::to_string(heads_) +
                           " does not divide the width C = " + std::to_string(channels_) +
                           " (the input has 3C = " + std::to_string(x.c()) + " channels)");
  }
  depth_ = channels_ / heads_;
  *outputs = {Shape(n_, channels_, 1, steps_)};
  return Status::Ok();
}

std::vector<AuxSpec> AttentionLayer::aux() const {
  if (tiled_) return {{"row_stats", Shape(n_, heads_, steps_, 2)}};
  return {{"probabilities", Shape(n_, heads_, steps_, steps_)}};
}

MemoryTraits AttentionLayer::memory_traits() const {
  MemoryTraits traits;
  traits.feature_maps = true;
  return traits;
}

int64_t AttentionLayer::InFlight() const { return std::min(kHeadsInFlight, n_ * heads_); }

// Forward: the head's Q, K and V gathered (3 T d) and a row of scores (T).
// Backward besides: dO (T d), dQ, dK, dV (3 T d) and a row of dP (T).
int64_t AttentionLayer::HeadWorkspace(Pass pass) const {
  const int64_t td = steps_ * depth_;
  return pass == Pass::kForward ? 3 * td + steps_ : 7 * td + 2 * steps_;
}

size_t AttentionLayer::workspace_bytes(Pass pass) const {
  return static_cast<size_t>(InFlight() * HeadWorkspace(pass)) * sizeof(float);
}

// Q K^T and P V: 2 T T d multiply-adds per head (half with the causal mask);
// backward: dP = dO V^T, dV, dQ, dK (4 T T d), and tiled's Q K^T again.
LayerWork AttentionLayer::work(Pass pass, const std::vector<Shape>& inputs,
                               const std::vector<Shape>& outputs) const {
  const double pairs =
      static_cast<double>(steps_) * static_cast<double>(steps_) * (causal_ ? 0.5 : 1.0);
  const double per_head = 2.0 * pairs * static_cast<double>(depth_);  // flops of one T T d product
  const double heads = static_cast<double>(n_ * heads_);
  LayerWork w;
  w.flops = heads * per_head * (pass == Pass::kForward ? 2 : (tiled_ ? 5 : 4));
  const double saved =
      static_cast<double>(tiled_ ? n_ * heads_ * steps_ * 2 : n_ * heads_ * steps_ * steps_);
  w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs) + saved) *
            (pass == Pass::kForward ? 1 : 2);
  return w;
}

}  // namespace spill
