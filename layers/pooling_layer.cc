#include "layers/pooling_layer.h"

#include <algorithm>

#include "framework/config/layer_params.h"

namespace spill {

void PoolGeometry::Window(int64_t oh, int64_t ow, int64_t* h0, int64_t* h1, int64_t* w0,
                          int64_t* w1, int64_t* area) const {
  int64_t hs = oh * stride[0] - pad[0], ws = ow * stride[1] - pad[1];
  int64_t he = std::min(hs + kernel[0], height + pad[0]);
  int64_t we = std::min(ws + kernel[1], width + pad[1]);
  int64_t padded_area = (he - hs) * (we - ws);
  *h0 = std::max<int64_t>(hs, 0);
  *w0 = std::max<int64_t>(ws, 0);
  *h1 = std::min(he, height);
  *w1 = std::min(we, width);
  *area = count_include_pad ? padded_area : (*h1 - *h0) * (*w1 - *w0);
}

PoolingLayer::PoolingLayer(LayerParams& params, Kind kind) : kind_(kind) {
  if (kind == Kind::kGlobalAverage) return;
  geom_.kernel = params.RequiredPair("kernel", 1, kMaxLayerExtent);
  geom_.stride = params.Pair(
      "stride",
      {std::min(geom_.kernel[0], kMaxLayerStride), std::min(geom_.kernel[1], kMaxLayerStride)}, 1,
      kMaxLayerStride);
  geom_.pad = params.Pair("pad", {0, 0}, 0, kMaxLayerStride);
  ceil_mode_ = params.Bool("ceil_mode", false);
  if (kind == Kind::kAverage) geom_.count_include_pad = params.Bool("count_include_pad", true);
  for (int i = 0; i < 2; ++i) {
    if (geom_.pad[i] * 2 > geom_.kernel[i]) {
      params.Fail("pad", "must be between 0 and half the kernel");
    }
  }
}

Status PoolingLayer::Reshape(const std::vector<Shape>& inputs, std::vector<Shape>* outputs) {
  const Shape& in = inputs[0];
  geom_.batch = in.n();
  geom_.channels = in.c();
  geom_.height = in.h();
  geom_.width = in.w();
  if (kind_ == Kind::kGlobalAverage) {
    geom_.kernel = {in.h(), in.w()};
    geom_.stride = {1, 1};
    geom_.pad = {0, 0};
  }
  int64_t size[2] = {in.h(), in.w()}, out[2];
  for (int i = 0; i < 2; ++i) {
    int64_t span = size[i] + 2 * geom_.pad[i] - geom_.kernel[i];
    if (span < 0) {
      return InvalidArgument("kernel " + std::to_string(geom_.kernel[0]) + "x" +
                             std::to_string(geom_.kernel[1]) + " is larger than the padded input " +
                             std::to_string(in.h()) + "x" + std::to_string(in.w()));
    }
    out[i] =
        (ceil_mode_ ? (span + geom_.stride[i] - 1) / geom_.stride[i] : span / geom_.stride[i]) + 1;
    // A last window must start inside the input or its left padding.
    if (ceil_mode_ && (out[i] - 1) * geom_.stride[i] >= size[i] + geom_.pad[i]) --out[i];
  }
  geom_.out_height = out[0];
  geom_.out_width = out[1];
  *outputs = {Shape(in.n(), in.c(), out[0], out[1])};
  return Status::Ok();
}

// One operation per window element of each output; max pooling's backward
// reads input and output again to find the maxima.
LayerWork PoolingLayer::work(Pass pass, const std::vector<Shape>& inputs,
                             const std::vector<Shape>& outputs) const {
  const double in = TotalElements(inputs), out = TotalElements(outputs);
  const double window = kind_ == Kind::kGlobalAverage
                            ? static_cast<double>(geom_.height * geom_.width)
                            : static_cast<double>(geom_.kernel[0] * geom_.kernel[1]);
  LayerWork w;
  w.flops = out * window;
  if (pass == Pass::kForward) {
    w.bytes = sizeof(float) * (in + out);
  } else {
    w.bytes = sizeof(float) * (kind_ == Kind::kMax ? 2 * in + 2 * out : in + out);
  }
  return w;
}

}  // namespace spill
