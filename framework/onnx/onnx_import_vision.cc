// The ONNX importer's conversions of the operators mobile and modern
// networks add (MobileNet, EfficientNet, ShuffleNet, RegNet-Y, ConvNeXt,
// encoder-decoders): clipped and gated activations, products with
// per-channel values, channels-last views, channel slices and shuffles,
// spatial means, upsampling and transposed convolutions. Each checks that
// spill's layer computes exactly what ONNX defines before it writes the
// layer; the chains PyTorch writes for one function are recognized in
// onnx_import_patterns.cc.
#include <algorithm>
#include <cmath>

#include "framework/config/layer_params.h"
#include "framework/onnx/onnx_importer.h"
#include "framework/onnx/onnx_shape_folding.h"

namespace spill {
namespace onnx_import {
namespace {

int64_t NormalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace

StatusOr<bool> Importer::ConvertVision(int node) {
  const std::string& op = g_.graph().node(node).op_type();
  Status status;
  if (op == "Clip") {
    status = Clip(node);
  } else if (op == "HardSigmoid" || op == "HardSwish") {
    status = HardSigmoid(node);
  } else if (op == "Sigmoid") {
    status = Sigmoid(node);
  } else if (op == "Tanh") {
    status = Elementwise(node, "tanh", "", node);
  } else if (op == "Mul") {
    status = Mul(node);
  } else if (op == "Div" || op == "Sub") {
    SPILL_ASSIGN_OR_RETURN(bool gelu, op == "Div" ? GeluPattern(node) : false);
    if (!gelu) status = DivOrSub(node);
  } else if (op == "Transpose") {
    status = Transpose(node);
  } else if (op == "ReduceMean") {
    status = ReduceMean(node);
  } else if (op == "LayerNormalization") {
    status = LayerNormalization(node);
  } else if (op == "Slice") {
    status = Slice(node);
  } else if (op == "Split") {
    status = Split(node);
  } else if (op == "Resize") {
    status = Resize(node);
  } else if (op == "ConvTranspose") {
    status = ConvTranspose(node);
  } else if (op == "Erf" || op == "Pow" || op == "Sqrt") {
    status = Fail(node, "spill imports " + op + " only within GELU (x (1 + erf(x / sqrt 2)) / 2) " +
                            "and layer norm, and this chain is neither");
  } else if (IsShapeArithmetic(op)) {
    status = Fail(node, "shape arithmetic spill cannot evaluate: spill folds it when it " +
                            std::string("computes with static sizes and the batch alone"));
  } else {
    return false;
  }
  SPILL_RETURN_IF_ERROR(status);
  return true;
}

Status Importer::ProduceValue(int node, int k, Value v) {
  const std::string& out = g_.graph().node(node).output(k);
  std::vector<int64_t> dims;
  if (v.layout == Layout::kSequence) {
    SPILL_ASSIGN_OR_RETURN(dims, SequenceDims(node, out, v.axes));
  } else {
    SPILL_ASSIGN_OR_RETURN(dims, DimsOf(node, out));
  }
  if (dims != v.dims) {
    return Fail(node, "ONNX infers the shape " + List(dims) + " for '" + out + "' where spill " +
                          "computes " + List(v.dims));
  }
  values_[out] = v;
  net_.shapes[v.ref] = v.chw;
  return Status::Ok();
}

Status Importer::Elementwise(int node, const std::string& type, const std::string& attributes,
                             int out_node) {
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  const std::string name = LayerName(node, "");
  Value v = *x;
  v.ref = name;
  Emit(name, type, {x->ref}, attributes);
  return ProduceValue(out_node, 0, v);
}

Status Importer::Clip(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  constexpr float kMaxBound = 1e30f;  // clip's range
  float bound[2] = {-kMaxBound, kMaxBound};
  bool given[2] = {false, false};
  for (int k = 0; k < 2; ++k) {
    if (!HasInput(node, k + 1)) continue;
    given[k] = true;
    if (!ScalarConstant(n.input(k + 1), &bound[k])) {
      return Fail(node, std::string(k == 0 ? "min" : "max") + " must be a constant of one value");
    }
    if (!(std::fabs(bound[k]) <= kMaxBound)) {
      return Fail(node, "bounds must be within [-1e30, 1e30]");
    }
  }
  if (!given[0] && !given[1]) {  // no bounds: the identity
    SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
    values_[n.output(0)] = *x;
    return Status::Ok();
  }
  if (!(bound[0] < bound[1])) return Fail(node, "min must be below max");
  if (given[0] && bound[0] == 0 && given[1] && bound[1] == 6) {
    return Elementwise(node, "relu6", "", node);
  }
  if (given[0] && bound[0] == 0 && !given[1]) return Elementwise(node, "relu", "", node);
  return Elementwise(node, "clip",
                     "min: " + ShortestFloat(bound[0]) + ", max: " + ShortestFloat(bound[1]), node);
}

Status Importer::HardSigmoid(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (n.op_type() == "HardSwish") return Elementwise(node, "hard_swish", "", node);
  const float alpha = AttrFloat(n, "alpha", 0.2f), beta = AttrFloat(n, "beta", 0.5f);
  constexpr float kMaxSlope = 1e3f;  // hard_sigmoid's ranges
  if (!(alpha > 0 && alpha <= kMaxSlope && std::fabs(beta) <= kMaxSlope)) {
    return Fail(node, "alpha must be in (0, 1000] and beta in [-1000, 1000]");
  }
  // x * hard_sigmoid(x) with PyTorch's constants is hard_swish.
  const bool pytorch = std::fabs(alpha - 1.0f / 6) < 1e-7f && beta == 0.5f;
  const int mul = pytorch ? SelfGate(node) : -1;
  if (mul >= 0) {
    fused_.insert(mul);
    return Elementwise(node, "hard_swish", "", mul);
  }
  return Elementwise(node, "hard_sigmoid",
                     "alpha: " + ShortestFloat(alpha) + ", beta: " + ShortestFloat(beta), node);
}

Status Importer::Sigmoid(int node) {
  const int mul = SelfGate(node);  // x * sigmoid(x) is SiLU
  if (mul >= 0) {
    fused_.insert(mul);
    return Elementwise(node, "silu", "", mul);
  }
  return Elementwise(node, "sigmoid", "", node);
}

StatusOr<std::vector<float>> Importer::ChannelConstant(int node, const Value& x,
                                                       const onnx::TensorProto& t) const {
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(t, g_.label));
  const int64_t c = x.chw[0];
  const int64_t rank = static_cast<int64_t>(x.dims.size()) + 1;
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  std::vector<int64_t> varying;  // aligned axes where the constant has more than one value
  const int64_t offset = rank - static_cast<int64_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != 1) varying.push_back(offset + static_cast<int64_t>(i));
  }
  if (offset >= 0 && varying.empty() && values.size() == 1) {
    return std::vector<float>(c, values[0]);
  }
  if (offset >= 0 && varying.size() == 1 && x.ChannelAxis() >= 0 &&
      varying[0] == x.ChannelAxis() + 1 && static_cast<int64_t>(values.size()) == c) {
    return values;
  }
  return Fail(node, "the constant '" + t.name() + "' of shape " + List(dims) +
                        " does not broadcast per channel over " + List(x.dims) +
                        " (after the batch); spill scales and shifts by per-channel or scalar " +
                        "constants");
}

