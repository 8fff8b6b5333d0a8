#include "layers/upsample_layer.h"

#include <algorithm>

#include "framework/config/layer_params.h"

namespace spill {

constexpr int64_t kMaxUpsampleFactor = 1024;

UpsampleLayer::UpsampleLayer(LayerParams& params) {
  const std::array<int64_t, 2> none = {0, 0};
  size_ = params.Pair("size", none, 1, kMaxLayerExtent);
  factor_ = params.Pair("factor", none, 1, kMaxUpsampleFactor);
  if (size_[0] == 0 && factor_[0] == 0) params.Fail("factor", "give the factor or the size");
  if (size_[0] != 0 && factor_[0] != 0)
    params.Fail("size", "give the factor or the size, not both");
  if (factor_[0] == 0) factor_ = {1, 1};  // until Reshape derives it from the size
  const std::string mode = params.Choice("mode", {"nearest", "bilinear"}, "nearest");
  bilinear_ = mode == "bilinear";
  align_corners_ = params.Bool("align_corners", false);
  if (!bilinear_ && align_corners_) params.Fail("align_corners", "applies to mode: bilinear only");
}

Status UpsampleLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  if (size_[0] != 0) {
    if (size_[0] % in.h() != 0 || size_[1] % in.w() != 0) {
      return InvalidArgument("size " + std::to_string(size_[0]) + "x" + std::to_string(size_[1]) +
                             " is not a whole multiple of the input's " + std::to_string(in.h()) +
                             "x" + std::to_string(in.w()) +
                             " (upsample scales by integer factors)");
    }
    factor_ = {size_[0] / in.h(), size_[1] / in.w()};
  }
  *outputs = {Shape(in.n(), in.c(), in.h() * factor_[0], in.w() * factor_[1])};
  return Status::Ok();
}

// Nearest copies; bilinear weighs four inputs per output (forward) and
// spreads each gradient over four inputs (backward).
LayerWork UpsampleLayer::work(Pass pass, const std::vector<Shape>& inputs,
                              const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs), out = TotalElements(outputs);
  constexpr double kBilinearFlops = 7;
  LayerWork w;
  w.flops = bilinear_ ? out * kBilinearFlops : 0;
  w.bytes = sizeof(float) * (in + out);
  return w;
}

}  // namespace spill
