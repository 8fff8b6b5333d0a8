#include "layers/convolution_layer.h"

#include "framework/base/checked_math.h"
#include "framework/config/layer_params.h"

namespace spill {

void ConvolutionBaseLayer::ReadWindow(LayerParams& params) {
  geom_.kernel = params.RequiredPair("kernel", 1, kMaxLayerExtent);
  geom_.stride = params.Pair("stride", {1, 1}, 1, kMaxLayerStride);
  geom_.pad = params.Pair("pad", {0, 0}, 0, kMaxLayerStride);
}

void ConvolutionBaseLayer::ReadOptions(LayerParams& params) {
  geom_.dilation = params.Pair("dilation", {1, 1}, 1, kMaxLayerStride);
  geom_.groups = params.Int("groups", 1, 1, kMaxLayerExtent);
  bias_ = params.Bool("bias", true);
  weight_init_ = params.Choice("weight_init", {"he", "xavier"}, "he");
}

std::vector<ParamSpec> ConvolutionBaseLayer::WeightAndBias(int64_t fan_in, int64_t fan_out,
                                                           int64_t bias_channels) const {
  ParamSpec weight{
      "weight", Shape(geom_.filters, geom_.channels_per_group(), geom_.kernel[0], geom_.kernel[1]),
      weight_init_ == "he" ? Initializer::HeNormal(fan_in)
                           : Initializer::XavierUniform(fan_in, fan_out)};
  std::vector<ParamSpec> specs = {weight};
  if (bias_) {
    ParamSpec bias{"bias", Shape(1, bias_channels, 1, 1), Initializer::Constant(0)};
    bias.decay_mult = 0;
    specs.push_back(bias);
  }
  return specs;
}

LayerWork ConvolutionBaseLayer::Work(Pass pass, double in, double out, double products) const {
  const double weights = static_cast<double>(geom_.filters * geom_.col_rows());
  const double bias = bias_ ? out : 0;
  LayerWork w;
  if (pass == Pass::kForward) {
    w.flops = products + bias;
    w.bytes = sizeof(float) * (in + out + weights);
  } else {
    const bool data_grad = propagate_down(0);
    w.flops = (data_grad ? 2 : 1) * products + bias;
    w.bytes = sizeof(float) * ((data_grad ? 2 : 1) * in + out + 2 * weights);
  }
  return w;
}

ConvolutionLayer::ConvolutionLayer(LayerParams& params) {
  geom_.filters = params.RequiredInt("filters", 1, kMaxLayerExtent);
  ReadWindow(params);
  ReadOptions(params);
  // The ranges above hold even after an error (the defaults are kept), so
  // groups is never 0 here.
  if (geom_.filters % geom_.groups != 0) params.Fail("groups", "must divide filters");
}

Status ConvolutionLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  geom_.batch = in.n();
  geom_.channels = in.c();
  geom_.height = in.h();
  geom_.width = in.w();
  if (geom_.channels % geom_.groups != 0) {
    return InvalidArgument("groups (" + std::to_string(geom_.groups) + ") must divide the " +
                           std::to_string(geom_.channels) + " input channels");
  }
  int64_t out[2];
  int64_t size[2] = {in.h(), in.w()};
  // Sides are bounded by the network's tensor-size check of the layers before
  // (kMaxTensorElements) and kernel, pad and dilation by their ranges, so
  // this arithmetic stays far inside 64 bits.
  for (int i = 0; i < 2; ++i) {
    int64_t extent = geom_.dilation[i] * (geom_.kernel[i] - 1) + 1;
    out[i] = (size[i] + 2 * geom_.pad[i] - extent) / geom_.stride[i] + 1;
    if (size[i] + 2 * geom_.pad[i] < extent) out[i] = 0;
  }
  if (out[0] < 1 || out[1] < 1) {
    return InvalidArgument("kernel " + std::to_string(geom_.kernel[0]) + "x" +
                           std::to_string(geom_.kernel[1]) + " does not fit the padded " +
                           std::to_string(in.h()) + "x" + std::to_string(in.w()) + " input");
  }
  geom_.out_height = out[0];
  geom_.out_width = out[1];
  // The algorithms' workspaces unfold the input (up to C/G * kh * kw rows by
  // OH * OW columns per image): bound it before anyone computes its bytes.
  int64_t unfolded = 0, weights = 0;
  const int64_t per_group = geom_.channels_per_group();
  const int64_t kh = geom_.kernel[0], kw = geom_.kernel[1];
  if (!CheckedProduct({in.n(), per_group, kh, kw, out[0], out[1]}, &unfolded) ||
      unfolded > kMaxTensorElements ||
      !CheckedProduct({geom_.filters, per_group, kh, kw}, &weights) ||
      weights > kMaxTensorElements) {
    return OutOfMemory("the convolution's weights or unfolded input would exceed " +
                       std::to_string(kMaxTensorElements) + " elements");
  }
  *outputs = {Shape(in.n(), geom_.filters, out[0], out[1])};
  return Status::Ok();
}

std::vector<ParamSpec> ConvolutionLayer::params() const {
  const int64_t fan_in = geom_.col_rows();
  const int64_t fan_out = geom_.filters_per_group() * geom_.kernel[0] * geom_.kernel[1];
  return WeightAndBias(fan_in, fan_out, geom_.filters);
}

// Forward: 2*N*K*C/G*R*S*H'*W' (a multiply-add per filter tap and output).
// Backward: the same again for the filter gradient, and again for the data
// gradient where one is wanted.
LayerWork ConvolutionLayer::work(Pass pass, const std::vector<Shape>& inputs,
                                 const std::vector<Shape>& outputs) const {
  const double out = TotalElements(outputs);
  return Work(pass, TotalElements(inputs), out, 2.0 * out * static_cast<double>(geom_.col_rows()));
}

}  // namespace spill