Status Importer::ScaleLayer(int node, const Value& x, const std::vector<float>& gamma,
                            const std::vector<float>* beta, int out_node,
                            const std::string& weight) {
  const int64_t c = x.chw[0];
  const std::string name = LayerName(node, weight);
  net_.params["params/" + name + "/gamma"] = NpyArray::Floats({1, c, 1, 1}, gamma.data());
  if (beta != nullptr) {
    net_.params["params/" + name + "/beta"] = NpyArray::Floats({1, c, 1, 1}, beta->data());
  }
  Emit(name, "scale", {x.ref}, beta != nullptr ? "bias: true" : "");
  Value v = x;
  v.ref = name;
  return ProduceValue(out_node, 0, v);
}

Status Importer::Broadcast(int node, bool multiply, const Value& a, const Value& b) {
  const std::string op = multiply ? "multiplies" : "adds";
  const bool same = a.dims == b.dims && a.chw == b.chw && a.SameView(b);
  const Value& big = a.chw[1] * a.chw[2] >= b.chw[1] * b.chw[2] ? a : b;
  const Value& small = &big == &a ? b : a;
  const bool spread = big.Spatial() && small.Spatial() && small.chw[0] == big.chw[0] &&
                      small.chw[1] == 1 && small.chw[2] == 1;
  if (!same && !spread) {
    return Fail(node, "spill " + op + " tensors of one shape, or an (N, C, H, W) map and " +
                          "(N, C, 1, 1) per-channel values; got " + List(a.dims) + " and " +
                          List(b.dims) + " (after the batch)");
  }
  const std::string name = LayerName(node, "");
  Emit(name, multiply ? "multiply" : (same ? "add" : "broadcast_add"), {a.ref, b.ref}, "");
  Value v = big;
  v.ref = name;
  return ProduceValue(node, 0, v);
}

