// The ONNX importer's operator conversions: one function per operator, each
// checking that spill's layer computes exactly what ONNX defines before it
// writes the layer and its weights.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "framework/config/layer_params.h"
#include "framework/onnx/onnx_importer.h"

namespace spill {
namespace onnx_import {
namespace {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Window attributes of Conv and the pools: 2-D; pads as given, or as
// auto_pad SAME_UPPER / SAME_LOWER computes them for an input of `size`.
struct Window {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::array<int64_t, 4> pads{};  // top, left, bottom, right
};

StatusOr<Window> ReadWindow(const onnx::NodeProto& n, const std::vector<int64_t>& kernel,
                            const std::array<int64_t, 3>& chw, const std::string& where) {
  auto fail = [&](const std::string& m) { return InvalidArgument(where + ": " + m); };
  const std::string auto_pad = AttrString(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    return fail("auto_pad " + auto_pad + " is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  }
  if (kernel.size() != 2) return fail("spill imports 2-D windows only (kernel_shape of rank 2)");
  const std::vector<int64_t> s = AttrInts(n, "strides", {1, 1});
  const std::vector<int64_t> d = AttrInts(n, "dilations", {1, 1});
  std::vector<int64_t> p = AttrInts(n, "pads", {0, 0, 0, 0});
  if (s.size() != 2 || d.size() != 2 || p.size() != 4) {
    return fail("strides, dilations and pads must have 2, 2 and 4 values");
  }
  Window w{kernel[0], kernel[1], s[0], s[1], d[0], d[1], {p[0], p[1], p[2], p[3]}};
  for (int64_t v : {w.kh, w.kw, w.sh, w.sw, w.dh, w.dw}) {
    if (v < 1 || v > kMaxLayerExtent) {
      return fail("kernel, strides and dilations must be in [1, " +
                  std::to_string(kMaxLayerExtent) + "]");
    }
  }
  for (int64_t v : w.pads) {
    if (v < 0 || v > kMaxLayerStride) {
      return fail("pads must be in [0, " + std::to_string(kMaxLayerStride) + "]");
    }
  }
  if (auto_pad == "VALID") w.pads = {0, 0, 0, 0};
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The output is ceil(in / stride); the padding it needs goes to the end
    // (UPPER) or the beginning (LOWER) when odd.
    const int64_t size[2] = {chw[1], chw[2]}, stride[2] = {w.sh, w.sw};
    const int64_t extent[2] = {(w.kh - 1) * w.dh + 1, (w.kw - 1) * w.dw + 1};
    for (int i = 0; i < 2; ++i) {
      const int64_t out = (size[i] + stride[i] - 1) / stride[i];
      const int64_t total = std::max<int64_t>((out - 1) * stride[i] + extent[i] - size[i], 0);
      const int64_t small = total / 2, large = total - small;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : large;
      w.pads[i + 2] = auto_pad == "SAME_UPPER" ? large : small;
    }
  }
  return w;
}

}  // namespace

std::string Importer::AsymmetricPad(const std::string& layer, const Value& x,
                                    std::array<int64_t, 4>* pads, float value) {
  std::array<int64_t, 4>& p = *pads;
  if (p[0] == p[2] && p[1] == p[3]) return x.ref;
  const int64_t h = std::min(p[0], p[2]), w = std::min(p[1], p[3]);
  const std::array<int64_t, 4> excess = {p[0] - h, p[1] - w, p[2] - h, p[3] - w};
  p = {h, w, h, w};
  std::string name = layer + ".pad";
  for (int k = 2; names_.count(name); ++k) name = layer + ".pad_" + std::to_string(k);
  names_.insert(name);
  Emit(name, "pad", {x.ref},
       "pad: [" + std::to_string(excess[0]) + ", " + std::to_string(excess[1]) + ", " +
           std::to_string(excess[2]) + ", " + std::to_string(excess[3]) +
           "], value: " + ShortestFloat(value));
  net_.shapes[name] = {x.chw[0], x.chw[1] + excess[0] + excess[2],
                       x.chw[2] + excess[1] + excess[3]};
  return name;
}

Status Importer::Conv(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* w, ConstIn(node, 1));
  if (!x->Spatial() || w->dims_size() != 4) {
    return Fail(node, "spill imports 2-D convolutions of (N, C, H, W) tensors");
  }
  SPILL_ASSIGN_OR_RETURN(
      Window win, ReadWindow(n, AttrInts(n, "kernel_shape", {w->dims(2), w->dims(3)}), x->chw,
                             g_.label + ": " + g_.Where(node)));
  const int64_t groups = AttrInt(n, "group", 1);
  const int64_t filters = w->dims(0);
  if (groups < 1 || x->chw[0] % groups != 0 || filters % groups != 0 ||
      w->dims(1) != x->chw[0] / groups || win.kh != w->dims(2) || win.kw != w->dims(3)) {
    return Fail(node, "weight shape and group do not match the input's " +
                          std::to_string(x->chw[0]) + " channels");
  }
  const bool bias = HasInput(node, 2);
  const std::string name = LayerName(node, n.input(1));
  SPILL_RETURN_IF_ERROR(
      Weight(node, name, "weight", *w, {filters, w->dims(1), w->dims(2), w->dims(3)}));
  if (bias) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* b, ConstIn(node, 2));
    SPILL_RETURN_IF_ERROR(Weight(node, name, "bias", *b, {1, filters, 1, 1}));
  }
  const std::string input = AsymmetricPad(name, *x, &win.pads, 0.0f);
  Emit(name, "convolution", {input},
       "filters: " + std::to_string(filters) + ", kernel: " + Pair(win.kh, win.kw) +
           ", stride: " + Pair(win.sh, win.sw) + ", pad: " + Pair(win.pads[0], win.pads[1]) +
           ", dilation: " + Pair(win.dh, win.dw) + ", groups: " + std::to_string(groups) +
           ", bias: " + (bias ? "true" : "false"));
  return Produce(node, name);
}

