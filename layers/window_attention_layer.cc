#include "layers/window_attention_layer.h"

#include <algorithm>
#include <cmath>

#include "framework/config/layer_params.h"

namespace spill {

WindowAttentionLayer::WindowAttentionLayer(LayerParams& params)
    : heads_(params.RequiredInt("heads", 1, kMaxLayerExtent)),
      window_(params.RequiredInt("window", 1, kMaxLayerExtent)),
      shift_(params.Int("shift", 0, 0, std::max<int64_t>(window_ - 1, 0))),
      cosine_(params.Bool("cosine", false)),
      grid_mode_(params.Bool("grid", false)) {
  if (params.Has("scale")) {
    constexpr double kMaxScale = 1e3;
    scale_ = static_cast<float>(params.Float("scale", 1.0, Bounds::AboveTo(0, kMaxScale)));
    if (cosine_) params.Fail("scale", "cosine attention takes no scale (it learns logit_scale)");
  }
}

Status WindowAttentionLayer::Reshape(const std::vector<Shape>& inputs,
                                     std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  if (x.c() % 3 != 0) {
    return InvalidArgument(
        "window_attention takes queries, keys and values stacked along the channels, "
        "N x 3C x H x W (a 1x1 convolution with 3C filters gives them), got " +
        x.ToString());
  }
  n_ = x.n();
  channels_ = x.c() / 3;
  if (channels_ % heads_ != 0) {
    return InvalidArgument("heads: " + std::to_string(heads_) +
                           " does not divide the width C = " + std::to_string(channels_) +
                           " (the input has 3C = " + std::to_string(x.c()) + " channels)");
  }
  if (x.h() % window_ != 0 || x.w() % window_ != 0) {
    return InvalidArgument("window: " + std::to_string(window_) + " does not divide the image's " +
                           std::to_string(x.h()) + " x " + std::to_string(x.w()) +
                           " pixels (H and W must be multiples of the window; pad the image)");
  }
  if (grid_mode_ && shift_ != 0) {
    return InvalidArgument("grid: true takes no shift (got shift: " + std::to_string(shift_) +
                           "): a grid's groups are spread over the image already");
  }
  depth_ = channels_ / heads_;
  grid_.grid = grid_mode_;
  grid_.height = x.h();
  grid_.width = x.w();
  grid_.window = window_;
  // torchvision rolls an axis only where it holds more than one window.
  grid_.shift_h = x.h() > window_ ? shift_ : 0;
  grid_.shift_w = x.w() > window_ ? shift_ : 0;
  *outputs = {Shape(n_, channels_, x.h(), x.w())};
  return Status::Ok();
}

std::vector<ParamSpec> WindowAttentionLayer::params() const {
  const int64_t rows = (2 * window_ - 1) * (2 * window_ - 1);
  ParamSpec table{"table", Shape(rows, heads_, 1, 1), Initializer::Normal(0.02f)};
  table.decay_mult = 0;
  if (!cosine_) return {table};
  // torchvision: torch.log(10 * torch.ones((num_heads, 1, 1))).
  ParamSpec logit_scale{"logit_scale", Shape(heads_, 1, 1, 1),
                        Initializer::Constant(std::log(10.0f))};
  logit_scale.decay_mult = 0;
  return {table, logit_scale};
}

std::vector<AuxSpec> WindowAttentionLayer::aux() const {
  const int64_t tokens = grid_.tokens();
  return {{"probabilities", Shape(n_, grid_.windows() * heads_, tokens, tokens)}};
}

MemoryTraits WindowAttentionLayer::memory_traits() const {
  MemoryTraits traits;
  traits.feature_maps = true;
  return traits;
}

int64_t WindowAttentionLayer::InFlight() const { return std::min(kUnitsInFlight, Units(n_)); }

// Forward: the unit's Q, K and V gathered (3 T d) and a row of scores (T).
// Backward: Q, K, V, dO, dQ, dK, dV (7 T d), a row of dS (T) and the
// unit's part of the table's gradient ((2w - 1)^2); with `cosine`, before
// that part, the norms of the queries and keys (2 T) and the unit's part
// of logit_scale's gradient (1).
int64_t WindowAttentionLayer::UnitWorkspace(Pass pass) const {
  const int64_t tokens = grid_.tokens(), td = tokens * depth_;
  if (pass == Pass::kForward) return 3 * td + tokens;
  return 7 * td + tokens + (cosine_ ? 2 * tokens + 1 : 0) + grid_.table_rows();
}

size_t WindowAttentionLayer::workspace_bytes(Pass pass) const {
  return static_cast<size_t>(InFlight() * UnitWorkspace(pass)) * sizeof(float);
}

float WindowAttentionLayer::Scale() const {
  if (scale_ > 0) return scale_;
  return static_cast<float>(std::pow(static_cast<double>(depth_), -0.5));
}

// Q K^T and P V: 2 T T d multiply-adds per unit; backward: dP = dO V^T,
// dV, dQ and dK (4 T T d), and with `cosine` the cosines again for
// logit_scale's gradient (T T d more).
LayerWork WindowAttentionLayer::work(Pass pass, const std::vector<Shape>& inputs,
                                     const std::vector<Shape>& outputs) const {
  const double tokens = static_cast<double>(grid_.tokens());
  const double per_unit = 2.0 * tokens * tokens * static_cast<double>(depth_);
  const double units = static_cast<double>(Units(n_));
  LayerWork w;
  w.flops = units * per_unit * (pass == Pass::kForward ? 2 : (cosine_ ? 5 : 4));
  const double saved = units * tokens * tokens;
  const double table = static_cast<double>(grid_.table_rows() * heads_);
  w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs) + saved + table) *
            (pass == Pass::kForward ? 1 : 2);
  return w;
}

}  // namespace spill
