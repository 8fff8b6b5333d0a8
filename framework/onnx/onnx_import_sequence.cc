// The ONNX importer's sequences: embeddings, LSTM and GRU, and the views
// PyTorch writes around them.
//
// spill holds a sequence batch as N x C x 1 x T (time along the width).
// ONNX holds the same numbers in several layouts - batch-first (N, T, C)
// after nn.Embedding and before a per-step nn.Linear, time-major (T, N, C)
// for the LSTM and GRU operators, their output Y as (T, D, N, H), the scores
// as (N, C, T) - with Transposes, Squeezes and Reshapes between them. Each
// is a Value of Layout::kSequence whose `axes` name what every ONNX axis
// holds; the views change no byte of the spill tensor, only the axes.
//
//   Gather(table, ids)            embedding (ids: the input, int64 (N, T))
//   LSTM, GRU                     lstm, gru; PyTorch's nn.LSTM of k layers
//                                 (k nodes, one per layer, joined by Squeeze or
//                                 Transpose + Reshape) is one layer of k levels
//   MatMul (+ Add) by constants   a 1x1 convolution (a per-step nn.Linear)
//   Transpose, Squeeze, Reshape   views: any permutation; the directions axis
//                                 dropped when 1 or merged with the hidden units
//
// ONNX's gates come in another order than PyTorch's (and spill's): LSTM
// i, o, f, c for PyTorch's i, f, g, o, GRU z, r, h for r, z, n; the rows of
// W, R and B are reordered. GRU must have linear_before_reset = 1 (PyTorch's
// formula). Initial states must be zero: absent, zero constants, or
// ConstantOfShape / Expand of the batch size as PyTorch writes them (those
// nodes are marked converted before the walk, MarkInitialStates). Anything
// else - a reverse-only direction, clip, input_forget, other activations,
// layout 1, sequence lengths other than T, peepholes - is an error naming
// the node.
#include <algorithm>

#include "framework/io/checkpoint.h"
#include "framework/onnx/onnx_importer.h"