Status Importer::BatchNorm(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  if (!x->Channels()) return Fail(node, "spill normalizes (N, C, H, W) or (N, C) tensors");
  if (AttrInt(n, "training_mode", 0) != 0) {
    return Fail(node, "training_mode is set; export the model in eval mode (model.eval())");
  }
  SPILL_RETURN_IF_ERROR(OnlyFirstOutput(node));
  const onnx::TensorProto* t[4];
  for (int k = 0; k < 4; ++k) {
    SPILL_ASSIGN_OR_RETURN(t[k], ConstIn(node, k + 1));
  }
  const std::string name = LayerName(node, n.input(1));
  const char* params[4] = {"gamma", "beta", "running_mean", "running_var"};
  for (int k = 0; k < 4; ++k) {
    SPILL_RETURN_IF_ERROR(Weight(node, name, params[k], *t[k], {1, x->chw[0], 1, 1}));
  }
  // ONNX's momentum weighs the running value, spill's (PyTorch's) the batch.
  const double momentum =
      1.0 - std::strtod(ShortestFloat(AttrFloat(n, "momentum", 0.9f)).c_str(), nullptr);
  char m[32];
  std::snprintf(m, sizeof(m), "%.15g", momentum);
  if (momentum < 0 || momentum > 1) return Fail(node, "momentum must be in [0, 1]");
  const float eps = AttrFloat(n, "epsilon", 1e-5f);
  if (!(eps > 0 && eps <= 1)) return Fail(node, "epsilon must be in (0, 1]");
  Emit(name, "batch_norm", {x->ref},
       "eps: " + ShortestFloat(eps) + ", momentum: " + std::string(m));
  return Produce(node, name, x);
}

Status Importer::Activation(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  std::string attributes;
  if (n.op_type() == "LeakyRelu") {
    constexpr float kMaxSlope = 1e3f;  // relu's negative_slope range
    const float alpha = AttrFloat(n, "alpha", 0.01f);
    if (!(alpha >= 0 && alpha <= kMaxSlope)) {
      return Fail(node, "alpha " + ShortestFloat(alpha) + " is outside spill's [0, 1000]");
    }
    attributes = "negative_slope: " + ShortestFloat(alpha);
  }
  const std::string name = LayerName(node, "");
  Emit(name, "relu", {x->ref}, attributes);
  return Produce(node, name, x);
}

