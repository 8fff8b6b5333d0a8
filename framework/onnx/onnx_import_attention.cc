// The ONNX importer's attention: the chain PyTorch writes for
// nn.MultiheadAttention (and spill's exporter for its attention layer),
// read back as one `attention` layer.
//
// The chain starts at one value X holding each position's queries, keys
// and values along its features (an in-projection's output: a sequence
// (N, T, 3C) in any order of its axes, or spill's own (N, 3C, 1, T)), and
// takes Q, K and V out of it by views - Slice, Split or Gather of the
// features, Reshape, Transpose, Squeeze, Unsqueeze - that split C into
// heads x d and merge the heads with the batch:
//
//   scores = MatMul(Q / s, K^T)   (the scales of both sides: 1 / sqrt(d))
//   [Add of a causal mask: 0 on and below the diagonal, -inf above]
//   P = Softmax(scores, last axis)
//   O = MatMul(P, V)
//
// then views of O up to the first that is a sequence again: (N, T, C) in
// any order, the positions and the batch merged (T N, C) as PyTorch feeds
// its out-projection, or spill's (N, C, 1, T).
//
// Each view is followed symbolically (View below): every axis is a run of
// atoms - the batch, the positions, or a range of X's features with a
// stride - so a Reshape splits or merges atoms and a Slice moves the offset
// into X's features. At the MatMuls the views must read head h's queries,
// keys and values at features [h d, (h + 1) d) of [0, C), [C, 2C) and
// [2C, 3C), as spill's attention layer reads them. The chain's nodes are
// found before the walk (MarkAttention) and converted at its last one; a
// Softmax outside such a chain is an error naming what did not match.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "framework/io/npz.h"
#include "framework/onnx/onnx_importer.h"

namespace spill {
namespace onnx_import {
namespace {

// Views followed from X to a MatMul, and from O to a sequence.
constexpr int kMaxViews = 16;
// At or below this a mask's entry hides a score (PyTorch writes -inf, or
// the float type's lowest value).
constexpr float kMaskedScore = -1e9f;

// One atom of a view's axis: the batch ('N'), the positions ('T'), or
// `size` features of X `stride` apart ('c').
struct Atom {
  char kind = 'c';
  int64_t size = 1;
  int64_t stride = 1;
};

bool operator==(const Atom& a, const Atom& b) {
  return a.kind == b.kind && a.size == b.size && a.stride == b.stride;
}

using Axis = std::vector<Atom>;

// One ONNX dimension: `value`, or `value` x the batch.
struct Dim {
  int64_t value = 1;
  bool batch = false;
};

}  // namespace

// A view of X: its axes, the first feature it starts at, the scale applied.
struct Importer::AttentionView {
  std::vector<Axis> axes;
  int64_t offset = 0;
  double scale = 1;