namespace spill {
namespace onnx_import {
namespace {

// Nodes followed back from one initial state: PyTorch writes about ten.
constexpr int kMaxStateChain = 64;
// Views (Transpose, Squeeze, Reshape) between two levels of one stack.
constexpr int kMaxViewsBetweenLevels = 8;

// For each of PyTorch's gate blocks, the ONNX block holding it.
const std::vector<int64_t> kLstmFromOnnx = {0, 2, 3, 1};  // i, f, g, o from i, o, f, c
const std::vector<int64_t> kGruFromOnnx = {1, 0, 2};      // r, z, n from z, r, h

// `values` holds gates.size() blocks of `block` floats in ONNX's order,
// starting at `offset`; returns them in PyTorch's.
std::vector<float> PyTorchGates(const std::vector<float>& values, int64_t offset, int64_t block,
                                const std::vector<int64_t>& from_onnx) {
  std::vector<float> out;
  out.reserve(from_onnx.size() * block);
  for (int64_t source : from_onnx) {
    auto begin = values.begin() + offset + source * block;
    out.insert(out.end(), begin, begin + block);
  }
  return out;
}

bool AllZero(const onnx::TensorProto& t, const std::string& label) {
  auto values = OnnxFloats(t, label);
  if (!values.ok()) return false;
  for (float v : *values) {
    if (v != 0) return false;
  }
  return true;
}

// "(T, N, C) [7, N, 6]"
std::string Describe(const Value& v) {
  std::string axes, dims;
  size_t k = 0;
  for (char a : v.axes) {
    axes += (axes.empty() ? "" : ", ") + std::string(1, a);
    dims += dims.empty() ? "" : ", ";
    dims += a == 'N' ? "N" : std::to_string(v.dims[k++]);
  }
  if (v.layout != Layout::kSequence) return "an image " + List(v.dims);
  return "a sequence viewed as (" + axes + ") [" + dims + "]";
}

// The operators that read a sequence as they read an image: elementwise, or
// along the channels (ChannelAxis).
bool ReadsAnyLayout(const std::string& op) {
  static const char* const kOps[] = {
      "Relu", "LeakyRelu",   "Dropout",   "Clip",       "Sigmoid",
      "Tanh", "HardSigmoid", "HardSwish", "Add",        "Mul",
      "Sub",  "Div",         "Concat",    "Slice",      "Split",
      "Erf",  "Pow",         "Sqrt",      "ReduceMean", "LayerNormalization",
  };
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

}  // namespace

StatusOr<std::vector<int64_t>> Importer::SequenceDims(int node, const std::string& value,
                                                      const std::string& axes) const {
  auto it = g_.dims.find(value);
  const size_t batch = axes.find_first_of("NMB");
  if (it == g_.dims.end() || it->second.size() != axes.size() || batch == std::string::npos) {
    return Fail(node, "the shape of '" + value + "' is not inferred as a tensor of rank " +
                          std::to_string(axes.size()) + "; spill plans memory from static shapes");
  }
  std::vector<int64_t> dims;
  for (size_t axis = 0; axis < axes.size(); ++axis) {
    const int64_t d = it->second[axis];
    if (axis == batch) {
      if (d != kDynamicOnnxDim && batch_ != kDynamicOnnxDim && d != batch_) {
        return Fail(node, "'" + value + "' has " + std::to_string(d) + " at axis " +
                              std::to_string(axis) + ", where spill keeps the batch (" +
                              std::to_string(batch_) + ")");
      }
      continue;
    }
    if (d == kDynamicOnnxDim || d <= 0) {
      return Fail(node, "'" + value + "' has a dynamic or invalid dimension (axis " +
                            std::to_string(axis) + "); spill plans memory from static shapes: " +
                            "only the batch axis may be dynamic");
    }
    dims.push_back(d);
  }
  return dims;
}

StatusOr<bool> Importer::ConvertSequence(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const std::string& op = n.op_type();
  if (op == "LSTM" || op == "GRU") {
    SPILL_RETURN_IF_ERROR(Recurrent(node));
    return true;
  }
  if (op == "ConstantOfShape" || op == "Expand") {
    return Fail(node, "spill imports " + op + " only as the initial state of an LSTM or GRU " +
                          "(computed from constants and the batch size, read by nothing else)");
  }
  if (op == "Add" && n.input_size() == 2) {  // a position table added to a sequence
    for (int k = 0; k < 2; ++k) {
      auto x = values_.find(n.input(k));
      const onnx::TensorProto* t = g_.Constant(n.input(1 - k));
      if (x == values_.end() || t == nullptr) continue;
      const bool own = x->second.Spatial() && x->second.chw[1] == 1;  // spill's (N, C, 1, T)
      if (x->second.layout != Layout::kSequence && !own) continue;
      int64_t count = 1;
      for (int64_t d : t->dims()) count *= d;
      if (count <= x->second.chw[0] || x->second.chw[2] == 1) continue;
      SPILL_RETURN_IF_ERROR(PositionTable(node, x->second, *t));
      return true;
    }
  }
  if (op == "Gather" && n.input_size() == 2) {
    auto ids = values_.find(n.input(1));
    if (ids != values_.end() && ids->second.layout == Layout::kSequence) {
      SPILL_RETURN_IF_ERROR(Embedding(node));
      return true;
    }
  }
  auto it = values_.find(n.input(0));
  if (it == values_.end()) return false;
  const Value x = it->second;
  if (op == "Unsqueeze" && x.Channels() && x.dims.size() == 1) {  // (N, C) to (N, C, 1, 1)
    auto out = g_.dims.find(n.output(0));
    if (out == g_.dims.end() || out->second.size() != 4 || out->second[2] != 1 ||
        out->second[3] != 1) {
      return false;
    }
    Value v = x;
    v.dims = {x.chw[0], 1, 1};
    SPILL_RETURN_IF_ERROR(ProduceValue(node, 0, v));
    return true;
  }
  if (x.layout != Layout::kSequence) {
    // (N, C, 1, T) reshaped to (N, C, T): spill's own export of a sequence;
    // (N, C, H, W) to (N, C, H W): an image's pixels as tokens.
    auto out = g_.dims.find(n.output(0));
    if (op != "Reshape" || !x.Spatial() || out == g_.dims.end() || out->second.size() != 3 ||
        out->second[1] != x.chw[0] || out->second[2] != x.chw[1] * x.chw[2]) {
      return false;
    }
    if (x.chw[1] != 1) {
      const std::string name = LayerName(node, "");
      Emit(name, "tokens", {x.ref}, "");
      Value v = x;
      v.ref = name;
      v.chw = {x.chw[0], 1, x.chw[1] * x.chw[2]};
      SPILL_RETURN_IF_ERROR(SequenceReshape(node, v));
      return true;
    }
    SPILL_RETURN_IF_ERROR(SequenceReshape(node, x));
    return true;
  }
  Status status;
  if (op == "Transpose") {
    status = SequenceTranspose(node, x);
  } else if (op == "Squeeze") {
    status = SequenceSqueeze(node, x);
  } else if (op == "Reshape") {
    status = SequenceReshape(node, x);
  } else if (op == "Identity") {
    values_[n.output(0)] = x;
  } else if (op == "Gather" && g_.Constant(n.input(1)) != nullptr) {
    status = TakeToken(node, x);
  } else if (op == "Gemm") {
    status = SequenceGemm(node, x);
  } else if (op == "MatMul") {
    if (x.axes.back() != 'C') {
      return Fail(node, "multiplies " + Describe(x) + " along its last axis, which is not its " +
                            "features: spill multiplies a sequence's features (the last axis C) " +
                            "by a constant");
    }
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* w, ConstIn(node, 1));
    status = ChannelsLastMatMul(node, x, *w);  // a 1x1 convolution
  } else if (ReadsAnyLayout(op) && x.axes.find('C') != std::string::npos) {
    return false;  // not the ids: those are only indices
  } else if (op == "Shape" || op == "Cast" || op == "Unsqueeze") {
    return false;  // shape arithmetic, which the folding left
  } else {
    status = Fail(node, "reads '" + n.input(0) + "', " + Describe(x) + ": spill imports " + op +
                            " of images only; it reads sequences through Gather (an embedding), " +
                            "LSTM, GRU, MatMul by a constant, Transpose, Squeeze, Reshape and " +
                            "elementwise operators");
  }
  SPILL_RETURN_IF_ERROR(status);
  return true;
}

Status Importer::SequenceGemm(int node, const Value& x) {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (AttrFloat(n, "alpha", 1.0f) != 1.0f || AttrFloat(n, "beta", 1.0f) != 1.0f ||
      AttrInt(n, "transA", 0) != 0 || x.axes.size() != 2 || x.axes.back() != 'C') {
    return Fail(node, "spill imports Gemm of a sequence (" + x.axes + ") with alpha = beta = 1, " +
                          "transA = 0, of a view (positions and batch, features)");
  }
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* w, ConstIn(node, 1));
  const bool transposed = AttrInt(n, "transB", 0) != 0;
  const int64_t c = x.chw[0];
  if (w->dims_size() != 2 || w->dims(transposed ? 1 : 0) != c) {
    return Fail(node,
                "the weight's shape does not match the input's " + std::to_string(c) + " features");
  }
  const int64_t k = w->dims(transposed ? 0 : 1);
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(*w, g_.label));
  if (transposed) {  // (K, C) to (C, K)
    std::vector<float> ck(values.size());
    for (int64_t o = 0; o < k; ++o) {
      for (int64_t i = 0; i < c; ++i) ck[i * k + o] = values[o * c + i];
    }
    values.swap(ck);
  }
  const onnx::TensorProto* bias = nullptr;
  if (HasInput(node, 2)) {
    SPILL_ASSIGN_OR_RETURN(bias, ConstIn(node, 2));
  }
  return SequenceLinear(node, x, values, k, bias, node, n.input(1));
}

