#include "layers/matrix_layers.h"

#include "framework/config/layer_params.h"

namespace spill {

MatmulLayer::MatmulLayer(LayerParams& params) {
  geometry_.transpose_a = params.Bool("transpose_a", false);
  geometry_.transpose_b = params.Bool("transpose_b", false);
  constexpr double kMaxAlpha = 1e6;
  geometry_.alpha =
      static_cast<float>(params.Float("alpha", 1.0, Bounds::Closed(-kMaxAlpha, kMaxAlpha)));
}

Status MatmulLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape &a = inputs[0], &b = inputs[1];
  if (a.n() != b.n() || a.c() != b.c()) {
    return InvalidArgument(
        "matmul multiplies the matrices of each image and channel, so both "
        "inputs need the same N and C; got " +
        a.ToString() + " and " + b.ToString());
  }
  MatmulGeometry& g = geometry_;
  g.m = g.transpose_a ? a.w() : a.h();
  g.k = g.transpose_a ? a.h() : a.w();
  const int64_t kb = g.transpose_b ? b.w() : b.h();
  g.p = g.transpose_b ? b.h() : b.w();
  if (kb != g.k) {
    return InvalidArgument("matmul of a " + std::to_string(g.m) + " x " + std::to_string(g.k) +
                           " by a " + std::to_string(kb) + " x " + std::to_string(g.p) +
                           " matrix (after transpose_a: " + (g.transpose_a ? "true" : "false") +
                           ", transpose_b: " + (g.transpose_b ? "true" : "false") +
                           "): the inner sizes differ");
  }
  *outputs = {Shape(a.n(), a.c(), g.m, g.p)};
  return Status::Ok();
}

MemoryTraits MatmulLayer::memory_traits() const {
  MemoryTraits traits;
  traits.feature_maps = true;
  return traits;
}

// M K P multiply-adds per matrix forward, twice that backward.
LayerWork MatmulLayer::work(Pass pass, const std::vector<Shape>& inputs,
                            const std::vector<Shape>& outputs) const {
  const double matrices = static_cast<double>(inputs[0].n() * inputs[0].c());
  const double products = static_cast<double>(geometry_.m * geometry_.k * geometry_.p);
  LayerWork w;
  w.flops = 2 * matrices * products * (pass == Pass::kForward ? 1 : 2);
  w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs)) *
            (pass == Pass::kForward ? 1 : 2);
  return w;
}

SoftmaxLayer::SoftmaxLayer(LayerParams& params) {
  const std::string axis = params.Choice("axis", {"w", "h", "c"}, "w");
  axis_ = axis == "w" ? 3 : axis == "h" ? 2 : 1;
}

Status SoftmaxLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  *outputs = {inputs[0]};
  return Status::Ok();
}

SoftmaxRows SoftmaxLayer::RowsOf(const Shape& x) const {
  const int64_t dims[4] = {x.n(), x.c(), x.h(), x.w()};
  SoftmaxRows s;
  s.length = dims[axis_];
  for (int a = axis_ + 1; a < 4; ++a) s.stride *= dims[a];
  s.rows = s.length > 0 ? x.numel() / s.length : 0;
  return s;
}

MemoryTraits SoftmaxLayer::memory_traits() const {
  MemoryTraits traits;
  traits.feature_maps = true;
  return traits;
}

ReshapeLayer::ReshapeLayer(LayerParams& params)
    : shape_(params.RequiredIntList("shape", -1, kMaxLayerExtent, 3)) {
  int unknown = 0;
  for (int64_t d : shape_) {
    if (d == 0) params.Fail("shape", "sizes are at least 1 (or -1 for the rest)");
    unknown += d == -1;
  }
  if (shape_.size() != 3) params.Fail("shape", "must list C, H and W");
  if (unknown > 1)
    params.Fail("shape", "may leave one size (-1) to the others, not " + std::to_string(unknown));
}

Status ReshapeLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  if (shape_.size() != 3) return InvalidArgument("shape: must list C, H and W");
  const int64_t per_image = x.c() * x.h() * x.w();
  int64_t known = 1;
  for (int64_t d : shape_) known *= d == -1 ? 1 : d;
  std::array<int64_t, 3> dims = {shape_[0], shape_[1], shape_[2]};
  for (int64_t& d : dims) {
    if (d == -1) d = known > 0 && per_image % known == 0 ? per_image / known : -1;
  }
  if (dims[0] * dims[1] * dims[2] != per_image || dims[0] < 1 || dims[1] < 1 || dims[2] < 1) {
    return InvalidArgument("shape: [" + std::to_string(shape_[0]) + ", " +
                           std::to_string(shape_[1]) + ", " + std::to_string(shape_[2]) +
                           "] does not hold the " + std::to_string(per_image) +
                           " values of each image of " + x.ToString());
  }
  *outputs = {Shape(x.n(), dims[0], dims[1], dims[2])};
  return Status::Ok();
}

// A copy either way.
LayerWork ReshapeLayer::work(Pass, const std::vector<Shape>& inputs,
                             const std::vector<Shape>& outputs) const {
  LayerWork w;
  w.bytes = sizeof(float) * (TotalElements(inputs) + TotalElements(outputs));
  return w;
}

}  // namespace spill