Status Importer::Pool(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const bool max = n.op_type() == "MaxPool";
  SPILL_RETURN_IF_ERROR(OnlyFirstOutput(node));
  PendingPad pad;
  auto pending = pads_.find(HasInput(node, 0) ? n.input(0) : "");
  if (pending != pads_.end()) pad = pending->second;
  const Value* x = nullptr;
  if (!pad.source.empty()) {
    x = &values_.at(pad.source);
  } else {
    SPILL_ASSIGN_OR_RETURN(x, In(node, 0));
  }
  if (!x->Spatial()) return Fail(node, "spill pools (N, C, H, W) tensors");
  SPILL_ASSIGN_OR_RETURN(Window w, ReadWindow(n, AttrInts(n, "kernel_shape", {}), x->chw,
                                              g_.label + ": " + g_.Where(node)));
  if (w.dh != 1 || w.dw != 1) return Fail(node, "dilated pooling is not supported");
  if (AttrInt(n, "storage_order", 0) != 0) return Fail(node, "storage_order must be 0");
  bool include_pad = AttrInt(n, "count_include_pad", 0) != 0;
  if (!pad.source.empty()) {
    if (w.pads != std::array<int64_t, 4>{}) return Fail(node, "a Pad before a padded AveragePool");
    w.pads = {pad.h, pad.w, pad.h, pad.w};
    include_pad = true;  // the padding's zeros count, as the explicit Pad made them
  }
  const bool symmetric = w.pads[0] == w.pads[2] && w.pads[1] == w.pads[3];
  if (!max && !include_pad && !symmetric) {
    return Fail(node, "asymmetric pads that do not count (count_include_pad 0) are not " +
                          std::string("supported"));
  }
  // Max pooling ignores its padding: the excess side is padded below any value.
  constexpr float kBelowAnyValue = -3.4e38f;
  const std::string name = LayerName(node, "");
  const std::string input = AsymmetricPad(name, *x, &w.pads, max ? kBelowAnyValue : 0.0f);
  if (2 * w.pads[0] > w.kh || 2 * w.pads[1] > w.kw) {
    return Fail(node, "pads must be at most half the kernel");
  }
  std::string attributes = "kernel: " + Pair(w.kh, w.kw) + ", stride: " + Pair(w.sh, w.sw) +
                           ", pad: " + Pair(w.pads[0], w.pads[1]) +
                           ", ceil_mode: " + (AttrInt(n, "ceil_mode", 0) ? "true" : "false");
  if (!max) attributes += std::string(", count_include_pad: ") + (include_pad ? "true" : "false");
  Emit(name, max ? "max_pool" : "avg_pool", {input}, attributes);
  return Produce(node, name);
}

Status Importer::GlobalPool(int node) {
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  if (!x->Spatial()) return Fail(node, "spill pools (N, C, H, W) tensors");
  const std::string name = LayerName(node, "");
  Emit(name, "global_avg_pool", {x->ref}, "");
  return Produce(node, name);
}

// A fully connected layer from (N, K) x weight + bias; `transposed`: the
// weight is stored (K, N) and spill's is (N, K).
Status Importer::FullyConnected(int node, const Value& x, const onnx::TensorProto& w,
                                bool transposed, const onnx::TensorProto* bias, int out_node) {
  if (x.dims.size() != 1 || w.dims_size() != 2) {
    return Fail(node, "spill imports matrix products of a (N, K) value and a 2-D weight");
  }
  const int64_t k = x.dims[0], outputs = transposed ? w.dims(1) : w.dims(0);
  if ((transposed ? w.dims(0) : w.dims(1)) != k) {
    return Fail(node,
                "the weight's shape does not match the input's " + std::to_string(k) + " features");
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(w, g_.label));
  if (transposed) {
    std::vector<float> t(values.size());
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t o = 0; o < outputs; ++o) t[o * k + i] = values[i * outputs + o];
    }
    values.swap(t);
  }
  const std::string name = LayerName(node, g_.graph().node(node).input(1));
  net_.params["params/" + name + "/weight"] = NpyArray::Floats({outputs, k, 1, 1}, values.data());
  if (bias != nullptr) {
    SPILL_ASSIGN_OR_RETURN(std::vector<float> b, OnnxFloats(*bias, g_.label));
    if (b.size() == 1) b.assign(outputs, b[0]);
    if (static_cast<int64_t>(b.size()) != outputs) {
      return Fail(out_node, "the bias '" + bias->name() + "' must have " + std::to_string(outputs) +
                                " values");
    }
    net_.params["params/" + name + "/bias"] = NpyArray::Floats({1, outputs, 1, 1}, b.data());
  }
  Emit(name, "fully_connected", {x.ref},
       "outputs: " + std::to_string(outputs) + ", bias: " + (bias ? "true" : "false"));
  return Produce(out_node, name);
}