Status Importer::Embedding(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const Value ids = values_.at(n.input(1));
  if (ids.axes.find('C') != std::string::npos) {
    return Fail(node, "indexes by '" + n.input(1) + "', " + Describe(ids) +
                          ": spill imports Gather as an embedding, a constant table indexed by " +
                          "the input's integer ids (N, T)");
  }
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* table, ConstIn(node, 0));
  if (AttrInt(n, "axis", 0) != 0 || table->dims_size() != 2) {
    return Fail(node, "spill imports Gather as an embedding: rows (axis 0) of a table of shape " +
                          std::string("(vocabulary, size)"));
  }
  const int64_t vocabulary = table->dims(0), size = table->dims(1);
  const std::string name = LayerName(node, n.input(0));
  SPILL_RETURN_IF_ERROR(Weight(node, name, "weight", *table, {vocabulary, size, 1, 1}));
  Emit(name, "embedding", {ids.ref},
       "vocabulary: " + std::to_string(vocabulary) + ", size: " + std::to_string(size));
  Value v = ids;
  v.ref = name;
  v.axes += 'C';
  v.dims.push_back(size);
  v.chw[0] = size;
  return ProduceValue(node, 0, v);
}

Status Importer::RecurrentAttributes(int node, bool lstm, int64_t* directions) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  const std::string direction = AttrString(n, "direction", "forward");
  if (direction == "reverse") {
    return Fail(node, "direction reverse: spill's lstm and gru run forward, or both ways " +
                          std::string("(bidirectional)"));
  }
  if (direction != "forward" && direction != "bidirectional") {
    return Fail(node, "direction '" + direction + "' is not forward, reverse or bidirectional");
  }
  *directions = direction == "bidirectional" ? 2 : 1;
  if (AttrInt(n, "layout", 0) != 0) {
    return Fail(node, "layout 1 (batch-first X and Y): spill imports ONNX's default layout 0 " +
                          std::string("(time-major, as PyTorch exports)"));
  }
  if (FindAttribute(n, "clip") != nullptr) {
    return Fail(node, "clip: spill's cells do not clip their inputs");
  }
  if (lstm && AttrInt(n, "input_forget", 0) != 0) {
    return Fail(node, "input_forget 1 couples the input and forget gates; spill's LSTM " +
                          std::string("(PyTorch's) does not"));
  }
  if (!lstm && AttrInt(n, "linear_before_reset", 0) != 1) {
    return Fail(node, "linear_before_reset 0 resets the hidden state before its product; " +
                          std::string("spill's GRU (PyTorch's) computes linear_before_reset = 1"));
  }
  if (const onnx::AttributeProto* a = FindAttribute(n, "activations")) {
    const std::vector<std::string> cell = lstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                               : std::vector<std::string>{"Sigmoid", "Tanh"};
    std::vector<std::string> defaults, given(a->strings().begin(), a->strings().end());
    for (int64_t d = 0; d < *directions; ++d) {
      defaults.insert(defaults.end(), cell.begin(), cell.end());
    }
    if (given != defaults) {
      return Fail(node, "activations other than ONNX's defaults (Sigmoid, Tanh" +
                            std::string(lstm ? ", Tanh" : "") +
                            " per direction): spill's cells are PyTorch's");
    }
  }
  return Status::Ok();
}