Status Importer::Mul(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (n.input_size() != 2) return Fail(node, "Mul needs two inputs");
  for (int k = 0; k < 2; ++k) {
    const onnx::TensorProto* c = g_.Constant(n.input(k));
    if (c == nullptr) continue;
    SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 1 - k));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> gamma, ChannelConstant(node, *x, *c));
    // Mul then Add of constants is one scale layer with its bias.
    const int add = OnlyReader(n.output(0), "Add");
    const onnx::TensorProto* shift = add >= 0 ? g_.Constant(OtherInput(add, n.output(0))) : nullptr;
    if (shift == nullptr) return ScaleLayer(node, *x, gamma, nullptr, node, n.input(k));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> beta, ChannelConstant(add, *x, *shift));
    fused_.insert(add);
    return ScaleLayer(node, *x, gamma, &beta, add, n.input(k));
  }
  SPILL_ASSIGN_OR_RETURN(const Value* a, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(const Value* b, In(node, 1));
  return Broadcast(node, true, *a, *b);
}

Status Importer::DivOrSub(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const bool div = n.op_type() == "Div";
  const onnx::TensorProto* c = n.input_size() == 2 ? g_.Constant(n.input(1)) : nullptr;
  if (c == nullptr) {
    return Fail(node, "spill imports " + n.op_type() + " of a tensor by a per-channel or scalar " +
                          "constant (and Div within GELU and layer norm)");
  }
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(std::vector<float> v, ChannelConstant(node, *x, *c));
  std::vector<float> gamma(v.size(), 1.0f), beta(v.size(), 0.0f);
  for (size_t i = 0; i < v.size(); ++i) {
    if (div && !(v[i] != 0 && std::isfinite(1.0f / v[i]))) {
      return Fail(node, "divides by zero (or by a value too small to invert)");
    }
    if (div) gamma[i] = 1.0f / v[i];
    if (!div) beta[i] = -v[i];
  }
  return ScaleLayer(node, *x, gamma, div ? nullptr : &beta, node, "");
}