Status Importer::Gemm(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (AttrFloat(n, "alpha", 1.0f) != 1.0f || AttrFloat(n, "beta", 1.0f) != 1.0f ||
      AttrInt(n, "transA", 0) != 0) {
    return Fail(node, "spill imports Gemm with alpha = beta = 1 and transA = 0");
  }
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* w, ConstIn(node, 1));
  const onnx::TensorProto* bias = nullptr;
  if (HasInput(node, 2)) {
    SPILL_ASSIGN_OR_RETURN(bias, ConstIn(node, 2));
  }
  return FullyConnected(node, *x, *w, AttrInt(n, "transB", 0) == 0, bias, node);
}

// MatMul by a constant, and the Add of a constant bias right after it.
Status Importer::MatMul(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* w, ConstIn(node, 1));
  if (x->ChannelsLast() || x->Partitioned()) return ChannelsLastMatMul(node, *x, *w);
  const onnx::TensorProto* bias = nullptr;
  int out_node = node;
  const int add = SoleConsumer(n.output(0));
  if (add >= 0 && g_.graph().node(add).op_type() == "Add" &&
      g_.graph().node(add).input_size() == 2) {
    const onnx::NodeProto& a = g_.graph().node(add);
    const std::string& other = a.input(0) == n.output(0) ? a.input(1) : a.input(0);
    bias = g_.Constant(other);
    if (bias != nullptr) {
      fused_.insert(add);
      out_node = add;
    }
  }
  return FullyConnected(node, *x, *w, /*transposed=*/true, bias, out_node);
}

// Two computed values (of one shape, or a map and per-channel values), or a
// value and a per-channel constant (a scale layer's bias).
Status Importer::Add(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (n.input_size() != 2) return Fail(node, "Add needs two inputs");
  for (int k = 0; k < 2; ++k) {
    const onnx::TensorProto* c = g_.Constant(n.input(k));
    if (c == nullptr) continue;
    SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 1 - k));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> beta, ChannelConstant(node, *x, *c));
    return ScaleLayer(node, *x, std::vector<float>(beta.size(), 1.0f), &beta, node, "");
  }
  SPILL_ASSIGN_OR_RETURN(const Value* a, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(const Value* b, In(node, 1));
  return Broadcast(node, false, *a, *b);
}

// Along the channels of spatial, channels-last or N x C values; flattened
// values join as their tensors' channels do when they share H and W (each
// image's values of one input stay contiguous).
Status Importer::Concat(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  std::vector<std::string> refs;
  std::vector<Value> in;
  for (int k = 0; k < n.input_size(); ++k) {
    SPILL_ASSIGN_OR_RETURN(const Value* v, In(node, k));
    in.push_back(*v);
    refs.push_back(v->ref);
  }
  const Value& first = in[0];
  const int64_t rank = static_cast<int64_t>(first.dims.size()) + 1;
  int64_t axis = AttrInt(n, "axis", 1);
  if (axis < 0) axis += rank;
  const bool flat = first.dims.size() == 1 && first.layout == Layout::kNchw;
  Value out = first;
  out.chw[0] = 0;
  for (const Value& v : in) {
    const bool joins = v.SameView(first) && v.dims.size() == first.dims.size() &&
                       v.chw[1] == first.chw[1] && v.chw[2] == first.chw[2] &&
                       (flat ? axis == 1 : (v.ChannelAxis() >= 0 && axis == v.ChannelAxis() + 1));
    if (!joins) {
      return Fail(node, "a Concat along axis " + std::to_string(AttrInt(n, "axis", 1)) +
                            ": spill concatenates along the channels (axis 1, or the last axis " +
                            "of channels-last views) of tensors of one height and width");
    }
    out.chw[0] += v.chw[0];
  }
  const std::string name = LayerName(node, "");
  Emit(name, "concat", refs, "");
  out.ref = name;
  if (flat) {
    out.dims = {out.chw[0] * out.chw[1] * out.chw[2]};
  } else {
    out.dims[first.ChannelAxis()] = out.chw[0];
  }
  return ProduceValue(node, 0, out);
}