Status Importer::RecurrentDefaults(int node, bool lstm, int64_t steps) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (HasInput(node, 4)) {
    const onnx::TensorProto* lengths = g_.Constant(n.input(4));
    bool full = lengths != nullptr;
    if (full) {
      auto values = OnnxInts(*lengths, g_.label);
      full = values.ok();
      for (int64_t v : full ? *values : std::vector<int64_t>()) full = full && v == steps;
    }
    if (!full) {
      return Fail(node, "sequence_lens '" + n.input(4) + "': spill runs every sequence for " +
                            "all its " + std::to_string(steps) + " steps (a constant of " +
                            std::to_string(steps) + "s, or none)");
    }
  }
  const int states = lstm ? 2 : 1;
  for (int k = 5; k < 5 + states; ++k) {
    if (!HasInput(node, k)) continue;
    const onnx::TensorProto* c = g_.Constant(n.input(k));
    const bool zero = zero_states_.count(n.input(k)) || (c != nullptr && AllZero(*c, g_.label));
    if (!zero) {
      return Fail(node, std::string(k == 5 ? "initial_h" : "initial_c") + " '" + n.input(k) +
                            "' is not zero: spill's lstm and gru start from zero states " +
                            "(give none, zeros, or PyTorch's zeros of the batch size)");
    }
  }
  if (lstm && HasInput(node, 7)) {
    const onnx::TensorProto* p = g_.Constant(n.input(7));
    if (p == nullptr || !AllZero(*p, g_.label)) {
      return Fail(node,
                  "peephole weights P '" + n.input(7) + "': spill's LSTM (PyTorch's) has none");
    }
  }
  return Status::Ok();
}

