// The ONNX importer's Swin Transformer (torchvision's swin_t, swin_s,
// swin_b). Its shifted_window_attention exports as
//
//   X (N, H, W, C) -> Pad to multiples of the window w
//     -> torch.roll by -s along H and W (Slice + Concat, each axis)
//     -> Reshape (N, H/w, w, W/w, w, C), Transpose [0 1 3 2 4 5],
//        Reshape (N nW, w w, C)                                 the windows
//     -> MatMul + Add (qkv), Reshape (N nW, T, 3, heads, d),
//        Transpose [2 0 3 1 4], Gather 0, 1, 2                   Q, K, V
//     -> MatMul(Q * d^-0.5, K^T) + B                      B: (1, heads, T, T)
//        [Reshape (N, nW, heads, T, T) + M, Reshape back]  M: the shift's mask
//     -> Softmax, Dropout, MatMul by V
//     -> Transpose [0 2 1 3], Reshape (N nW, T, C), MatMul + Add (proj),
//        Dropout, Reshape (N, H/w, W/w, w, w, C), Transpose [0 1 3 2 4 5],
//        Reshape (N, H, W, C), torch.roll by +s, Slice off the padding
//
// PyTorch folds B = table[index] into a constant and this importer folds M
// (framework/onnx/onnx_data_folding.h), so both arrive as constants. The
// chain is checked node by node against that shape - every permutation,
// window size, shift, scale - and B must be a relative position bias (equal
// entries wherever the relative offset is equal: the table is read back
// from it) and M exactly the mask spill's window_attention derives from the
// shift (0 within a region, -100 across). The projections are per pixel, so
// they commute with the roll and the windows: spill computes them as 1x1
// convolutions on the image, and window_attention does the rest.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "framework/io/npz.h"
#include "framework/onnx/onnx_data_folding.h"
#include "framework/onnx/onnx_importer.h"
#include "framework/onnx/onnx_node_reading.h"
#include "framework/onnx/onnx_windows.h"