  // The atoms in order, features of size 1 left out.
  std::vector<Atom> Flat(size_t begin = 0, size_t end = SIZE_MAX) const {
    std::vector<Atom> atoms;
    for (size_t i = begin; i < std::min(end, axes.size()); ++i) {
      for (const Atom& a : axes[i]) {
        if (a.size != 1 || a.kind != 'c') atoms.push_back(a);
      }
    }
    return atoms;
  }
};

using View = Importer::AttentionView;

namespace {

std::string DescribeAxis(const Axis& axis) {
  std::string s;
  for (const Atom& a : axis) {
    if (a.kind == 'c' && a.size == 1) continue;
    s += s.empty() ? "" : " x ";
    s += a.kind == 'N'   ? "batch"
         : a.kind == 'T' ? "positions"
                         : std::to_string(a.size) + " features";
  }
  return "(" + (s.empty() ? "1" : s) + ")";
}

std::string DescribeView(const View& v) {
  std::string s;
  for (const Axis& a : v.axes) s += (s.empty() ? "" : ", ") + DescribeAxis(a);
  return "[" + s + "]";
}

// The one atom of an axis (features of size 1 aside), or null.
const Atom* Single(const Axis& axis) {
  const Atom* found = nullptr;
  for (const Atom& a : axis) {
    if (a.kind == 'c' && a.size == 1) continue;
    if (found != nullptr) return nullptr;
    found = &a;
  }
  return found;
}

// Reshape of `v` to `dims`: atoms merged, or features split where a
// dimension ends inside them.
bool ReshapeView(View* v, const std::vector<Dim>& dims, std::string* why) {
  std::vector<Atom> flat = v->Flat();
  std::reverse(flat.begin(), flat.end());  // a stack: the next atom last
  std::vector<Axis> axes;
  for (const Dim& d : dims) {
    Axis axis;
    int64_t known = 1;
    bool batch = false;
    while (!flat.empty() && (known < d.value || (d.batch && !batch))) {
      Atom a = flat.back();
      if (a.kind == 'N') {
        if (!d.batch || batch) break;
        batch = true;
        axis.push_back(a);
        flat.pop_back();
        continue;
      }
      if (known * a.size > d.value) {
        const int64_t major = d.value / known;  // split: the major part here, the rest next
        if (a.kind != 'c' || d.value % known != 0 || a.size % major != 0) break;
        flat.back() = {'c', a.size / major, a.stride};
        a = {'c', major, a.stride * (a.size / major)};
      } else {
        flat.pop_back();
      }
      known *= a.size;
      axis.push_back(a);
    }
    if (known != d.value || batch != d.batch) {
      *why = "a Reshape cuts across " + DescribeView(*v) + " where spill cannot follow it";
      return false;
    }
    axes.push_back(axis);
  }
  if (!flat.empty()) {
    *why = "a Reshape leaves values of " + DescribeView(*v) + " over";
    return false;
  }
  v->axes = axes;
  return true;
}

// The layout of O's batch, positions and features when it is a sequence
// again: "NTC" in any order, "MC" / "BC" (positions and batch merged,
// positions first / batch first), "NC1T" (spill's N x C x 1 x T); else "".
// `features` is O's C (heads x d).
std::string SequenceLayout(const View& v, int64_t features) {
  std::string layout;
  for (size_t i = 0; i < v.axes.size(); ++i) {
    const std::vector<Atom> atoms = v.Flat(i, i + 1);
    if (atoms.empty()) {
      layout += '1';
    } else if (atoms.size() == 1 && atoms[0].kind != 'c') {
      layout += atoms[0].kind;
    } else if (atoms.size() == 2 && atoms[0].kind == 'T' && atoms[1].kind == 'N') {
      layout += 'M';
    } else if (atoms.size() == 2 && atoms[0].kind == 'N' && atoms[1].kind == 'T') {
      layout += 'B';
    } else {
      int64_t expect = 1;  // the features in order, the last atom fastest
      for (auto a = atoms.rbegin(); a != atoms.rend(); ++a) {
        if (a->kind != 'c' || a->stride != expect) return "";
        expect *= a->size;
      }
      if (expect != features) return "";
      layout += 'C';
    }
  }
  std::string sorted = layout;
  std::sort(sorted.begin(), sorted.end());
  if (sorted == "CNT" || layout == "MC" || layout == "BC" || layout == "NC1T") return layout;
  return "";
}

// A constant's integers or floats; none when it is absent or of another type.
std::vector<int64_t> IntsOf(const OnnxGraph& g, const onnx::TensorProto* t) {
  if (t == nullptr) return {};
  auto values = OnnxInts(*t, g.label);
  return values.ok() ? *values : std::vector<int64_t>();
}

std::vector<float> FloatsOf(const OnnxGraph& g, const onnx::TensorProto* t) {
  if (t == nullptr) return {};
  auto values = OnnxFloats(*t, g.label);
  return values.ok() ? *values : std::vector<float>();
}

bool IsView(const std::string& op) {
  return op == "Slice" || op == "Split" || op == "Gather" || op == "Transpose" || op == "Reshape" ||
         op == "Squeeze" || op == "Unsqueeze" || op == "Div" || op == "Mul" || op == "Identity";
}

// Whether Q, K^T and V read spill's attention layout: Q (positions, d) by
// K^T (d, positions), P by V (positions, d), over the same batch and heads;
// head h's at features [h d, (h + 1) d) of [0, C), [C, 2C), [2C, 3C).
bool ReadsHeads(const View& q, const View& k, const View& v, int64_t features, int64_t* heads,
                int64_t* depth, std::string* why) {
  const size_t rank = q.axes.size();
  if (rank < 2 || k.axes.size() != rank || v.axes.size() != rank) {
    *why = "queries " + DescribeView(q) + ", keys " + DescribeView(k) + " and values " +
           DescribeView(v) + " differ in rank";
    return false;
  }
  const std::vector<Atom> batch = q.Flat(0, rank - 2);
  if (!(batch == k.Flat(0, rank - 2)) || !(batch == v.Flat(0, rank - 2))) {
    *why = "queries " + DescribeView(q) + ", keys " + DescribeView(k) + " and values " +
           DescribeView(v) + " do not pair the same heads of the same images";
    return false;
  }
  const Atom* qt = Single(q.axes[rank - 2]);
  const Atom* qd = Single(q.axes[rank - 1]);
  const Atom* kd = Single(k.axes[rank - 2]);
  const Atom* kt = Single(k.axes[rank - 1]);
  const Atom* vt = Single(v.axes[rank - 2]);
  const Atom* vd = Single(v.axes[rank - 1]);
  auto is = [](const Atom* a, char kind) { return a != nullptr && a->kind == kind; };
  if (!is(qt, 'T') || !is(kt, 'T') || !is(vt, 'T') || !is(qd, 'c') || !is(kd, 'c') ||
      !is(vd, 'c') || qd->stride != 1 || !(*qd == *kd) || !(*qd == *vd)) {
    *why = "the products are not Q (positions, d) by K^T (d, positions) and P by V (positions, " +
           std::string("d): queries ") + DescribeView(q) + ", keys " + DescribeView(k) +
           ", values " + DescribeView(v);
    return false;
  }
  *depth = qd->size;
  *heads = 1;
  int64_t images = 0;
  for (const Atom& a : batch) {
    if (a.kind == 'N') ++images;
    if (a.kind == 'c') *heads = a.stride == *depth ? *heads * a.size : -1;
    if (a.kind == 'T') *heads = -1;
  }
  const int64_t width = *heads * *depth;
  if (images != 1 || *heads < 1 || batch.size() > 2 || features != 3 * width || q.offset != 0 ||
      k.offset != width || v.offset != 2 * width) {
    *why =
        "spill's attention reads head h's queries, keys and values at features [h d, (h + 1) d)" +
        std::string(" of [0, C), [C, 2C) and [2C, 3C) of one projection; here the queries ") +
        "start at " + std::to_string(q.offset) + ", the keys at " + std::to_string(k.offset) +
        ", the values at " + std::to_string(v.offset) + " of " + std::to_string(features) +
        " features, viewed as " + DescribeView(q);
    return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<int64_t>> Importer::BatchDims(const std::string& value,
                                                   std::vector<bool>* batches) const {
  auto it = g_.dims.find(value);
  if (it == g_.dims.end() || it->second.empty()) {
    return InvalidArgument("the shape of '" + value + "' is not inferred");
  }
  auto merged = g_.batch_axes.find(value);
  std::vector<int64_t> dims;
  batches->clear();
  for (size_t axis = 0; axis < it->second.size(); ++axis) {
    const int64_t k = merged != g_.batch_axes.end() ? merged->second[axis] : 0;
    const int64_t d = it->second[axis];
    if (k > 0 || (d == kDynamicOnnxDim && axis == 0 && merged == g_.batch_axes.end())) {
      dims.push_back(std::max<int64_t>(k, 1));
      batches->push_back(true);
    } else if (d > 0) {
      dims.push_back(d);
      batches->push_back(false);
    } else {
      return InvalidArgument("'" + value + "' has a dynamic dimension at axis " +
                             std::to_string(axis));
    }
  }
  return dims;
}

// From `value` back through views to the first value that is not one: the
// views, in order from there.
std::string Importer::ViewsBack(const std::string& value, std::vector<int>* nodes) const {
  std::string at = value;
  for (int depth = 0; depth < kMaxViews; ++depth) {
    auto p = producers_.find(at);
    if (p == producers_.end()) break;
    const onnx::NodeProto& n = g_.graph().node(p->second);
    if (!IsView(n.op_type()) || n.input_size() < 1) break;
    if (n.op_type() == "Div" || n.op_type() == "Mul") {
      float scale = 0;
      if (n.input_size() != 2 || !ScalarConstant(n.input(1), &scale)) break;
    }
    if (n.op_type() == "Gather" && g_.Constant(n.input(0)) != nullptr) break;  // an embedding
    nodes->insert(nodes->begin(), p->second);
    at = n.input(0);
  }
  return at;
}

void Importer::MarkAttention() {
  const onnx::GraphProto& g = g_.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    if (g.node(i).op_type() != "Softmax" || i == output_softmax_) continue;
    if (fused_.count(i) || softmax_errors_.count(i)) continue;  // a window attention's
    AttentionChain chain = FindAttention(i);
    if (!chain.error.empty()) {
      softmax_errors_[i] = chain.error;
      continue;
    }
    std::set<int> nodes(chain.q.begin(), chain.q.end());
    nodes.insert(chain.k.begin(), chain.k.end());
    nodes.insert(chain.v.begin(), chain.v.end());
    nodes.insert(chain.out.begin(), chain.out.end());
    for (int node : {chain.scores, chain.mask, chain.softmax, chain.product}) {
      if (node >= 0) nodes.insert(node);
    }
    nodes.insert(chain.scalings.begin(), chain.scalings.end());
    nodes.erase(chain.last);
    fused_.insert(nodes.begin(), nodes.end());
    attention_[chain.last] = chain;
  }
}

Importer::AttentionChain Importer::FindAttention(int softmax) {
  AttentionChain c;
  c.softmax = softmax;
  const onnx::GraphProto& g = g_.graph();
  const onnx::NodeProto& s = g.node(softmax);
  // Back from the Softmax: a constant mask added, scalings of the scores
  // (torch.baddbmm's alpha), then the MatMul.
  int scores = Producer(s.input(0));
  for (int depth = 0; scores >= 0 && depth < kMaxViews; ++depth) {
    const onnx::NodeProto& n = g.node(scores);
    float scale = 0;
    if (n.op_type() == "Add" && c.mask < 0 && n.input_size() == 2 &&
        (g_.Constant(n.input(0)) != nullptr || g_.Constant(n.input(1)) != nullptr)) {
      c.mask = scores;
      scores = Producer(n.input(g_.Constant(n.input(0)) != nullptr ? 1 : 0));
    } else if ((n.op_type() == "Mul" || n.op_type() == "Div") && n.input_size() == 2 &&
               ScalarConstant(n.input(1), &scale)) {
      c.scalings.push_back(scores);
      scores = Producer(n.input(0));
    } else {
      break;
    }
  }
  if (scores < 0 || g.node(scores).op_type() != "MatMul" ||
      g_.Constant(g.node(scores).input(1)) != nullptr) {
    c.error = "its input is not a MatMul of two computed values (queries by keys)";
    return c;
  }
  c.scores = scores;
  const int product = SoleConsumer(s.output(0));
  if (product < 0 || g.node(product).op_type() != "MatMul" ||
      g.node(product).input(0) != s.output(0)) {
    c.error = "its output is not read by one MatMul alone (probabilities by values)";
    return c;
  }
  c.product = product;
  c.source = ViewsBack(g.node(scores).input(0), &c.q);
  const std::string keys = ViewsBack(g.node(scores).input(1), &c.k);
  const std::string values = ViewsBack(g.node(product).input(1), &c.v);
  if (keys != c.source || values != c.source) {
    c.error = "its queries, keys and values are not views of one value ('" + c.source + "', '" +
              keys + "', '" + values + "'): spill's attention reads them from one projection";
    return c;
  }
  std::string why;
  if (!Evaluate(&c, &why)) c.error = why;
  return c;
}

// X's view: (N, T, 3C) with the features last (the batch and the positions
// in either order), or spill's own (N, 3C, 1, T).
bool Importer::SourceView(const std::string& x, View* view, std::string* layout,
                          std::string* why) const {
  std::vector<bool> batches;
  auto dims = BatchDims(x, &batches);
  if (!dims.ok() || std::count(batches.begin(), batches.end(), true) != 1) {
    *why = "the shape of '" + x + "' holds no batch axis of its own";
    return false;
  }
  const size_t n = std::find(batches.begin(), batches.end(), true) - batches.begin();
  view->axes.clear();
  layout->clear();
  if (dims->size() == 3 && n != 2 && (*dims)[n] == 1) {
    for (size_t a = 0; a < 3; ++a) {
      const char kind = a == n ? 'N' : a == 2 ? 'c' : 'T';
      view->axes.push_back({{kind, a == n ? 1 : (*dims)[a], 1}});
      *layout += kind == 'c' ? 'C' : kind;
    }
    return true;
  }
  if (dims->size() == 4 && n == 0 && (*dims)[0] == 1 && (*dims)[2] == 1) {
    view->axes = {{{'N', 1, 1}}, {{'c', (*dims)[1], 1}}, {}, {{'T', (*dims)[3], 1}}};
    *layout = "NC1T";
    return true;
  }
  *why = "'" + x + "' is neither a sequence (N, T, C) with its features last nor spill's " +
         "(N, C, 1, T)";
  return false;
}

// Follows the chain's views and checks that they read spill's attention.
bool Importer::Evaluate(AttentionChain* c, std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  View base;
  if (!SourceView(c->source, &base, &c->source_layout, why)) return false;
  int64_t features = 0, steps = 0;
  for (const Atom& a : base.Flat()) {
    if (a.kind == 'c') features = a.size;
    if (a.kind == 'T') steps = a.size;
  }
  auto follow = [&](const std::vector<int>& nodes, const std::string& end, View* v) {
    for (size_t j = 0; j < nodes.size(); ++j) {
      const std::string& output = j + 1 < nodes.size() ? g.node(nodes[j + 1]).input(0) : end;
      if (!ApplyView(nodes[j], output, v, why)) {
        *why = g_.Where(nodes[j]) + ": " + *why;
        return false;
      }
    }
    return true;
  };
  View q = base, k = base, v = base;
  if (!follow(c->q, g.node(c->scores).input(0), &q) ||
      !follow(c->k, g.node(c->scores).input(1), &k) ||
      !follow(c->v, g.node(c->product).input(1), &v)) {
    return false;
  }
  int64_t heads = 1, depth = 0;
  if (!ReadsHeads(q, k, v, features, &heads, &depth, why)) return false;
  const size_t rank = q.axes.size();
  const int64_t width = heads * depth;
  View scores;  // the scalings between the product and the Softmax
  for (int node : c->scalings) ApplyView(node, g.node(node).output(0), &scores, why);
  const double scale = q.scale * k.scale * scores.scale;
  const double want = 1 / std::sqrt(static_cast<double>(depth));
  if (std::abs(scale / want - 1) > 1e-6) {
    *why = "the scores are scaled by " + std::to_string(scale) + " where spill's attention " +
           "scales by 1 / sqrt(" + std::to_string(depth) + ")";
    return false;
  }
  const onnx::NodeProto& softmax = g.node(c->softmax);
  const int64_t axis = AttrInt(softmax, "axis", g_.opset >= 13 ? -1 : 1);
  if (axis != -1 && axis != static_cast<int64_t>(rank) - 1) {
    *why = "Softmax along axis " + std::to_string(axis) + ", not the keys' (the last)";
    return false;
  }
  if (c->mask >= 0 && !CausalMask(c->mask, steps, why)) return false;
  c->causal = c->mask >= 0;
  c->heads = heads;
  // O: the queries' batch axes, the positions, d features.
  View o;
  o.axes.assign(q.axes.begin(), q.axes.end() - 1);
  o.axes.push_back({{'c', depth, 1}});
  if (!FollowOutput(c, o, width, why)) return false;
  c->width = width;
  c->steps = steps;
  return true;
}

// O's views, Transposes and Reshapes read by nothing else, up to the first
// that is a sequence again: the chain's last node and that layout.
bool Importer::FollowOutput(AttentionChain* c, View o, int64_t width, std::string* why) const {
  const onnx::GraphProto& g = g_.graph();
  c->last = c->product;
  c->layout = SequenceLayout(o, width);
  std::string at = g.node(c->product).output(0);
  for (int left = kMaxViews; c->layout.empty() && left > 0; --left) {
    auto readers = g_.consumers.find(at);
    int next = -1, count = 0;
    for (int r : readers == g_.consumers.end() ? std::vector<int>() : readers->second) {
      if (g.node(r).op_type() == "Shape") continue;
      next = r;
      ++count;
    }
    if (count != 1) break;
    const std::string& op = g.node(next).op_type();
    if (op != "Transpose" && op != "Reshape" && op != "Squeeze" && op != "Unsqueeze") break;
    at = g.node(next).output(0);
    if (!ApplyView(next, at, &o, why)) {
      *why = g_.Where(next) + ": " + *why;
      return false;
    }
    c->out.push_back(next);
    c->last = next;
    c->layout = SequenceLayout(o, width);
  }
  if (c->layout.empty()) {
    *why = "the output " + DescribeView(o) + " is not viewed as a sequence again ((N, T, C) in " +
           "any order, (T N, C), or (N, C, 1, T)) by Transposes and Reshapes read by nothing else";
    return false;
  }
  return true;
}

// A mask added to the scores: 0 where a key is at or before the query, at
// most kMaskedScore after it (a decoder's causal mask).
bool Importer::CausalMask(int add, int64_t steps, std::string* why) const {
  const onnx::NodeProto& n = g_.graph().node(add);
  const onnx::TensorProto* t = g_.Constant(n.input(0));
  if (t == nullptr) t = g_.Constant(n.input(1));
  auto values = FloatsOf(g_, t);
  bool causal = static_cast<int64_t>(values.size()) == steps * steps && t->dims_size() >= 2 &&
                t->dims(t->dims_size() - 1) == steps;
  for (int64_t i = 0; causal && i < steps; ++i) {
    for (int64_t j = 0; causal && j < steps; ++j) {
      const float m = values[i * steps + j];
      causal = j <= i ? m == 0 : m <= kMaskedScore;
    }
  }
  if (!causal) {
    *why = "the scores get an Add of other than a constant causal mask (0 on and below the " +
           std::string("diagonal, -inf above; T x T)");
  }
  return causal;
}

Status Importer::Attention(int node) {
  const AttentionChain& c = attention_.at(node);
  auto it = values_.find(c.source);
  if (it == values_.end()) {
    return Fail(c.softmax, "attention reads '" + c.source + "', which spill did not import");
  }
  const Value& x = it->second;
  const bool sequence = x.layout == Layout::kSequence && x.axes.size() == 3 && x.axes[2] == 'C';
  const bool own = c.source_layout == "NC1T" && x.Spatial() && x.chw[1] == 1;
  if (!sequence && !own) {
    return Fail(c.softmax, "attention reads '" + c.source + "', which spill holds as " +
                               (x.layout == Layout::kSequence ? "a sequence (" + x.axes + ")"
                                                              : std::string("an image")) +
                               ", not with its features last");
  }
  // Named after its module ("/attn/Softmax": attn), or the module's core
  // where its in-projection took the name (nn.MultiheadAttention's).
  const std::string module = ModuleName(c.softmax);
  const std::string name = module.empty()             ? LayerName(c.softmax, "")
                           : names_.count(module) > 0 ? UniqueName(module + ".core")
                                                      : UniqueName(module);
  Emit(name, "attention", {x.ref},
       "heads: " + std::to_string(c.heads) + (c.causal ? ", causal: true" : ""));
  Value v;
  v.ref = name;
  v.chw = {c.width, 1, c.steps};
  if (c.layout == "NC1T") {
    v.dims = {c.width, 1, c.steps};
  } else {
    v.layout = Layout::kSequence;
    v.axes = c.layout;
    for (char a : c.layout) {
      if (a == 'T') v.dims.push_back(c.steps);
      if (a == 'C') v.dims.push_back(c.width);
    }
  }
  return ProduceValue(node, 0, v);
}

namespace {

bool TransposeView(const onnx::NodeProto& n, View* v, std::string* why) {
  const int64_t rank = static_cast<int64_t>(v->axes.size());
  std::vector<int64_t> perm = AttrInts(n, "perm", {});
  if (perm.empty()) {
    for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t a = 0; a < static_cast<int64_t>(sorted.size()); ++a) {
    if (sorted[a] != a || static_cast<int64_t>(perm.size()) != rank) {
      *why = "a Transpose by " + List(perm) + " of " + DescribeView(*v);
      return false;
    }
  }
  std::vector<Axis> axes;
  for (int64_t p : perm) axes.push_back(v->axes[p]);
  v->axes = axes;
  return true;
}

// Squeeze and Unsqueeze: axes of size 1 taken out or put in, given as an
// attribute (opsets below 13) or a constant input.
bool UnitAxesView(const OnnxGraph& g, const onnx::NodeProto& n, View* v, std::string* why) {
  std::vector<int64_t> axes = AttrInts(n, "axes", {});
  if (n.input_size() > 1) axes = IntsOf(g, g.Constant(n.input(1)));
  const bool squeeze = n.op_type() == "Squeeze";
  const int64_t rank =
      static_cast<int64_t>(v->axes.size()) + (squeeze ? 0 : static_cast<int64_t>(axes.size()));
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  if (squeeze) {
    for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
      if (*a < 0 || *a >= rank || !v->Flat(*a, *a + 1).empty()) {
        *why = "a Squeeze of an axis that is not 1";
        return false;
      }
      v->axes.erase(v->axes.begin() + *a);
    }
    return true;
  }
  for (int64_t a : axes) {
    if (a < 0 || a > static_cast<int64_t>(v->axes.size())) {
      *why = "an Unsqueeze at axis " + std::to_string(a) + " of " + DescribeView(*v);
      return false;
    }
    v->axes.insert(v->axes.begin() + a, Axis{});
  }
  return true;
}

// The features [begin, begin + size) of `extent` that a Slice, Split (its
// output `output`) or Gather (one, begin) takes along `axis`.
bool FeatureRange(const OnnxGraph& g, const onnx::NodeProto& n, const std::string& output,
                  int64_t extent, int64_t* begin, int64_t* size, std::string* why) {
  const std::string& op = n.op_type();
  if (op == "Slice") {
    std::vector<int64_t> starts = IntsOf(g, g.Constant(n.input(1)));
    std::vector<int64_t> ends = IntsOf(g, g.Constant(n.input(2)));
    int64_t first = starts[0], end = ends[0];
    if (first < 0) first += extent;
    if (end < 0) end += extent;
    *begin = std::max<int64_t>(0, std::min(first, extent));
    *size = std::max<int64_t>(*begin, std::min(end, extent)) - *begin;
    return true;
  }
  if (op == "Gather") {
    const onnx::TensorProto* t = g.Constant(n.input(1));
    const std::vector<int64_t> index = IntsOf(g, t != nullptr && t->dims_size() == 0 ? t : nullptr);
    if (index.size() != 1) {
      *why = "a Gather by other than one constant index";
      return false;
    }
    *begin = index[0] < 0 ? index[0] + extent : index[0];
    *size = 1;
    return true;
  }
  std::vector<int64_t> parts = AttrInts(n, "split", {});  // Split
  if (n.input_size() > 1 && !n.input(1).empty()) parts = IntsOf(g, g.Constant(n.input(1)));
  if (parts.empty() && extent % n.output_size() == 0) {
    parts.assign(n.output_size(), extent / n.output_size());
  }
  int k = 0;
  while (k < n.output_size() && n.output(k) != output) ++k;
  if (k == n.output_size() || static_cast<int>(parts.size()) != n.output_size()) {
    *why = "a Split whose parts do not match its outputs";
    return false;
  }
  *begin = std::accumulate(parts.begin(), parts.begin() + k, int64_t{0});
  *size = parts[k];
  return true;
}

// The axis a Slice, Split or Gather takes features along; -1 for a Slice
// spill does not follow (more than one axis, a step, computed bounds).
int64_t TakenAxis(const OnnxGraph& g, const onnx::NodeProto& n, int64_t rank) {
  int64_t axis = AttrInt(n, "axis", 0);
  if (n.op_type() == "Slice") {
    std::vector<std::vector<int64_t>> args;
    for (int k = 1; k < 5; ++k) {
      args.push_back(k < n.input_size() ? IntsOf(g, g.Constant(n.input(k)))
                                        : std::vector<int64_t>());
    }
    const bool axes_given = n.input_size() > 3 && !n.input(3).empty();
    const bool steps_given = n.input_size() > 4 && !n.input(4).empty();
    if (args[0].size() != 1 || args[1].size() != 1 || args[2].size() != (axes_given ? 1u : 0u) ||
        (steps_given && (args[3].size() != 1 || args[3][0] != 1))) {
      return -1;
    }
    axis = args[2].empty() ? 0 : args[2][0];
  }
  return axis < 0 ? axis + rank : axis;
}

// Slice, Split and Gather take features out of an axis holding them alone.
bool TakeFeatures(const OnnxGraph& g, const onnx::NodeProto& n, const std::string& output, View* v,
                  std::string* why) {
  const int64_t rank = static_cast<int64_t>(v->axes.size());
  const int64_t axis = TakenAxis(g, n, rank);
  const Atom* atom = axis >= 0 && axis < rank ? Single(v->axes[axis]) : nullptr;
  if (atom == nullptr || atom->kind != 'c') {
    *why = n.op_type() + " of " + DescribeView(*v) + " other than of one axis holding features " +
           "alone (by constant bounds, without a step)";
    return false;
  }
  int64_t begin = 0, size = 0;
  if (!FeatureRange(g, n, output, atom->size, &begin, &size, why)) return false;
  Atom taken = *atom;
  taken.size = size;
  v->offset += begin * atom->stride;
  if (n.op_type() == "Gather") {
    v->axes.erase(v->axes.begin() + axis);
  } else {
    v->axes[axis] = {taken};
  }
  return true;
}

}  // namespace

// Applies view node `node`, read for its output `output`, to `v`; false
// (with `why`) where it is none spill follows.
bool Importer::ApplyView(int node, const std::string& output, View* v, std::string* why) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  const std::string& op = n.op_type();
  if (op == "Identity") return true;
  if (op == "Div" || op == "Mul") {
    float s = 1;
    ScalarConstant(n.input(1), &s);
    v->scale = op == "Div" ? v->scale / s : v->scale * s;
    return true;
  }
  if (op == "Transpose") return TransposeView(n, v, why);
  if (op == "Squeeze" || op == "Unsqueeze") return UnitAxesView(g_, n, v, why);
  if (op == "Reshape") {
    std::vector<bool> batches;
    auto dims = BatchDims(n.output(0), &batches);
    if (!dims.ok()) {
      *why = dims.status().message();
      return false;
    }
    std::vector<Dim> target;
    for (size_t a = 0; a < dims->size(); ++a) target.push_back({(*dims)[a], batches[a]});
    return ReshapeView(v, target, why);
  }
  return TakeFeatures(g_, n, output, v, why);
}

Status Importer::ClassToken(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  auto token = n.input_size() == 2 ? broadcasts_.find(n.input(0)) : broadcasts_.end();
  auto seq = n.input_size() == 2 ? values_.find(n.input(1)) : values_.end();
  const bool sequence = seq != values_.end() && seq->second.layout == Layout::kSequence &&
                        seq->second.axes.size() == 3;
  const bool own = seq != values_.end() && seq->second.Spatial() && seq->second.chw[1] == 1;
  if (token == broadcasts_.end() || (!sequence && !own)) {
    return Fail(node,
                "spill imports a Concat with an Expand of a constant over the batch as a " +
                    std::string("class token put before a sequence: Concat(token, sequence)"));
  }
  const Value& x = seq->second;
  const int64_t rank = own ? 4 : 3, t = own ? 3 : static_cast<int64_t>(x.axes.find('T'));
  int64_t axis = AttrInt(n, "axis", 0);
  if (axis < 0) axis += rank;
  const onnx::TensorProto* constant = g_.Constant(token->second);
  if (axis != t || constant == nullptr) {
    return Fail(node, "a class token is put before the positions (axis " + std::to_string(t) +
                          " of " + x.axes + "), not along axis " + std::to_string(axis));
  }
  const std::string name = LayerName(node, token->second);
  SPILL_RETURN_IF_ERROR(Weight(node, name, "token", *constant, {1, x.chw[0], 1, 1}));
  Emit(name, "class_token", {x.ref}, "");
  Value v = x;
  v.ref = name;
  v.chw[2] += 1;
  v.dims[t - (t > x.BatchAxis() ? 1 : 0)] += 1;  // the dims leave the batch out
  return ProduceValue(node, 0, v);
}

Status Importer::PositionTable(int node, const Value& x, const onnx::TensorProto& table) {
  const int64_t channels = x.chw[0], steps = x.chw[2];
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(table, g_.label));
  const bool own = x.layout != Layout::kSequence;  // spill's (N, C, 1, T)
  if ((!own && x.axes.size() != 3) || static_cast<int64_t>(values.size()) != channels * steps) {
    return Fail(node, "an Add of the constant '" + table.name() + "' to " + x.axes +
                          ": spill adds a table of the sequence's shape (a position embedding) " +
                          "or per-feature values");
  }
  // ONNX's order (the batch axis of size 1) to spill's C x length.
  std::vector<float> spill(values.size());
  // Strides of T and C in the table, whose axes are x's with the batch as 1.
  int64_t stride_t = 1, stride_c = steps, stride = 1;
  for (int64_t a = own ? -1 : 2; a >= 0; --a) {
    if (x.axes[a] == 'T') stride_t = stride, stride *= steps;
    if (x.axes[a] == 'C') stride_c = stride, stride *= channels;
  }
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t t = 0; t < steps; ++t) spill[c * steps + t] = values[t * stride_t + c * stride_c];
  }
  const std::string name = LayerName(node, table.name());
  net_.params["params/" + name + "/table"] =
      NpyArray::Floats({1, channels, 1, steps}, spill.data());
  Emit(name, "positions", {x.ref}, "length: " + std::to_string(steps));
  Value v = x;
  v.ref = name;
  return ProduceValue(node, 0, v);
}

