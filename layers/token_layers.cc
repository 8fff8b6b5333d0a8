#include "layers/token_layers.h"

#include "framework/config/layer_params.h"

namespace spill {
namespace {

Status RequireSequence(const Shape& x, const char* type) {
  if (x.h() != 1) {
    return InvalidArgument(std::string(type) + " takes a sequence N x C x 1 x T, got " +
                           x.ToString());
  }
  return Status::Ok();
}

}  // namespace

Status ClassTokenLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  SPILL_RETURN_IF_ERROR(RequireSequence(x, "class_token"));
  channels_ = x.c();
  *outputs = {Shape(x.n(), x.c(), 1, x.w() + 1)};
  return Status::Ok();
}

std::vector<ParamSpec> ClassTokenLayer::params() const {
  ParamSpec token{"token", Shape(1, channels_, 1, 1), Initializer::Constant(0)};
  token.decay_mult = 0;
  return {token};
}

TokenLayer::TokenLayer(LayerParams& params)
    : index_(params.Int("index", 0, -kMaxLayerExtent, kMaxLayerExtent - 1)) {}

Status TokenLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& x = inputs[0];
  SPILL_RETURN_IF_ERROR(RequireSequence(x, "token"));
  position_ = index_ < 0 ? x.w() + index_ : index_;
  if (position_ < 0 || position_ >= x.w()) {
    return InvalidArgument("index " + std::to_string(index_) + " is outside the sequence's " +
                           std::to_string(x.w()) + " positions");
  }
  *outputs = {Shape(x.n(), x.c(), 1, 1)};
  return Status::Ok();
}

}  // namespace spill