Status Importer::RecurrentWeights(int node, bool lstm, const std::string& layer, int64_t level,
                                  int64_t directions, int64_t hidden, int64_t inputs) {
  const std::vector<int64_t>& order = lstm ? kLstmFromOnnx : kGruFromOnnx;
  const int64_t gates = static_cast<int64_t>(order.size()), rows = gates * hidden;
  const onnx::TensorProto* t[3] = {nullptr, nullptr, nullptr};  // W, R, B
  for (int k = 0; k < 3; ++k) {
    if (k == 2 && !HasInput(node, 3)) continue;
    SPILL_ASSIGN_OR_RETURN(t[k], ConstIn(node, k + 1));
  }
  const std::vector<int64_t> want[3] = {
      {directions, rows, inputs}, {directions, rows, hidden}, {directions, 2 * rows}};
  const char* what[3] = {"W", "R", "B"};
  std::vector<float> values[3];
  for (int k = 0; k < 3; ++k) {
    if (t[k] == nullptr) continue;
    const std::vector<int64_t> dims(t[k]->dims().begin(), t[k]->dims().end());
    if (dims != want[k]) {
      return Fail(node, std::string(what[k]) + " '" + t[k]->name() + "' has the shape " +
                            List(dims) + " where " + List(want[k]) + " was expected (" +
                            std::to_string(directions) + " direction(s), " + std::to_string(gates) +
                            " gates of " + std::to_string(hidden) + " units, " +
                            std::to_string(inputs) + " inputs)");
    }
    SPILL_ASSIGN_OR_RETURN(values[k], OnnxFloats(*t[k], g_.label));
    Status finite = CheckParameterValues(values[k].data(), static_cast<int64_t>(values[k].size()),
                                         false, "tensor '" + t[k]->name() + "'");
    if (!finite.ok()) return Fail(node, finite.message());
  }
  const std::string level_suffix = "_l" + std::to_string(level);
  for (int64_t d = 0; d < directions; ++d) {
    const std::string suffix = level_suffix + (d == 1 ? "_reverse" : "");
    const std::string prefix = "params/" + layer + "/";
    std::vector<float> w = PyTorchGates(values[0], d * rows * inputs, hidden * inputs, order);
    std::vector<float> r = PyTorchGates(values[1], d * rows * hidden, hidden * hidden, order);
    net_.params[prefix + "weight_ih" + suffix] = NpyArray::Floats({rows, inputs, 1, 1}, w.data());
    net_.params[prefix + "weight_hh" + suffix] = NpyArray::Floats({rows, hidden, 1, 1}, r.data());
    if (t[2] == nullptr) continue;
    std::vector<float> bw = PyTorchGates(values[2], d * 2 * rows, hidden, order);
    std::vector<float> br = PyTorchGates(values[2], d * 2 * rows + rows, hidden, order);
    net_.params[prefix + "bias_ih" + suffix] = NpyArray::Floats({1, rows, 1, 1}, bw.data());
    net_.params[prefix + "bias_hh" + suffix] = NpyArray::Floats({1, rows, 1, 1}, br.data());
  }
  return Status::Ok();
}

Importer::RecurrentStack* Importer::StackBelow(int node, const Value& x, int64_t hidden,
                                               int64_t directions, bool bias) {
  const onnx::NodeProto& n = g_.graph().node(node);
  auto it = stacks_.find(x.ref);
  if (it == stacks_.end()) return nullptr;
  RecurrentStack& below = it->second;
  if (below.op != n.op_type() || below.hidden != hidden || below.directions != directions ||
      below.bias != bias || below.module != ModuleName(node)) {
    return nullptr;
  }
  // Back from X to the top level's Y through views that nothing else reads.
  std::string value = n.input(0);
  int reader = node;
  for (int views = 0; views <= kMaxViewsBetweenLevels; ++views) {
    auto producer = producers_.find(value);
    if (SoleConsumer(value) != reader || producer == producers_.end()) return nullptr;
    const onnx::NodeProto& p = g_.graph().node(producer->second);
    if (producer->second == below.last) return p.output(0) == value ? &below : nullptr;
    if (p.op_type() != "Transpose" && p.op_type() != "Squeeze" && p.op_type() != "Reshape" &&
        p.op_type() != "Identity") {
      return nullptr;
    }
    reader = producer->second;
    value = p.input(0);
  }
  return nullptr;
}