namespace spill {
namespace onnx_import {
bool Importer::RollOf(const std::string& value, int64_t axis, std::string* source, int64_t* shift,
                      std::set<int>* nodes) const {
  const int p = Producer(value);
  if (p < 0) return false;
  const onnx::NodeProto& concat = g_.graph().node(p);
  const int64_t rank = Rank(g_, value);
  if (concat.op_type() != "Concat" || concat.input_size() != 2 || rank != 4 ||
      (AttrInt(concat, "axis", 0) + rank) % rank != axis) {
    return false;
  }
  const int first = Producer(InputOf(concat, 0)), second = Producer(InputOf(concat, 1));
  if (first < 0 || second < 0) return false;
  const onnx::NodeProto& a = g_.graph().node(first);
  const onnx::NodeProto& b = g_.graph().node(second);
  auto sa = ReadSlice(g_, a, rank), sb = ReadSlice(g_, b, rank);
  const int64_t extent = DimsOrEmpty(g_, value)[axis];
  if (!sa || !sb || InputOf(a, 0) != InputOf(b, 0) || sa->axis != axis || sb->axis != axis ||
      sa->step != 1 || sb->step != 1 || sa->end != extent || sb->begin != 0 ||
      sb->end != sa->begin || sa->begin <= 0 || sa->begin >= extent) {
    return false;
  }
  *source = InputOf(a, 0);
  *shift = sa->begin;
  nodes->insert({p, first, second});
  return true;
}

bool Importer::RollAfter(const std::string& value, int64_t axis, std::string* out, int64_t* shift,
                         std::set<int>* nodes) const {
  auto readers = g_.consumers.find(value);
  if (readers == g_.consumers.end() || readers->second.size() != 2) return false;
  const int concat = SoleConsumer(OutputOf(g_.graph().node(readers->second[0]), 0));
  if (concat < 0 || g_.graph().node(concat).op_type() != "Concat") return false;
  std::string source;
  if (!RollOf(OutputOf(g_.graph().node(concat), 0), axis, &source, shift, nodes) ||
      source != value) {
    return false;
  }
  *out = OutputOf(g_.graph().node(concat), 0);
  return true;
}

std::optional<std::vector<float>> Importer::WeightValues(const std::string& value,
                                                         std::set<int>* nodes) const {
  if (const onnx::TensorProto* t = g_.Constant(value)) {
    auto values = OnnxFloats(*t, g_.label);
    if (!values.ok()) return std::nullopt;
    return *values;
  }
  auto evaluated = EvaluateFromWeights(g_.graph(), value);
  if (!evaluated) return std::nullopt;
  nodes->insert(evaluated->nodes.begin(), evaluated->nodes.end());
  return evaluated->values;
}

bool Importer::CosineScale(int mul, WindowChain* c, int* product) const {
  const onnx::GraphProto& g = g_.graph();
  const onnx::NodeProto& m = g.node(mul);
  for (int side = 0; side < 2; ++side) {
    const int p = Producer(InputOf(m, side)), e = Producer(InputOf(m, 1 - side));
    if (p < 0 || e < 0 || g.node(p).op_type() != "MatMul" || g.node(e).op_type() != "Exp") {
      continue;
    }
    const int clip = Producer(InputOf(g.node(e), 0));
    if (clip < 0 || g.node(clip).op_type() != "Clip") return false;
    const onnx::NodeProto& cl = g.node(clip);
    const onnx::TensorProto* param = g_.Constant(InputOf(cl, 0));
    float high = 0;
    const bool no_low = cl.input_size() < 2 || InputOf(cl, 1).empty();
    if (param == nullptr || !no_low || cl.input_size() < 3 ||
        !ScalarConstant(InputOf(cl, 2), &high) || high != static_cast<float>(std::log(100.0))) {
      return false;
    }
    auto values = OnnxFloats(*param, g_.label);
    if (!values.ok()) return false;
    c->logit_scale = *values;
    c->nodes.insert({mul, e, clip});
    *product = p;
    return true;
  }
  return false;
}

bool Importer::NormalizedOf(const std::string& value, std::string* source,
                            std::set<int>* nodes) const {
  const onnx::GraphProto& g = g_.graph();
  const int div = Producer(value);
  if (div < 0 || g.node(div).op_type() != "Div") return false;
  const std::string& x = InputOf(g.node(div), 0);
  int denominator = Producer(InputOf(g.node(div), 1));
  std::set<int> found = {div};
  if (denominator >= 0 && g.node(denominator).op_type() == "Expand") {
    found.insert(denominator);
    denominator = Producer(InputOf(g.node(denominator), 0));
  }
  const int reduce = denominator >= 0 && g.node(denominator).op_type() == "Clip"
                         ? Producer(InputOf(g.node(denominator), 0))
                         : -1;
  float eps = 0;
  if (reduce < 0 || g.node(reduce).op_type() != "ReduceL2" || InputOf(g.node(reduce), 0) != x ||
      AttrInt(g.node(reduce), "keepdims", 1) != 1 ||
      (AttrInts(g.node(reduce), "axes", {}) != std::vector<int64_t>{-1} &&
       AttrInts(g.node(reduce), "axes", {}) != std::vector<int64_t>{3}) ||
      g.node(denominator).input_size() < 2 ||
      !ScalarConstant(InputOf(g.node(denominator), 1), &eps) || eps != 1e-12f ||
      (g.node(denominator).input_size() > 2 && !InputOf(g.node(denominator), 2).empty())) {
    return false;
  }
  found.insert({denominator, reduce});
  nodes->insert(found.begin(), found.end());
  *source = x;
  return true;
}

void Importer::MarkWindowChains(ChainFinder find, const std::string& kind) {
  const onnx::GraphProto& g = g_.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    if (g.node(i).op_type() != "Softmax" || i == output_softmax_ || fused_.count(i)) continue;
    WindowChain c;
    if (!(this->*find)(i, &c)) continue;
    if (!c.error.empty()) {
      softmax_errors_[i] = kind + ": " + c.error;
      continue;
    }
    c.nodes.erase(c.last);
    fused_.insert(c.nodes.begin(), c.nodes.end());
    windows_[c.last] = c;
  }
}

// From the Softmax back to Q K^T: the bias, the mask between two reshapes,
// the scale; false when the scores are not Swin's (a Gather of a
// five-axis Transpose on both sides of the product).
bool Importer::FindWindowChain(int softmax, WindowChain* c) const {
  const onnx::GraphProto& g = g_.graph();
  c->softmax = softmax;
  c->nodes.insert(softmax);
  const onnx::NodeProto& s = g.node(softmax);
  int add = Producer(InputOf(s, 0));
  const onnx::TensorProto* mask = nullptr;
  std::vector<int> mask_nodes;
  if (add >= 0 && g.node(add).op_type() == "Reshape") {  // the mask between two reshapes
    const int masked = Producer(InputOf(g.node(add), 0));
    if (masked < 0 || g.node(masked).op_type() != "Add") return false;
    const onnx::NodeProto& m = g.node(masked);
    const bool first = g_.Constant(InputOf(m, 1)) != nullptr;
    mask = g_.Constant(InputOf(m, first ? 1 : 0));
    const int before = Producer(InputOf(m, first ? 0 : 1));
    if (mask == nullptr || before < 0 || g.node(before).op_type() != "Reshape") return false;
    mask_nodes = {add, masked, before};
    add = Producer(InputOf(g.node(before), 0));
  }
  if (add < 0 || g.node(add).op_type() != "Add") return false;
  const onnx::NodeProto& a = g.node(add);
  // One side is the bias, computed from weights and constants alone; the
  // other the scores: MatMul(Q d^-1/2, K^T), or Swin V2's cosine
  // similarities times exp(min(logit_scale, ln 100)).
  std::set<int> bias_nodes;
  std::optional<std::vector<float>> bias;
  int side = 1;
  while (side >= 0 && !(bias = WeightValues(InputOf(a, side), &bias_nodes))) --side;
  int scores = bias ? Producer(InputOf(a, 1 - side)) : -1;
  if (scores < 0) return false;
  if (g.node(scores).op_type() == "Mul" && CosineScale(scores, c, &scores)) c->cosine = true;
  if (g.node(scores).op_type() != "MatMul") return false;
  const onnx::NodeProto& mm = g.node(scores);
  int q = Producer(InputOf(mm, 0));
  const int kt = Producer(InputOf(mm, 1));
  float scale = 1;
  if (!c->cosine && q >= 0 && g.node(q).op_type() == "Mul") {
    const bool second = ScalarConstant(InputOf(g.node(q), 1), &scale);
    if (!second && !ScalarConstant(InputOf(g.node(q), 0), &scale)) return false;
    c->nodes.insert(q);
    q = Producer(InputOf(g.node(q), second ? 0 : 1));
  }
  if (q < 0 || kt < 0 || !IsPerm(g.node(kt), {0, 1, 3, 2})) return false;
  int k = Producer(InputOf(g.node(kt), 0));
  if (c->cosine) {  // F.normalize(q), F.normalize(k)
    std::string q_source, k_source;
    if (!NormalizedOf(OutputOf(g.node(q), 0), &q_source, &c->nodes) || k < 0 ||
        !NormalizedOf(OutputOf(g.node(k), 0), &k_source, &c->nodes)) {
      return false;
    }
    q = Producer(q_source);
    k = Producer(k_source);
  }
  if (q < 0 || k < 0 || g.node(q).op_type() != "Gather" || g.node(k).op_type() != "Gather" ||
      InputOf(g.node(q), 0) != InputOf(g.node(k), 0)) {
    return false;
  }
  c->nodes.insert(bias_nodes.begin(), bias_nodes.end());
  const int qkv_t = Producer(InputOf(g.node(q), 0));
  if (qkv_t < 0 || !IsPerm(g.node(qkv_t), {2, 0, 3, 1, 4})) return false;
  // Swin's from here on: what does not match is an error, not another chain.
  c->nodes.insert({add, scores, kt, q, k, qkv_t});
  c->nodes.insert(mask_nodes.begin(), mask_nodes.end());
  std::string why;
  const int product = [&] {
    int reader = OnlyReader(OutputOf(s, 0), "Dropout");
    if (reader >= 0) c->nodes.insert(reader);
    return OnlyReader(reader >= 0 ? OutputOf(g.node(reader), 0) : OutputOf(s, 0), "MatMul");
  }();
  if (ConstInts(g_, g.node(q), 1) != std::vector<int64_t>{0} ||
      ConstInts(g_, g.node(k), 1) != std::vector<int64_t>{1} ||
      AttrInt(g.node(q), "axis", 0) != 0 || AttrInt(g.node(k), "axis", 0) != 0) {
    why = "the queries and keys are not items 0 and 1 of the projection's first axis";
  } else if (product < 0) {
    why = "the probabilities are read by other than one MatMul by the values";
  } else if (WindowInput(c, product, InputOf(g.node(qkv_t), 0), &why) &&
             WindowBias(c, *bias, c->window * c->window, &why) && WindowOutput(c, product, &why)) {
    const double want =
        c->cosine ? 1.0 : 1.0 / std::sqrt(static_cast<double>(c->channels / c->heads));
    if (c->cosine && std::fabs(scale - want) > 1e-6 * want) {
      why = "the cosine similarities are scaled by " + std::to_string(scale) +
            " besides exp(logit_scale)";
    } else if (!(scale > 0 && scale <= 1e3f)) {
      why = "the queries are scaled by " + std::to_string(scale) +
            " (spill's window_attention scales by a factor in (0, 1000])";
    } else if (c->shift == 0 && mask != nullptr) {
      why = "a mask is added to the scores of windows that are not shifted";
    } else if (c->shift > 0) {
      WindowMask(*c, mask, c->height, c->width, &why);
    }
    // A factor other than d^-1/2 is the layer's `scale`.
    if (!c->cosine && std::fabs(scale - want) > 1e-6 * want) c->scale = scale;
  }
  c->error = why;
  return true;
}

// From the values' Gather back to X: V is item 2 of the same projection,
// the projection a MatMul (+ Add) of the windows, the windows a partition
// of X rolled along H and W (or not), X maybe padded by nothing.
bool Importer::WindowInput(WindowChain* c, int product, const std::string& y,
                           std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  const int v = Producer(InputOf(g.node(product), 1));
  const int reshape = Producer(y);
  const int v_source = v >= 0 ? Producer(InputOf(g.node(v), 0)) : -1;
  if (v < 0 || g.node(v).op_type() != "Gather" ||
      ConstInts(g_, g.node(v), 1) != std::vector<int64_t>{2} || v_source < 0 ||
      InputOf(g.node(v_source), 0) != y || reshape < 0 || g.node(reshape).op_type() != "Reshape") {
    *why = "the values are not item 2 of the projection, reshaped to (windows, T, 3, heads, d)";
    return false;
  }
  const std::vector<int64_t> d5 = DimsOrEmpty(g_, OutputOf(g.node(reshape), 0));
  if (d5.size() != 5 || d5[2] != 3) {
    *why = "the projection is not reshaped to (windows, T, 3, heads, d)";
    return false;
  }
  const int64_t tokens = d5[1];
  c->heads = d5[3];
  c->channels = d5[3] * d5[4];
  c->nodes.insert({v, reshape});
  // The qkv projection: MatMul by (C, 3C), then Add of 3C - or none, where
  // the windows hold the queries, keys and values already (spill's export).
  int add = Producer(InputOf(g.node(reshape), 0));
  int mm = add;
  if (add >= 0 && g.node(add).op_type() == "Reshape") {
    c->in_channels = 3 * c->channels;
    return WindowSource(c, add, tokens, why);
  }
  if (add >= 0 && g.node(add).op_type() == "Add") {  // V2 computes it: the keys' part zeroed
    const onnx::NodeProto& a = g.node(add);
    std::optional<std::vector<float>> bias;
    int side = 1;
    while (side >= 0 && !(bias = WeightValues(InputOf(a, side), &c->nodes))) --side;
    if (!bias) {
      *why = "the queries, keys and values get a bias that is not computed from weights alone";
      return false;
    }
    c->qkv_bias = *bias;
    c->has_qkv_bias = true;
    mm = Producer(InputOf(a, 1 - side));
    c->nodes.insert(add);
  }
  if (mm < 0 || g.node(mm).op_type() != "MatMul" ||
      g_.Constant(InputOf(g.node(mm), 1)) == nullptr) {
    *why = "the queries, keys and values are not one MatMul by a constant weight";
    return false;
  }
  c->qkv = mm;
  c->qkv_weight = g_.Constant(InputOf(g.node(mm), 1));
  c->nodes.insert(mm);
  c->in_channels = c->channels;
  return WindowSource(c, Producer(InputOf(g.node(mm), 0)), tokens, why);
}

// The windows: Reshape (N nW, T, C) of a Transpose [0 1 3 2 4 5] of a
// Reshape (N, H/w, w, W/w, w, C), of the image rolled by -s (or not) and
// padded by zeros below and to the right (or not) - or a grid (spill's
// export of MaxViT's grid attention, never rolled): Transpose [0 2 4 1 3 5]
// of a Reshape (N, w, H/w, w, W/w, C).
bool Importer::WindowSource(WindowChain* c, int merge, int64_t tokens, std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  const int perm = merge >= 0 ? Producer(InputOf(g.node(merge), 0)) : -1;
  const int split6 = perm >= 0 ? Producer(InputOf(g.node(perm), 0)) : -1;
  c->grid = perm >= 0 && IsPerm(g.node(perm), {0, 2, 4, 1, 3, 5});
  if (merge < 0 || split6 < 0 || g.node(merge).op_type() != "Reshape" ||
      !(c->grid || IsPerm(g.node(perm), {0, 1, 3, 2, 4, 5})) ||
      g.node(split6).op_type() != "Reshape") {
    *why =
        "the projection does not read the image's windows (Reshape, Transpose [0 1 3 2 4 5], "
        "Reshape)";
    return false;
  }
  const std::vector<int64_t> d6 = DimsOrEmpty(g_, OutputOf(g.node(split6), 0));
  const int across = c->grid ? 1 : 2;  // the axes of a window's rows and columns: 1, 3 or 2, 4
  if (d6.size() != 6 || d6[across] != d6[across + 2] || d6[across] * d6[across + 2] != tokens ||
      !TailIs(g_, OutputOf(g.node(merge), 0), {tokens, c->in_channels}) ||
      d6[5] != c->in_channels) {
    *why = "the windows are not square, or hold other than the T = " + std::to_string(tokens) +
           " positions the attention reads";
    return false;
  }
  c->window = d6[across];
  c->nodes.insert({merge, perm, split6});
  // The roll by -s along H and W (either order), then the padding.
  std::string x = InputOf(g.node(split6), 0), before;
  int64_t shift_w = 0, shift_h = 0;
  if (RollOf(x, 2, &before, &shift_w, &c->nodes)) x = before;
  if (RollOf(x, 1, &before, &shift_h, &c->nodes)) x = before;
  if (shift_w == 0 && RollOf(x, 2, &before, &shift_w, &c->nodes)) x = before;
  if (c->grid && shift_h + shift_w > 0) {
    *why = "a grid of windows is shifted; spill's grid attention takes no shift";
    return false;
  }
  if (shift_h != shift_w) {
    *why = "the windows are shifted by " + std::to_string(shift_h) + " rows and " +
           std::to_string(shift_w) + " columns; spill's window_attention shifts both alike";
    return false;
  }
  c->shift = shift_h;
  const std::vector<int64_t> padded = DimsOrEmpty(g_, x);
  const int pad = Producer(x);
  if (pad >= 0 && g.node(pad).op_type() == "Pad") {  // zeros below and right, to the windows
    const std::vector<int64_t> pads = ConstInts(g_, g.node(pad), 1);
    const bool zero = g.node(pad).input_size() < 3 || InputOf(g.node(pad), 2).empty() ||
                      WeightValues(InputOf(g.node(pad), 2), &c->nodes) == std::vector<float>{0.0f};
    if (pads.size() != 8 || pads[0] || pads[1] || pads[2] || pads[3] || pads[4] || pads[7] ||
        pads[5] < 0 || pads[6] < 0 || !zero ||
        AttrString(g.node(pad), "mode", "constant") != "constant") {
      *why = "the image is padded otherwise than with zeros below and to the right";
      return false;
    }
    c->pad_bottom = pads[5];
    c->pad_right = pads[6];
    c->nodes.insert(pad);
    x = InputOf(g.node(pad), 0);
  }
  const std::vector<int64_t> xd = DimsOrEmpty(g_, x);
  if (xd.size() != 4 || padded.size() != 4 || xd[3] != c->in_channels ||
      padded[1] % c->window != 0 || padded[2] % c->window != 0 || c->shift >= c->window) {
    *why = "the windows do not tile the channels-last image they read";
    return false;
  }
  c->height = padded[1];
  c->width = padded[2];
  c->source = x;
  return true;
}

bool Importer::WindowBias(WindowChain* c, const std::vector<float>& bias, int64_t tokens,
                          std::string* why) const {
  const int64_t w = c->window, heads = c->heads, span = 2 * w - 1;
  if (static_cast<int64_t>(bias.size()) != heads * tokens * tokens) {
    *why = "the bias added to the scores is not (1, heads, T, T)";
    return false;
  }
  c->table.assign(span * span * heads, 0.0f);
  std::vector<bool> seen(c->table.size(), false);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t u = 0; u < tokens; ++u) {
        const int64_t index = onnx_windows::RelativeIndex(w, t, u);
        const float b = bias[(h * tokens + t) * tokens + u];
        float& entry = c->table[index * heads + h];
        if (seen[index * heads + h] && std::memcmp(&entry, &b, sizeof b) != 0) {
          *why = "the bias added to the scores is not a relative position bias (head " +
                 std::to_string(h) + ", positions " + std::to_string(t) + " and " +
                 std::to_string(u) + " differ from another pair at the same offset)";
          return false;
        }
        entry = b;
        seen[index * heads + h] = true;
      }
    }
  }
  return true;
}