Status Importer::Dropout(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_RETURN_IF_ERROR(OnlyFirstOutput(node));
  float ratio = AttrFloat(n, "ratio", 0.5f);
  if (HasInput(node, 1)) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* r, ConstIn(node, 1));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> v, OnnxFloats(*r, g_.label));
    if (v.size() != 1) return Fail(node, "ratio must be one value");
    ratio = v[0];
  }
  if (HasInput(node, 2)) {
    return Fail(node, "training_mode is given; export the model in eval mode (model.eval())");
  }
  if (!(ratio >= 0 && ratio < 1)) return Fail(node, "ratio must be in [0, 1)");
  const std::string name = LayerName(node, "");
  Emit(name, "dropout", {x->ref}, "ratio: " + ShortestFloat(ratio));
  return Produce(node, name, x);
}

Status Importer::Lrn(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  if (!x->Spatial()) return Fail(node, "spill normalizes (N, C, H, W) tensors");
  const int64_t size = AttrInt(n, "size", 0);
  if (size < 1 || size % 2 == 0) {
    return Fail(node, "size " + std::to_string(size) +
                          ": spill's window is centred, so the size must be odd and positive");
  }
  const float alpha = AttrFloat(n, "alpha", 1e-4f), beta = AttrFloat(n, "beta", 0.75f),
              bias = AttrFloat(n, "bias", 1.0f);
  constexpr float kMaxAlphaBeta = 1e3f, kMaxBias = 1e6f;  // lrn's ranges
  if (!(alpha >= 0 && alpha <= kMaxAlphaBeta && beta >= 0 && beta <= kMaxAlphaBeta && bias > 0 &&
        bias <= kMaxBias)) {
    return Fail(node, "alpha, beta or bias outside spill's ranges");
  }
  const std::string name = LayerName(node, "");
  Emit(name, "lrn", {x->ref},
       "size: " + std::to_string(size) + ", alpha: " + ShortestFloat(alpha) +
           ", beta: " + ShortestFloat(beta) + ", k: " + ShortestFloat(bias));
  return Produce(node, name);
}

// A constant Pad of H and W: read through when it pads nothing; folded into
// the AveragePool that alone reads it when it pads zeros on H and W alike on
// both sides; otherwise a pad layer.
Status Importer::Pad(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  if (AttrString(n, "mode", "constant") != "constant") {
    return Fail(node, "spill imports constant padding only");
  }
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* p, ConstIn(node, 1));
  SPILL_ASSIGN_OR_RETURN(std::vector<int64_t> pads, OnnxInts(*p, g_.label));
  float value = 0;
  if (HasInput(node, 2)) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* c, ConstIn(node, 2));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(*c, g_.label));
    constexpr float kMaxValue = 3.4e38f;  // the pad layer's range
    if (values.size() != 1 || !(std::fabs(values[0]) <= kMaxValue)) {
      return Fail(node, "the pad value must be one finite value");
    }
    value = values[0];
  }
  bool zero = true;
  for (int64_t v : pads) zero = zero && v == 0;
  if (zero) {  // in any layout (Swin pads its channels-last maps to even sizes)
    values_[n.output(0)] = *x;
    return Status::Ok();
  }
  bool in_range = x->Spatial() && pads.size() == 8 && !pads[0] && !pads[1] && !pads[4] && !pads[5];
  for (int64_t v : pads) in_range = in_range && v >= -kMaxLayerStride && v <= kMaxLayerStride;
  if (!in_range) {
    return Fail(node,
                "spill pads (and, by negative amounts, crops) the height and width of (N, C, H, "
                "W) tensors, by amounts in [-" +
                    std::to_string(kMaxLayerStride) + ", " + std::to_string(kMaxLayerStride) + "]");
  }
  const int consumer = SoleConsumer(n.output(0));
  if (value == 0 && pads[2] == pads[6] && pads[3] == pads[7] && pads[2] >= 0 && pads[3] >= 0 &&
      consumer >= 0 && g_.graph().node(consumer).op_type() == "AveragePool") {
    pads_[n.output(0)] = PendingPad{n.input(0), pads[2], pads[3]};
    return Status::Ok();
  }
  const std::string name = LayerName(node, "");
  Emit(name, "pad", {x->ref},
       "pad: [" + std::to_string(pads[2]) + ", " + std::to_string(pads[3]) + ", " +
           std::to_string(pads[6]) + ", " + std::to_string(pads[7]) +
           "], value: " + ShortestFloat(value));
  return Produce(node, name);
}