Status Importer::Recurrent(int node) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const bool lstm = n.op_type() == "LSTM";
  SPILL_ASSIGN_OR_RETURN(const Value* in, In(node, 0));
  const Value x = *in;
  if (x.layout != Layout::kSequence || x.axes != "TNC") {
    return Fail(node, "X '" + n.input(0) + "' is " + Describe(x) + "; ONNX's " + n.op_type() +
                          " reads a time-major sequence (T, N, C)");
  }
  int64_t directions = 1;
  SPILL_RETURN_IF_ERROR(RecurrentAttributes(node, lstm, &directions));
  SPILL_RETURN_IF_ERROR(OnlyFirstOutput(node));
  const int64_t steps = x.dims[0], inputs = x.dims[1];
  SPILL_RETURN_IF_ERROR(RecurrentDefaults(node, lstm, steps));
  SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* r, ConstIn(node, 2));
  int64_t hidden = AttrInt(n, "hidden_size", 0);
  if (hidden == 0 && r->dims_size() == 3) hidden = r->dims(2);
  if (hidden < 1) return Fail(node, "hidden_size is missing and R does not give it");
  const bool bias = HasInput(node, 3);
  RecurrentStack* below = StackBelow(node, x, hidden, directions, bias);
  std::string name;
  int64_t level = 0;
  if (below != nullptr) {
    name = x.ref;
    level = below->levels;
  } else {
    name = ModuleLayerName(node);
  }
  SPILL_RETURN_IF_ERROR(RecurrentWeights(node, lstm, name, level, directions, hidden, inputs));
  if (below == nullptr) {
    below = &(stacks_[name] = RecurrentStack{n.op_type(), ModuleName(node), x.ref, hidden,
                                             directions, 0, bias, layers_.size()});
    layers_.emplace_back();  // written below
  }
  below->levels = level + 1;
  below->last = node;
  layers_[below->entry] =
      Entry(name, lstm ? "lstm" : "gru", {below->input},
            "hidden: " + std::to_string(hidden) + ", layers: " + std::to_string(below->levels) +
                ", bidirectional: " + (directions == 2 ? "true" : "false") +
                ", bias: " + (bias ? "true" : "false"));
  const Value y{name,
                {steps, directions, hidden},
                {directions * hidden, 1, steps},
                Layout::kSequence,
                "TDNH"};
  return ProduceValue(node, 0, y);
}

Status Importer::SequenceTranspose(int node, const Value& x) {
  const onnx::NodeProto& n = g_.graph().node(node);
  const int64_t rank = static_cast<int64_t>(x.axes.size());
  std::vector<int64_t> perm = AttrInts(n, "perm", {});
  if (perm.empty()) {  // ONNX's default reverses the axes
    for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t a = 0; valid && a < rank; ++a) valid = sorted[a] == a;
  if (!valid) {
    return Fail(node, "perm " + List(perm) + " is not a permutation of the " +
                          std::to_string(rank) + " axes of " + Describe(x));
  }
  // The full shape with the batch as -1, permuted, the batch taken out again.
  std::vector<int64_t> full = x.dims;
  full.insert(full.begin() + x.BatchAxis(), -1);
  Value v = x;
  v.dims.clear();
  for (int64_t a = 0; a < rank; ++a) {
    v.axes[a] = x.axes[perm[a]];
    if (full[perm[a]] >= 0) v.dims.push_back(full[perm[a]]);
  }
  return ProduceValue(node, 0, v);
}

// Squeeze of the directions axis of a one-way recurrent output: (T, 1, N, H)
// to (T, N, H).
Status Importer::SequenceSqueeze(int node, const Value& x) {
  const onnx::NodeProto& n = g_.graph().node(node);
  std::vector<int64_t> axes = AttrInts(n, "axes", {});
  if (HasInput(node, 1)) {
    SPILL_ASSIGN_OR_RETURN(const onnx::TensorProto* t, ConstIn(node, 1));
    SPILL_ASSIGN_OR_RETURN(axes, OnnxInts(*t, g_.label));
  }
  const int64_t rank = static_cast<int64_t>(x.axes.size());
  const size_t d = x.axes.find('D');
  if (axes.size() == 1 && axes[0] < 0) axes[0] += rank;
  if (d == std::string::npos || axes != std::vector<int64_t>{static_cast<int64_t>(d)} ||
      x.dims[d - (d > x.axes.find('N') ? 1 : 0)] != 1) {
    return Fail(node, "squeezes axes " + List(AttrInts(n, "axes", axes)) + " of " + Describe(x) +
                          ": spill squeezes a sequence only at the directions axis (D) of a " +
                          "one-way LSTM or GRU");
  }
  Value v = x;
  v.axes.erase(d, 1);
  std::replace(v.axes.begin(), v.axes.end(), 'H', 'C');
  v.dims.erase(v.dims.begin() + (d - (d > x.axes.find('N') ? 1 : 0)));
  return ProduceValue(node, 0, v);
}