bool Importer::WindowMask(const WindowChain& c, const onnx::TensorProto* mask, int64_t height,
                          int64_t width, std::string* why) const {
  const int64_t w = c.window, s = c.shift, t = w * w;
  const int64_t across = width / w, windows = (height / w) * across;
  auto values = mask != nullptr ? OnnxFloats(*mask, g_.label)
                                : StatusOr<std::vector<float>>(InvalidArgument("none"));
  if (!values.ok() || static_cast<int64_t>(values->size()) != windows * t * t) {
    *why = "the shifted windows' scores get no mask of (1, windows, 1, T, T)";
    return false;
  }
  for (int64_t k = 0; k < windows; ++k) {
    for (int64_t a = 0; a < t; ++a) {
      for (int64_t b = 0; b < t; ++b) {
        const float want = onnx_windows::ShiftMask(height, width, w, s, k, a, b);
        if ((*values)[(k * t + a) * t + b] != want) {
          *why = "the mask added to the scores of window " + std::to_string(k) +
                 " is not the one of windows shifted by " + std::to_string(s) +
                 " (0 within a region, -100 across)";
          return false;
        }
      }
    }
  }
  return true;
}

// From the product forward: back to (N nW, T, C), the out-projection, the
// windows merged, the roll undone, the padding cut.
bool Importer::WindowOutput(WindowChain* c, int product, std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  const int64_t t = c->window * c->window, ch = c->channels;
  c->nodes.insert(product);
  const int perm = OnlyReader(OutputOf(g.node(product), 0), "Transpose");
  const int merge = perm >= 0 ? OnlyReader(OutputOf(g.node(perm), 0), "Reshape") : -1;
  if (perm < 0 || !IsPerm(g.node(perm), {0, 2, 1, 3}) || merge < 0 ||
      !TailIs(g_, OutputOf(g.node(merge), 0), {t, ch})) {
    *why = "the heads' outputs are not merged to (windows, T, C)";
    return false;
  }
  c->nodes.insert({perm, merge});
  std::string out = OutputOf(g.node(merge), 0);
  const int mm = OnlyReader(out, "MatMul");  // the out-projection, unless spill's own export
  if (mm >= 0 && g_.Constant(InputOf(g.node(mm), 1)) == nullptr) {
    *why = "the merged heads are projected by a MatMul of other than a constant weight";
    return false;
  }
  if (mm >= 0) {
    c->proj = mm;
    c->proj_weight = g_.Constant(InputOf(g.node(mm), 1));
    c->nodes.insert(mm);
    out = OutputOf(g.node(mm), 0);
  }
  const int add = mm >= 0 ? OnlyReader(out, "Add") : -1;
  if (add >= 0 && g_.Constant(OtherInput(add, out)) != nullptr) {
    c->proj_bias = g_.Constant(OtherInput(add, out));
    c->nodes.insert(add);
    out = OutputOf(g.node(add), 0);
  }
  const int dropout = OnlyReader(out, "Dropout");
  if (dropout >= 0) {
    c->nodes.insert(dropout);
    out = OutputOf(g.node(dropout), 0);
  }
  const int split6 = OnlyReader(out, "Reshape");
  const int perm6 = split6 >= 0 ? OnlyReader(OutputOf(g.node(split6), 0), "Transpose") : -1;
  const int image = perm6 >= 0 ? OnlyReader(OutputOf(g.node(perm6), 0), "Reshape") : -1;
  const std::vector<int64_t> x = DimsOrEmpty(g_, c->source);
  const std::vector<int64_t> back =
      c->grid ? std::vector<int64_t>{0, 3, 1, 4, 2, 5} : std::vector<int64_t>{0, 1, 3, 2, 4, 5};
  if (image < 0 || !IsPerm(g.node(perm6), back) ||
      !TailIs(g_, OutputOf(g.node(image), 0), {c->height, c->width, ch})) {
    *why =
        "the windows are not merged back into the image (Reshape, Transpose [0 1 3 2 4 5], "
        "Reshape)";
    return false;
  }
  c->nodes.insert({split6, perm6, image});
  out = OutputOf(g.node(image), 0);
  int64_t back_h = 0, back_w = 0;
  std::string rolled;
  if (RollAfter(out, 1, &rolled, &back_h, &c->nodes)) out = rolled;
  if (RollAfter(out, 2, &rolled, &back_w, &c->nodes)) out = rolled;
  const int64_t undo_h = back_h == 0 ? 0 : c->height - back_h;
  const int64_t undo_w = back_w == 0 ? 0 : c->width - back_w;
  if (undo_h != c->shift || undo_w != c->shift) {
    *why = "the shift by " + std::to_string(c->shift) + " is not undone after the windows";
    return false;
  }
  // x[:, :H, :W, :]: the padding cut, or slices that keep every row and column.
  for (int slice = OnlyReader(out, "Slice"); slice >= 0; slice = OnlyReader(out, "Slice")) {
    auto s = ReadSlice(g_, g.node(slice), 4);
    if (!s || s->begin != 0 || s->step != 1 || s->axis < 1 || s->axis > 2 || s->end != x[s->axis]) {
      break;
    }
    c->nodes.insert(slice);
    out = OutputOf(g.node(slice), 0);
  }
  if (!TailIs(g_, out, {x[1], x[2], ch})) {
    *why = "the padding is not cut off after the windows";
    return false;
  }
  c->last = producers_.at(out);
  return true;
}