Status Importer::TakeToken(int node, const Value& x) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const onnx::TensorProto* t = g_.Constant(n.input(1));
  auto index = IntsOf(g_, t != nullptr && t->dims_size() == 0 ? t : nullptr);
  int64_t axis = AttrInt(n, "axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(x.axes.size());
  std::string rest = x.axes;
  if (axis >= 0 && axis < static_cast<int64_t>(rest.size())) rest.erase(axis, 1);
  if (index.size() != 1 || axis != static_cast<int64_t>(x.axes.find('T')) || rest != "NC") {
    return Fail(node, "spill imports a Gather of a sequence (" + x.axes + ") as one position " +
                          "taken out of it: a constant scalar index along the positions, " +
                          "leaving (N, C)");
  }
  const std::string name = LayerName(node, "");
  Emit(name, "token", {x.ref}, "index: " + std::to_string(index[0]));
  Value v;
  v.ref = name;
  v.chw = {x.chw[0], 1, 1};
  v.dims = {x.chw[0]};
  return ProduceValue(node, 0, v);
}

Status Importer::SequenceLinear(int node, const Value& x, const std::vector<float>& values,
                                int64_t k, const onnx::TensorProto* b, int out_node,
                                const std::string& weight_name) {
  const int64_t c = x.chw[0];
  std::vector<float> weight(values.size());  // (C, K) as K x C x 1 x 1
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t o = 0; o < k; ++o) weight[o * c + i] = values[i * k + o];
  }
  std::vector<float> bias;
  if (b != nullptr) {
    SPILL_ASSIGN_OR_RETURN(bias, OnnxFloats(*b, g_.label));
    if (static_cast<int64_t>(bias.size()) != k || b->dims_size() != 1) {
      return Fail(out_node,
                  "the bias '" + b->name() + "' must have " + std::to_string(k) + " values");
    }
  }
  // A sequence's per-step nn.Linear is named after its module ("/fc/MatMul":
  // fc) when its weight has no name of its own ("onnx::MatMul_12").
  const bool module = x.layout == Layout::kSequence && weight_name.find("::") != std::string::npos;
  const std::string name = module ? ModuleLayerName(node) : LayerName(node, weight_name);
  net_.params["params/" + name + "/weight"] = NpyArray::Floats({k, c, 1, 1}, weight.data());
  if (b != nullptr) {
    net_.params["params/" + name + "/bias"] = NpyArray::Floats({1, k, 1, 1}, bias.data());
  }
  Emit(name, "convolution", {x.ref},
       "filters: " + std::to_string(k) + ", kernel: 1, bias: " + (b != nullptr ? "true" : "false"));
  Value v = x;
  v.ref = name;
  v.chw[0] = k;
  v.dims[x.ChannelAxis()] = k;
  return ProduceValue(out_node, 0, v);
}

}  // namespace onnx_import
}  // namespace spill