Status Importer::Transpose(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  const std::vector<int64_t> perm = AttrInts(n, "perm", {});
  Value v = *x;
  if (x->Spatial() && perm == std::vector<int64_t>{0, 2, 3, 1}) {
    v.layout = Layout::kNhwc;
    v.dims = {x->chw[1], x->chw[2], x->chw[0]};
  } else if (x->ChannelsLast() && perm == std::vector<int64_t>{0, 3, 1, 2}) {
    v.layout = Layout::kNchw;
    v.dims = {x->chw[0], x->chw[1], x->chw[2]};
  } else if (x->Partitioned() && perm == std::vector<int64_t>{0, 2, 1, 3}) {  // SwapAxes
    v.swapped = !x->swapped;
    std::swap(v.dims[0], v.dims[1]);
  } else if (x->layout == Layout::kGrouped && perm == std::vector<int64_t>{0, 2, 1, 3, 4}) {
    v.layout = Layout::kGroupedTransposed;
    std::swap(v.dims[0], v.dims[1]);
  } else {
    return Fail(
        node, "perm " + List(perm) + ": spill reads a Transpose only between the " +
                  "channels-first and channels-last views of an image ([0, 2, 3, 1] and " +
                  "[0, 3, 1, 2]), within a channel shuffle, and between MaxViT's window and grid " +
                  "partitions ([0, 2, 1, 3])");
  }
  return ProduceValue(node, 0, v);
}

Status Importer::ReduceMean(int node) {
  SPILL_ASSIGN_OR_RETURN(bool norm, LayerNormPattern(node));
  if (norm) return Status::Ok();
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  const int64_t rank = static_cast<int64_t>(x->dims.size()) + 1;
  std::vector<int64_t> axes = AttrInts(n, "axes", {});
  for (int64_t& a : axes) a = NormalizeAxis(a, rank);
  std::sort(axes.begin(), axes.end());
  const bool keep = AttrInt(n, "keepdims", 1) != 0;
  const bool spatial = (x->Spatial() && axes == std::vector<int64_t>{2, 3}) ||
                       (x->ChannelsLast() && axes == std::vector<int64_t>{1, 2});
  if (!spatial) {
    return Fail(node, "a mean over axes " + List(AttrInts(n, "axes", {})) + " of a tensor of " +
                          "rank " + std::to_string(rank) + ": spill takes means over the " +
                          "spatial axes (a global average pool), and over the channels only " +
                          "within a layer norm");
  }
  const std::string name = LayerName(node, "");
  Emit(name, "global_avg_pool", {x->ref}, "");
  const int64_t c = x->chw[0];
  Value v{name, {c}, {c, 1, 1}, Layout::kNchw};
  if (keep) {
    v.layout = x->layout;
    v.dims = x->Spatial() ? std::vector<int64_t>{c, 1, 1} : std::vector<int64_t>{1, 1, c};
  }
  return ProduceValue(node, 0, v);
}

Status Importer::ChannelSlice(int node, int k, const Value& x, int64_t begin, int64_t end) {
  const std::string& out = g_.graph().node(node).output(k);
  if (begin == 0 && end == x.chw[0]) {  // all of it
    values_[out] = x;
    return Status::Ok();
  }
  const std::string name = LayerName(node, "");
  Emit(name, "slice", {x.ref}, "begin: " + std::to_string(begin) + ", end: " + std::to_string(end));
  Value v = x;
  v.ref = name;
  v.chw[0] = end - begin;
  v.dims[x.ChannelAxis()] = end - begin;
  return ProduceValue(node, k, v);
}