// Flatten, the 2-D Reshape before a classifier, Identity and a zero Pad
// change no byte of the tensor: the value is the input's spill tensor.
Status Importer::ReadThrough(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(std::vector<int64_t> dims, DimsOf(node, n.output(0)));
  const std::string& op = n.op_type();
  if (op == "Flatten" && AttrInt(n, "axis", 1) != 1) {
    return Fail(node, "spill flattens from axis 1 only");
  }
  if (op == "Reshape" && (dims.size() != 1 || dims[0] != Product(x->dims))) {
    return Fail(node, "spill imports only the reshape to (N, features) before a classifier");
  }
  if (dims.size() != x->dims.size() && !(dims.size() == 1 && dims[0] == Product(x->dims))) {
    return Fail(node, "changes the shape in a way spill does not import");
  }
  if (x->layout != Layout::kNchw && !(x->chw[1] == 1 && x->chw[2] == 1)) {
    return Fail(node, "flattens a channels-last view of an image; spill flattens channels-" +
                          std::string("first tensors"));
  }
  Value v = *x;
  v.dims = dims;
  values_[n.output(0)] = v;
  return Status::Ok();
}

int Importer::FindOutputSoftmax() const {
  const onnx::GraphProto& g = g_.graph();
  if (g.output_size() != 1) return -1;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const bool softmax = n.op_type() == "Softmax" || n.op_type() == "LogSoftmax";
    if (softmax && n.output_size() == 1 && n.output(0) == g.output(0).name()) return i;
  }
  return -1;
}

// Read through: the loss takes the scores, its input. ONNX's Softmax before
// opset 13 flattens the axes from `axis` on, so there only the last axis is
// a softmax over classes alone.
Status Importer::OutputSoftmax(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  const int rank = static_cast<int>(x->dims.size()) + 1;
  const bool flattens = g_.opset < 13;
  int axis = static_cast<int>(AttrInt(n, "axis", flattens ? 1 : -1));
  if (axis < 0) axis += rank;
  // The loss reads the classes where spill keeps the channels.
  const int channels = x->ChannelAxis();
  const int classes = channels < 0 ? -1 : channels + 1;  // the batch's axis counted
  if (classes < 0) {
    return Fail(node, "ends the graph on scores of a layout spill's loss does not read (" +
                          std::to_string(rank) + " axes)");
  }
  if (axis != classes || (flattens && axis != rank - 1)) {
    return Fail(node, "is taken over axis " + std::to_string(axis) +
                          (flattens ? " (flattening the axes after it, as before opset 13)" : "") +
                          "; spill's loss takes it over the classes alone, axis " +
                          std::to_string(classes));
  }
  values_[n.output(0)] = *x;
  return Status::Ok();
}

// A Reshape: the two of a channel shuffle ((C, H, W) to (g, C / g, H, W),
// and after the Transpose back), else a flattening read through.
Status Importer::Reshape(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(std::vector<int64_t> dims, DimsOf(node, n.output(0)));
  const std::array<int64_t, 3>& chw = x->chw;
  if (x->Spatial() && dims.size() == 4 && dims[0] > 1 && dims[0] * dims[1] == chw[0] &&
      dims[2] == chw[1] && dims[3] == chw[2]) {
    Value v = *x;
    v.layout = Layout::kGrouped;
    v.dims = dims;
    values_[n.output(0)] = v;
    return Status::Ok();
  }
  if (x->layout == Layout::kGroupedTransposed) {
    if (dims != std::vector<int64_t>{chw[0], chw[1], chw[2]}) {
      return Fail(node, "a channel shuffle must end with the reshape back to (C, H, W)");
    }
    const std::string name = LayerName(node, "");
    Emit(name, "channel_shuffle", {x->ref}, "groups: " + std::to_string(x->dims[1]));
    return ProduceValue(node, 0, Value{name, dims, chw, Layout::kNchw});
  }
  if (x->layout == Layout::kGrouped) {
    return Fail(node, "spill reads a reshape to (groups, C / groups, H, W) only as the start " +
                          std::string("of a channel shuffle (then Transpose [0, 2, 1, 3, 4])"));
  }
  return ReadThrough(node);
}

}  // namespace onnx_import
}  // namespace spill
