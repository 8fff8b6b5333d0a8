#include "layers/transposed_convolution_layer.h"

#include "framework/base/checked_math.h"
#include "framework/config/layer_params.h"

namespace spill {

TransposedConvolutionLayer::TransposedConvolutionLayer(LayerParams& params) {
  out_channels_ = params.RequiredInt("filters", 1, kMaxLayerExtent);
  ReadWindow(params);
  output_pad_ = params.Pair("output_pad", {0, 0}, 0, kMaxLayerStride);
  ReadOptions(params);
  if (out_channels_ % geom_.groups != 0) params.Fail("groups", "must divide filters");
  for (int i = 0; i < 2; ++i) {
    if (output_pad_[i] >= geom_.stride[i]) {
      params.Fail("output_pad", "must be smaller than the stride");
      output_pad_ = {0, 0};
    }
  }
}

Status TransposedConvolutionLayer::Reshape(const std::vector<Shape>& inputs,
                                           std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  if (in.c() % geom_.groups != 0) {
    return InvalidArgument("groups (" + std::to_string(geom_.groups) + ") must divide the " +
                           std::to_string(in.c()) + " input channels");
  }
  const int64_t size[2] = {in.h(), in.w()};
  int64_t out[2];
  // Every term is bounded by the parameters' ranges and the input's checked
  // size, far inside 64 bits.
  for (int i = 0; i < 2; ++i) {
    out[i] = (size[i] - 1) * geom_.stride[i] - 2 * geom_.pad[i] +
             geom_.dilation[i] * (geom_.kernel[i] - 1) + output_pad_[i] + 1;
  }
  if (out[0] < 1 || out[1] < 1) {
    return InvalidArgument("pad " + std::to_string(geom_.pad[0]) + "x" +
                           std::to_string(geom_.pad[1]) + " crops the whole " +
                           std::to_string(in.h()) + "x" + std::to_string(in.w()) + " output away");
  }
  geom_.batch = in.n();
  geom_.channels = out_channels_;
  geom_.height = out[0];
  geom_.width = out[1];
  geom_.filters = in.c();
  geom_.out_height = in.h();
  geom_.out_width = in.w();
  int64_t unfolded = 0, weights = 0;
  const int64_t kh = geom_.kernel[0], kw = geom_.kernel[1];
  if (!CheckedProduct({in.n(), geom_.channels_per_group(), kh, kw, in.h(), in.w()}, &unfolded) ||
      unfolded > kMaxTensorElements ||
      !CheckedProduct({in.c(), geom_.channels_per_group(), kh, kw}, &weights) ||
      weights > kMaxTensorElements ||
      !CheckedProduct({in.n(), out_channels_, out[0], out[1]}, &unfolded) ||
      unfolded > kMaxTensorElements) {
    return OutOfMemory("the transposed convolution's weights, output or unfolded columns would " +
                       std::string("exceed ") + std::to_string(kMaxTensorElements) + " elements");
  }
  *outputs = {Shape(in.n(), out_channels_, out[0], out[1])};
  return Status::Ok();
}

std::vector<ParamSpec> TransposedConvolutionLayer::params() const {
  const int64_t taps = geom_.kernel[0] * geom_.kernel[1];
  const int64_t fan_in = geom_.filters_per_group() * taps;
  const int64_t fan_out = geom_.channels_per_group() * taps;
  return WeightAndBias(fan_in, fan_out, out_channels_);
}

// The convolution's work with the passes exchanged: a multiply-add per
// weight tap and input element, forward and for each gradient.
LayerWork TransposedConvolutionLayer::work(Pass pass, const std::vector<Shape>& inputs,
                                           const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs);
  return Work(pass, in, TotalElements(outputs), 2.0 * in * static_cast<double>(geom_.col_rows()));
}

}  // namespace spill