Status Importer::Slice(int node) {
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  std::vector<int64_t> bounds[4];  // starts, ends, axes, steps
  for (int k = 1; k <= 4; ++k) {
    if (!HasInput(node, k)) continue;
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* t, ConstIn(node, k));
    SPILL_ASSIGN_OR_RETURN(bounds[k - 1], OnnxInts(*t, g_.label));
  }
  const int64_t rank = static_cast<int64_t>(x->dims.size()) + 1;
  if (bounds[2].empty()) bounds[2] = {0};
  if (bounds[0].size() != 1 || bounds[1].size() != 1 || bounds[2].size() != 1 ||
      !(bounds[3].empty() || bounds[3] == std::vector<int64_t>{1})) {
    return Fail(node, "spill slices one axis with step 1");
  }
  const int64_t axis = NormalizeAxis(bounds[2][0], rank);
  if (x->ChannelAxis() < 0 || axis != x->ChannelAxis() + 1) {
    return Fail(node, "a slice along axis " + std::to_string(bounds[2][0]) +
                          ": spill slices tensors along their channels only");
  }
  const int64_t c = x->chw[0];
  auto clamp = [c](int64_t v) { return std::max<int64_t>(0, std::min(v < 0 ? v + c : v, c)); };
  const int64_t begin = clamp(bounds[0][0]), end = clamp(bounds[1][0]);
  if (begin >= end) return Fail(node, "the slice is empty");
  return ChannelSlice(node, 0, *x, begin, end);
}