// The reshapes that keep the tensor's bytes where the views say: the
// directions and hidden units (adjacent, D before H) merged into features;
// a directions axis of 1 dropped; channels-first (N, C, T) to and from
// spill's own (N, C, 1, T).
Status Importer::SequenceReshape(int node, const Value& x) {
  const std::string& out = g_.graph().node(node).output(0);
  Value v = x;
  auto inferred = g_.dims.find(out);
  const size_t rank = inferred == g_.dims.end() ? 0 : inferred->second.size();
  if (x.layout != Layout::kSequence) {  // (N, C, 1, T) to (N, C, T)
    v.layout = Layout::kSequence;
    v.axes = "NCT";
    v.dims = {x.chw[0], x.chw[2]};
    return ProduceValue(node, 0, v);
  }
  if ((x.axes == "MC" || x.axes == "BC") && rank == 3) {  // (T N, C) to (T, N, C)
    const std::vector<int64_t>& d = inferred->second;
    v.axes = x.axes == "MC" ? "TNC" : "NTC";
    v.dims = {x.chw[2], x.chw[0]};
    const int64_t t = x.axes == "MC" ? 0 : 1;
    if (d[t] == x.chw[2] && d[2] == x.chw[0]) return ProduceValue(node, 0, v);
  }
  if (x.axes == "NCT" && rank == 4) {
    v.layout = Layout::kNchw;
    v.axes.clear();
    v.dims = {x.chw[0], 1, x.chw[2]};
    return ProduceValue(node, 0, v);
  }
  const size_t d = x.axes.find('D'), batch = x.axes.find('N');
  auto dims_index = [batch](size_t axis) { return axis - (axis > batch ? 1 : 0); };
  if (rank == x.axes.size()) {  // the same view
    return ProduceValue(node, 0, v);
  }
  if (d != std::string::npos && rank + 1 == x.axes.size()) {
    const size_t i = dims_index(d);
    if (d + 1 < x.axes.size() && x.axes[d + 1] == 'H') {
      v.dims[i] *= v.dims[i + 1];
      v.dims.erase(v.dims.begin() + i + 1);
      v.axes.replace(d, 2, "C");
      return ProduceValue(node, 0, v);
    }
    if (x.dims[i] == 1) {
      v.dims.erase(v.dims.begin() + i);
      v.axes.erase(d, 1);
      std::replace(v.axes.begin(), v.axes.end(), 'H', 'C');
      return ProduceValue(node, 0, v);
    }
  }
  return Fail(node, "reshapes " + Describe(x) + " to rank " + std::to_string(rank) +
                        ": spill reshapes sequences only by merging a recurrent output's " +
                        "directions with its hidden units (D before H), dropping a directions " +
                        "axis of 1, and between (N, C, T) and (N, C, 1, T)");
}

void Importer::MarkInitialStates() {
  const onnx::GraphProto& g = g_.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& out : g.node(i).output()) producers_[out] = i;
  }
  std::map<std::string, std::set<int>> states;  // each zero state and its nodes
  std::set<int> chain;  // the nodes of every state, zero or not (the cell reports those)
  auto state_input = [&g](int node, const std::string& value) {
    const onnx::NodeProto& n = g.node(node);
    if (n.op_type() != "LSTM" && n.op_type() != "GRU") return false;
    for (int k = 0; k < n.input_size(); ++k) {
      const bool state = k == 5 || (k == 6 && n.op_type() == "LSTM");
      if (n.input(k) == value && !state) return false;
    }
    return true;
  };
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "LSTM" && n.op_type() != "GRU") continue;
    for (int k = 5; k <= 6 && k < n.input_size(); ++k) {
      std::set<int> nodes;
      bool zero = true;
      if (n.input(k).empty() || g_.Constant(n.input(k)) != nullptr) continue;
      if (!StateChain(n.input(k), &nodes, 0, &zero)) continue;
      if (zero) states[n.input(k)] = nodes;
      chain.insert(nodes.begin(), nodes.end());
    }
  }
  // Keep the nodes whose outputs feed nothing but the chain and the states.
  std::set<std::string> graph_outputs;
  for (const auto& out : g.output()) graph_outputs.insert(out.name());
  for (bool removed = true; removed;) {
    removed = false;
    for (auto it = chain.begin(); it != chain.end();) {
      bool kept = true;
      for (const std::string& out : g.node(*it).output()) {
        kept = kept && !graph_outputs.count(out);
        auto readers = g_.consumers.find(out);
        if (readers == g_.consumers.end()) continue;
        for (int reader : readers->second) {
          kept = kept && (chain.count(reader) || state_input(reader, out));
        }
      }
      if (kept) {
        ++it;
      } else {
        it = chain.erase(it);
        removed = true;
      }
    }
  }
  for (const auto& [value, nodes] : states) {
    if (std::includes(chain.begin(), chain.end(), nodes.begin(), nodes.end())) {
      zero_states_.insert(value);
    }
  }
  fused_.insert(chain.begin(), chain.end());
}