Status Importer::WindowAttention(int node) {
  const WindowChain& c = windows_.at(node);
  auto it = values_.find(c.source);
  if (it == values_.end()) {
    return Fail(c.softmax, "window attention reads '" + c.source + "', which spill did not import");
  }
  const Value x = it->second;
  const bool grid = c.grid || (c.partitioned && x.swapped);
  if (c.partitioned) {  // MaxViT: windows of the blocks, or the grid across them
    const int64_t across = x.block > 0 ? x.chw[1] / x.block : 0;
    if (!x.Partitioned() ||
        (grid ? across != c.window || x.chw[2] / x.block != c.window : x.block != c.window)) {
      return Fail(c.softmax, "the attention reads '" + c.source + "', which spill does not " +
                                 "hold as an image partitioned into groups of " +
                                 std::to_string(c.tokens) + " positions (MaxViT's window " +
                                 "partition of square blocks, or its grid)");
    }
  } else if (!x.ChannelsLast()) {
    return Fail(c.softmax, "window attention reads '" + c.source +
                               "', which spill does not hold as a channels-last image");
  }
  const std::string name = ModuleLayerName(c.softmax);
  const int64_t ch = c.channels, span = 2 * c.window - 1;
  // The projections: (C, K) MatMul weights as K x C x 1 x 1 filters.
  auto linear = [&](const std::string& layer, const std::string& input, int mm,
                    const onnx::TensorProto* w, const std::vector<float>* bias,
                    int64_t k) -> Status {
    SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(*w, g_.label));
    if (w->dims_size() != 2 || w->dims(0) != ch || w->dims(1) != k) {
      return Fail(mm, "the weight '" + w->name() + "' is not " + std::to_string(ch) + " x " +
                          std::to_string(k));
    }
    std::vector<float> filters(values.size());
    for (int64_t i = 0; i < ch; ++i) {
      for (int64_t o = 0; o < k; ++o) filters[o * ch + i] = values[i * k + o];
    }
    net_.params["params/" + layer + "/weight"] = NpyArray::Floats({k, ch, 1, 1}, filters.data());
    if (bias != nullptr) {
      if (static_cast<int64_t>(bias->size()) != k) {
        return Fail(mm, "the bias must have " + std::to_string(k) + " values");
      }
      net_.params["params/" + layer + "/bias"] = NpyArray::Floats({1, k, 1, 1}, bias->data());
    }
    Emit(layer, "convolution", {input},
         "filters: " + std::to_string(k) +
             ", kernel: 1, bias: " + (bias != nullptr ? "true" : "false"));
    return Status::Ok();
  };
  const bool padded = c.pad_bottom > 0 || c.pad_right > 0;
  const std::string sides = std::to_string(c.pad_bottom) + ", " + std::to_string(c.pad_right);
  std::string input = x.ref;
  if (padded) {  // to the windows; the projection of a zero pixel is its bias, as in PyTorch
    input = UniqueName(name + ".pad");
    Emit(input, "pad", {x.ref}, "pad: [0, 0, " + sides + "]");
  }
  if (c.qkv >= 0) {
    const std::string qkv = UniqueName(name + ".qkv");
    SPILL_RETURN_IF_ERROR(
        linear(qkv, input, c.qkv, c.qkv_weight, c.has_qkv_bias ? &c.qkv_bias : nullptr, 3 * ch));
    input = qkv;
  }
  net_.params["params/" + name + "/table"] =
      NpyArray::Floats({span * span, c.heads, 1, 1}, c.table.data());
  if (c.cosine) {
    net_.params["params/" + name + "/logit_scale"] =
        NpyArray::Floats({c.heads, 1, 1, 1}, c.logit_scale.data());
  }
  Emit(name, "window_attention", {input},
       "heads: " + std::to_string(c.heads) + ", window: " + std::to_string(c.window) +
           ", shift: " + std::to_string(c.shift) + (c.cosine ? ", cosine: true" : "") +
           (grid ? ", grid: true" : "") +
           (c.scale > 0 ? ", scale: " + ShortestFloat(c.scale) : ""));
  std::vector<float> proj_bias;
  if (c.proj_bias != nullptr) {
    SPILL_ASSIGN_OR_RETURN(proj_bias, OnnxFloats(*c.proj_bias, g_.label));
  }
  Value v = x;
  v.ref = name;
  v.chw[0] = ch;
  v.dims[2] = ch;
  if (c.proj >= 0) {
    const std::string proj = UniqueName(name + ".proj");
    SPILL_RETURN_IF_ERROR(
        linear(proj, name, c.proj, c.proj_weight, c.proj_bias ? &proj_bias : nullptr, ch));
    v.ref = proj;
  }
  if (padded) {
    const std::string cropped = v.ref;
    v.ref = UniqueName(name + ".crop");
    Emit(
        v.ref, "pad", {cropped},
        "pad: [0, 0, " + std::to_string(-c.pad_bottom) + ", " + std::to_string(-c.pad_right) + "]");
  }
  return ProduceValue(node, 0, v);
}