Status Importer::Split(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  const int64_t rank = static_cast<int64_t>(x->dims.size()) + 1;
  const int64_t axis = NormalizeAxis(AttrInt(n, "axis", 0), rank);
  if (x->ChannelAxis() < 0 || axis != x->ChannelAxis() + 1) {
    return Fail(node, "a split along axis " + std::to_string(AttrInt(n, "axis", 0)) +
                          ": spill splits tensors along their channels only");
  }
  const int64_t c = x->chw[0], parts = n.output_size();
  std::vector<int64_t> sizes = AttrInts(n, "split", {});
  if (HasInput(node, 1)) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* t, ConstIn(node, 1));
    SPILL_ASSIGN_OR_RETURN(sizes, OnnxInts(*t, g_.label));
  }
  if (sizes.empty()) {
    if (parts < 1 || c % parts != 0) {
      return Fail(node, std::to_string(parts) + " equal parts of " + std::to_string(c) +
                            " channels: spill splits into whole channels");
    }
    sizes.assign(parts, c / parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s > 0 ? s : c + 1;
  if (static_cast<int64_t>(sizes.size()) != parts || total != c) {
    return Fail(node, "split sizes " + List(sizes) + " must be positive, one per output, and " +
                          "add up to the " + std::to_string(c) + " channels");
  }
  const Value input = *x;
  int64_t begin = 0;
  for (int k = 0; k < n.output_size(); ++k) {
    if (!n.output(k).empty()) {
      SPILL_RETURN_IF_ERROR(ChannelSlice(node, k, input, begin, begin + sizes[k]));
    }
    begin += sizes[k];
  }
  return Status::Ok();
}

Status Importer::Resize(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  if (!x->Spatial()) return Fail(node, "spill resizes (N, C, H, W) tensors");
  SPILL_ASSIGN_OR_RETURN(std::vector<int64_t> out, DimsOf(node, n.output(0)));
  const int64_t h = x->chw[1], w = x->chw[2];
  if (out.size() != 3 || out[0] != x->chw[0]) {
    return Fail(node, "spill resizes the height and width only");
  }
  if (out[1] < h || out[2] < w || out[1] % h != 0 || out[2] % w != 0) {
    return Fail(node, "resizes " + std::to_string(h) + "x" + std::to_string(w) + " to " +
                          std::to_string(out[1]) + "x" + std::to_string(out[2]) +
                          ": spill's upsample enlarges by whole factors, which must divide " +
                          "the output size");
  }
  const int64_t fh = out[1] / h, fw = out[2] / w;
  if (HasInput(node, 2)) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* t, ConstIn(node, 2));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> scales, OnnxFloats(*t, g_.label));
    const std::vector<float> whole = {1, 1, static_cast<float>(fh), static_cast<float>(fw)};
    if (!scales.empty() && scales != whole) {
      return Fail(node, "scales must be whole factors of the height and width, as the output " +
                            std::string("size says"));
    }
  }
  const std::string mode = AttrString(n, "mode", "nearest");
  const std::string ctm = AttrString(n, "coordinate_transformation_mode", "half_pixel");
  const bool half_pixel = ctm == "half_pixel" || ctm == "pytorch_half_pixel";
  std::string attributes = "factor: " + Pair(fh, fw);
  if (mode == "nearest") {
    // Both take input pixel floor(o / factor) at whole factors.
    const std::string rounding = AttrString(n, "nearest_mode", "round_prefer_floor");
    const bool floor =
        (ctm == "asymmetric" && rounding == "floor") ||
        (half_pixel && (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil"));
    if (!floor) {
      return Fail(node, "nearest resizing with coordinate_transformation_mode " + ctm +
                            " and nearest_mode " + rounding + ": spill's nearest upsampling " +
                            "takes input pixel floor(o / factor) (asymmetric with floor, or " +
                            "half_pixel with rounding)");
    }
  } else if (mode == "linear" && (half_pixel || ctm == "align_corners")) {
    attributes += ", mode: bilinear";
    if (ctm == "align_corners") attributes += ", align_corners: true";
  } else {
    return Fail(node, "mode " + mode + " with coordinate_transformation_mode " + ctm +
                          ": spill upsamples nearest, or bilinear with half_pixel or " +
                          "align_corners coordinates");
  }
  const std::string name = LayerName(node, "");
  Emit(name, "upsample", {x->ref}, attributes);
  return ProduceValue(node, 0, Value{name, out, {out[0], out[1], out[2]}, Layout::kNchw});
}

Status Importer::ConvTranspose(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* w, ConstIn(node, 1));
  if (!x->Spatial() || w->dims_size() != 4) {
    return Fail(node, "spill imports 2-D transposed convolutions of (N, C, H, W) tensors");
  }
  const std::string auto_pad = AttrString(n, "auto_pad", "NOTSET");
  if ((auto_pad != "NOTSET" && auto_pad != "VALID") || FindAttribute(n, "output_shape")) {
    return Fail(node, "auto_pad " + auto_pad + " or output_shape: export with explicit pads");
  }
  const std::vector<int64_t> k = AttrInts(n, "kernel_shape", {w->dims(2), w->dims(3)});
  const std::vector<int64_t> s = AttrInts(n, "strides", {1, 1});
  const std::vector<int64_t> d = AttrInts(n, "dilations", {1, 1});
  const std::vector<int64_t> p = AttrInts(n, "pads", {0, 0, 0, 0});
  const std::vector<int64_t> op = AttrInts(n, "output_padding", {0, 0});
  const int64_t groups = AttrInt(n, "group", 1);
  if (k.size() != 2 || s.size() != 2 || d.size() != 2 || p.size() != 4 || op.size() != 2) {
    return Fail(node, "kernel_shape, strides, dilations, output_padding and pads must have " +
                          std::string("2, 2, 2, 2 and 4 values"));
  }
  for (int i = 0; i < 2; ++i) {
    if (s[i] < 1 || s[i] > kMaxLayerStride || d[i] < 1 || d[i] > kMaxLayerStride || p[i] < 0 ||
        p[i + 2] < 0 || p[i] > kMaxLayerStride || op[i] < 0 || op[i] >= s[i]) {
      return Fail(node, "strides and dilations must be in [1, 65536], pads in [0, 65536] and " +
                            std::string("output_padding below the stride"));
    }
    if (p[i] != p[i + 2]) return Fail(node, "asymmetric pads " + List(p) + " are not supported");
    if (k[i] != w->dims(2 + i)) return Fail(node, "kernel_shape does not match the weight");
  }
  if (groups < 1 || x->chw[0] != w->dims(0) || x->chw[0] % groups != 0) {
    return Fail(node, "weight shape and group do not match the input's " +
                          std::to_string(x->chw[0]) + " channels");
  }
  const int64_t filters = w->dims(1) * groups;
  const bool bias = HasInput(node, 2);
  const std::string name = LayerName(node, n.input(1));
  SPILL_RETURN_IF_ERROR(
      Weight(node, name, "weight", *w, {w->dims(0), w->dims(1), w->dims(2), w->dims(3)}));
  if (bias) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* b, ConstIn(node, 2));
    SPILL_RETURN_IF_ERROR(Weight(node, name, "bias", *b, {1, filters, 1, 1}));
  }
  Emit(name, "transposed_convolution", {x->ref},
       "filters: " + std::to_string(filters) + ", kernel: " + Pair(k[0], k[1]) +
           ", stride: " + Pair(s[0], s[1]) + ", pad: " + Pair(p[0], p[1]) +
           ", output_pad: " + Pair(op[0], op[1]) + ", dilation: " + Pair(d[0], d[1]) +
           ", groups: " + std::to_string(groups) + ", bias: " + (bias ? "true" : "false"));
  return Produce(node, name);
}