bool Importer::StateChain(const std::string& value, std::set<int>* nodes, int depth,
                          bool* zero) const {
  if (depth > kMaxStateChain) return false;
  if (const onnx::TensorProto* t = g_.Constant(value)) {
    *zero = *zero && AllZero(*t, g_.label);
    return true;
  }
  auto producer = producers_.find(value);
  if (producer == producers_.end()) return false;
  const onnx::NodeProto& n = g_.graph().node(producer->second);
  const std::string& op = n.op_type();
  bool chain = false;
  if (op == "ConstantOfShape") {
    const onnx::AttributeProto* a = FindAttribute(n, "value");  // none: a float 0
    *zero = *zero && (a == nullptr || (a->has_t() && AllZero(a->t(), g_.label)));
    chain = n.input_size() == 1 && ShapeOnly(n.input(0), nodes, depth + 1);
  } else if (op == "Expand" || op == "Slice" || op == "Squeeze" || op == "Unsqueeze" ||
             op == "Reshape" || op == "Identity") {
    chain = n.input_size() >= 1 && StateChain(n.input(0), nodes, depth + 1, zero);
    for (int k = 1; chain && k < n.input_size(); ++k) {
      chain = n.input(k).empty() || ShapeOnly(n.input(k), nodes, depth + 1);
    }
  }
  if (chain) nodes->insert(producer->second);
  return chain;
}

void Importer::MarkShapeChains() {
  // The shape arithmetic of reshapes and expands that folding could not
  // replace (their targets hold the batch merged with other axes, or later
  // than first): their outputs' shapes are inferred, which is all spill reads.
  const onnx::GraphProto& g = g_.graph();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if ((n.op_type() != "Reshape" && n.op_type() != "Expand") || n.input_size() != 2) continue;
    if (g_.Constant(n.input(1)) != nullptr) continue;
    std::set<int> nodes;
    if (ShapeOnly(n.input(1), &nodes, 0)) fused_.insert(nodes.begin(), nodes.end());
  }
}

bool Importer::ShapeOnly(const std::string& value, std::set<int>* nodes, int depth) const {
  static const char* const kShapeOps[] = {
      "Gather",          "Unsqueeze", "Squeeze", "Concat",  "Cast", "Slice",
      "Identity",        "Add",       "Sub",     "Mul",     "Div",  "Equal",
      "ConstantOfShape", "Where",     "Reshape", "Constant"};
  if (depth > kMaxStateChain) return false;
  if (g_.Constant(value) != nullptr) return true;
  auto producer = producers_.find(value);
  if (producer == producers_.end()) return false;  // a graph input
  if (nodes->count(producer->second)) return true;
  const onnx::NodeProto& n = g_.graph().node(producer->second);
  if (n.op_type() == "Shape") {
    nodes->insert(producer->second);
    return true;
  }
  if (std::find(std::begin(kShapeOps), std::end(kShapeOps), n.op_type()) == std::end(kShapeOps)) {
    return false;
  }
  for (const std::string& in : n.input()) {
    if (!in.empty() && !ShapeOnly(in, nodes, depth + 1)) return false;
  }
  nodes->insert(producer->second);
  return true;
}

}  // namespace onnx_import
}  // namespace spill