void Importer::MarkPatchMerging() {
  const onnx::GraphProto& g = g_.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& concat = g.node(i);
    const int64_t rank = Rank(g_, OutputOf(concat, 0));
    if (concat.op_type() != "Concat" || rank != 4 || (AttrInt(concat, "axis", 0) + 4) % 4 != 3) {
      continue;
    }
    const int64_t inputs = concat.input_size();
    const int64_t b = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(inputs))));
    if (b < 2 || b * b != inputs) continue;
    std::set<int> nodes;
    std::string source;
    bool match = true;
    for (int64_t k = 0; k < inputs && match; ++k) {
      const int s2 = Producer(InputOf(concat, static_cast<int>(k)));
      const int s1 = s2 >= 0 ? Producer(InputOf(g.node(s2), 0)) : -1;
      auto a2 = s2 >= 0 ? ReadSlice(g_, g.node(s2), 4) : std::nullopt;
      auto a1 = s1 >= 0 ? ReadSlice(g_, g.node(s1), 4) : std::nullopt;
      if (!a1 || !a2 || a1->step != b || a2->step != b || a1->axis == a2->axis || a1->axis == 3 ||
          a2->axis == 3 || (!source.empty() && InputOf(g.node(s1), 0) != source)) {
        match = false;
        break;
      }
      source = InputOf(g.node(s1), 0);
      const std::vector<int64_t> d = DimsOrEmpty(g_, source);
      const SliceAxis& rows = a1->axis == 1 ? *a1 : *a2;
      const SliceAxis& cols = a1->axis == 1 ? *a2 : *a1;
      match = cols.begin < b && rows.begin < b && cols.begin * b + rows.begin == k &&
              rows.end == d[1] && cols.end == d[2] && d[1] % b == 0 && d[2] % b == 0;
      nodes.insert({s1, s2});
    }
    if (!match) continue;
    for (int n : nodes) {  // every slice read by the merge alone
      for (int reader : g_.consumers.at(OutputOf(g.node(n), 0))) {
        if (reader != i && !nodes.count(reader)) match = false;
      }
    }
    if (!match) continue;
    fused_.insert(nodes.begin(), nodes.end());
    merges_[i] = PatchMerge{source, b};
  }
}

Status Importer::SpaceToDepth(int node) {
  const PatchMerge& m = merges_.at(node);
  auto it = values_.find(m.source);
  if (it == values_.end() || !it->second.ChannelsLast()) {
    return Fail(node, "the patch merging reads '" + m.source +
                          "', which spill does not hold as a channels-last image");
  }
  const Value& x = it->second;
  const std::string name = ModuleLayerName(node);
  Emit(name, "space_to_depth", {x.ref}, "block_size: " + std::to_string(m.block));
  Value v = x;
  v.ref = name;
  v.chw = {x.chw[0] * m.block * m.block, x.chw[1] / m.block, x.chw[2] / m.block};
  v.dims = {v.chw[1], v.chw[2], v.chw[0]};
  return ProduceValue(node, 0, v);
}

}  // namespace onnx_import
}  // namespace spill