Status Importer::LayerNormalization(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  SPILL_ASSIGN_OR_RETURN(const Value* x, In(node, 0));
  SPILL_RETURN_IF_ERROR(OnlyFirstOutput(node));
  const int64_t rank = static_cast<int64_t>(x->dims.size()) + 1;
  const int64_t axis = NormalizeAxis(AttrInt(n, "axis", -1), rank);
  // ONNX normalizes over axes [axis, rank): the channels alone when they
  // come last, or when the planes are single pixels.
  const bool pixel = x->ChannelsLast() || x->Partitioned() || x->dims.size() == 1 ||
                     (x->Spatial() && x->chw[1] == 1 && x->chw[2] == 1) ||
                     (x->layout == Layout::kSequence && x->ChannelAxis() >= 0);
  if (!pixel || axis != x->ChannelAxis() + 1 || axis != rank - 1) {
    return Fail(node, "a layer norm over axes " + std::to_string(axis) + " to " +
                          std::to_string(rank - 1) + " of " + List(x->dims) +
                          " (after the batch): spill's layer_norm normalizes each pixel over " +
                          "its channels (the last axis of a channels-last view)");
  }
  const float eps = AttrFloat(n, "epsilon", 1e-5f);
  if (!(eps > 0 && eps <= 1)) return Fail(node, "epsilon must be in (0, 1]");
  const int64_t c = x->chw[0];
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* scale, ConstIn(node, 1));
  SPILL_ASSIGN_OR_RETURN(std::vector<float> gamma, ChannelConstant(node, *x, *scale));
  std::vector<float> beta(c, 0.0f);
  if (HasInput(node, 2)) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* b, ConstIn(node, 2));
    SPILL_ASSIGN_OR_RETURN(beta, ChannelConstant(node, *x, *b));
  }
  const std::string name = LayerName(node, n.input(1));
  net_.params["params/" + name + "/gamma"] = NpyArray::Floats({1, c, 1, 1}, gamma.data());
  net_.params["params/" + name + "/beta"] = NpyArray::Floats({1, c, 1, 1}, beta.data());
  Emit(name, "layer_norm", {x->ref}, "eps: " + ShortestFloat(eps));
  Value v = *x;
  v.ref = name;
  return ProduceValue(node, 0, v);
}

Status Importer::ChannelsLastMatMul(int node, const Value& x, const onnx::TensorProto& w) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const int64_t c = x.chw[0];
  if (w.dims_size() != 2 || w.dims(0) != c) {
    return Fail(node,
                "the weight's shape does not match the input's " + std::to_string(c) + " channels");
  }
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(w, g_.label));
  int out_node = node;
  const int add = OnlyReader(n.output(0), "Add");
  const onnx::TensorProto* b = add >= 0 ? g_.Constant(OtherInput(add, n.output(0))) : nullptr;
  if (b != nullptr) {
    fused_.insert(add);
    out_node = add;
  }
  return SequenceLinear(node, x, values, w.dims(1), b, out_node, n.input(1));
}

}  // namespace onnx_import
}  // namespace spill
