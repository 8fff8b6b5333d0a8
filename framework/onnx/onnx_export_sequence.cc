// The ONNX exporter's sequences: embeddings, lstm and gru, written as
// PyTorch's exports write nn.Embedding, nn.LSTM and nn.GRU, so that the
// importer (onnx_import_sequence.cc) reads them back as the same layers.
//
// A spill sequence N x C x 1 x T is an ONNX (N, C, 1, T) value between
// layers, so the layers of images read it as they are. Around the ONNX
// operators it is viewed as they need it:
//
//   embedding   Gather(table, ids) (N, T, E) -> Transpose (N, E, T)
//               -> Reshape (N, E, 1, T); the ids are the int64 (N, T) input
//   lstm, gru   Reshape (N, C, T) -> Transpose (T, N, C) -> per level: LSTM
//               or GRU (T, D, N, H) -> Squeeze (T, N, H), or Transpose
//               (T, N, D, H) and Reshape (T, N, D*H) -> ... -> Transpose
//               (N, D*H, T) -> Reshape (N, D*H, 1, T)
//
// Each level of a layer is one ONNX node (ONNX's LSTM and GRU are single
// layers), named `<layer>/LSTM`, `<layer>/LSTM_1`, ... as PyTorch names
// them, with W, R and B in ONNX's gate order (LSTM i, o, f, c; GRU z, r, h)
// and GRU's linear_before_reset = 1; no initial states (zero), and no final
// states as an output: `initial: input` and `final: true` are refused. Dropout
// between levels is a training matter: the graph is the evaluation pass.
// An id outside the vocabulary gives spill a zero vector; ONNX's Gather
// leaves it undefined (negative ids count from the end).
#include <algorithm>

#include "framework/onnx/onnx_exporter.h"

namespace spill {
namespace onnx_export {
namespace {

// For each of ONNX's gate blocks, the PyTorch (spill) block holding it.
const std::vector<int64_t> kLstmToOnnx = {0, 3, 1, 2};  // i, o, f, c from i, f, g, o
const std::vector<int64_t> kGruToOnnx = {1, 0, 2};      // z, r, h from r, z, n

// Appends `values`' gate blocks of `block` floats in ONNX's order.
void AppendOnnxGates(const std::vector<float>& values, int64_t block,
                     const std::vector<int64_t>& to_onnx, std::vector<float>* out) {
  for (int64_t source : to_onnx) {
    out->insert(out->end(), values.begin() + source * block, values.begin() + (source + 1) * block);
  }
}

// States as values (initial: input, final: true) are not written: each
// node is exported without ONNX's initial_h/initial_c inputs and Y_h/Y_c
// outputs.
Status RefuseStateValues(const LayerSpec& spec, const std::string& name, bool lstm) {
  const YAML::Node initial = Param(spec, "initial");
  const std::string op = lstm ? "LSTM" : "GRU";
  if (initial.IsDefined() && initial.IsScalar() && initial.Scalar() == "input") {
    const std::string inputs = lstm ? "initial_h and initial_c" : "initial_h";
    return InvalidArgument("layer '" + name + "': initial: input (initial states read from a " +
                           "second input) has no ONNX export: each " + op +
                           " node is written without " + inputs + " (zero states)");
  }
  if (Bool(spec, "final", false)) {
    const std::string outputs = lstm ? "Y_h and Y_c" : "Y_h";
    return InvalidArgument("layer '" + name + "': final: true (the final states as a second " +
                           "output) has no ONNX export: each " + op + " node is written with " +
                           "its output Y only, without " + outputs);
  }
  return Status::Ok();
}

}  // namespace

std::string Exporter::RawConstant(int id, const std::string& suffix,
                                  const std::vector<float>& values,
                                  const std::vector<int64_t>& dims) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(net_.layer(id).name() + "." + suffix);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(values.data(), values.size() * sizeof(float));
  return t->name();
}

StatusOr<std::vector<float>> Exporter::ParamValues(int id, int p) const {
  const TensorInfo& info = s_.tensors[s_.layers[id].params[p]];
  auto it = params_.find("params/" + info.name);
  if (it == params_.end() || it->second.dtype != "<f4" ||
      it->second.numel() != info.shape.numel()) {
    return InvalidArgument(label_ + ": no float32 array 'params/" + info.name + "' of " +
                           info.shape.ToString());
  }
  const float* data = it->second.floats();
  return std::vector<float>(data, data + info.shape.numel());
}

bool Exporter::InputHoldsIds(int id) const {
  const TensorId data = s_.layers[id].outputs[0];
  const Shape& shape = s_.tensors[data].shape;
  bool read = false, only_embeddings = true;
  for (int other = 0; other < net_.num_layers(); ++other) {
    for (TensorId t : s_.layers[other].inputs) {
      if (t != data) continue;
      read = true;
      only_embeddings = only_embeddings && net_.layer(other).type() == "embedding";
    }
  }
  return read && only_embeddings && shape.c() == 1 && shape.h() == 1;
}

Status Exporter::Embedding(int id) {
  const std::string& name = net_.layer(id).name();
  const TensorId in = s_.layers[id].inputs[0];
  auto ids = values_.find(in);
  if (ids == values_.end() || ids->second.second != 2) {
    return InvalidArgument("layer '" + name + "' (embedding) reads '" + s_.tensors[in].name +
                           "', not the network's input; ONNX export takes embeddings of the " +
                           "input's ids (an input that only embeddings read)");
  }
  const Shape& table = s_.tensors[s_.layers[id].params[0]].shape;
  const Shape& out = s_.tensors[s_.layers[id].outputs[0]].shape;
  SPILL_ASSIGN_OR_RETURN(std::string weight, Initializer(id, 0, "weight", {table.n(), table.c()}));
  onnx::NodeProto* gather = Node(id, "Gather", {weight, ids->second.first});
  gather->add_output(name + "/ntc");
  onnx::NodeProto* nct = Node(id, "Transpose", {name + "/ntc"});
  nct->set_name(name + "/nct");
  AddInts(nct, "perm", {0, 2, 1});
  nct->add_output(name + "/nct");
  onnx::NodeProto* back =
      Node(id, "Reshape", {name + "/nct", IntConstant(id, "shape", {0, out.c(), 1, out.w()})});
  back->set_name(name + "/nc1t");
  back->add_output(Out(id, 4));
  return Status::Ok();
}

StatusOr<std::vector<std::string>> Exporter::RecurrentWeights(int id, int64_t level,
                                                              int64_t directions, bool lstm) {
  const std::vector<int64_t>& order = lstm ? kLstmToOnnx : kGruToOnnx;
  const int64_t per_direction =
      s_.layers[id].params.size() / (directions * Int(net_.spec(id), "layers", 1));  // 2 or 4
  const int first = static_cast<int>(level * directions * per_direction);
  const Shape& ih = s_.tensors[s_.layers[id].params[first]].shape;
  const Shape& hh = s_.tensors[s_.layers[id].params[first + 1]].shape;
  const int64_t rows = ih.n(), inputs = ih.c(), hidden = hh.c();
  const int64_t gates = static_cast<int64_t>(order.size());
  // The layer's parameters come per level and direction: weight_ih,
  // weight_hh (and bias_ih, bias_hh), as layers/recurrent_layers.h lists them.
  const std::string& ih_name = s_.tensors[s_.layers[id].params[first]].name;
  const std::string expected = "weight_ih_l" + std::to_string(level);
  if (rows != gates * hidden || hh.n() != rows ||
      ih_name.compare(ih_name.size() - std::min(ih_name.size(), expected.size()), std::string::npos,
                      expected) != 0) {
    return Internal("layer '" + net_.layer(id).name() + "': parameter '" + ih_name +
                    "' is not level " + std::to_string(level) + "'s weight_ih of " +
                    std::to_string(gates) + " gates of " + std::to_string(hidden) + " units");
  }
  std::vector<float> w, r, b;
  for (int64_t d = 0; d < directions; ++d) {
    const int p = static_cast<int>(first + d * per_direction);
    SPILL_ASSIGN_OR_RETURN(std::vector<float> wd, ParamValues(id, p));
    SPILL_ASSIGN_OR_RETURN(std::vector<float> rd, ParamValues(id, p + 1));
    AppendOnnxGates(wd, hidden * inputs, order, &w);
    AppendOnnxGates(rd, hidden * hidden, order, &r);
    for (int k = 2; k < per_direction; ++k) {  // bias_ih, then bias_hh: ONNX's Wb, Rb
      SPILL_ASSIGN_OR_RETURN(std::vector<float> bd, ParamValues(id, p + k));
      AppendOnnxGates(bd, hidden, order, &b);
    }
  }
  const std::string l = std::to_string(level);
  std::vector<std::string> names = {RawConstant(id, "W_l" + l, w, {directions, rows, inputs}),
                                    RawConstant(id, "R_l" + l, r, {directions, rows, hidden})};
  if (!b.empty()) names.push_back(RawConstant(id, "B_l" + l, b, {directions, 2 * rows}));
  return names;
}

Status Exporter::Recurrent(int id) {
  const std::string& name = net_.layer(id).name();
  const LayerSpec& spec = net_.spec(id);
  const bool lstm = net_.layer(id).type() == "lstm";
  const std::string op = lstm ? "LSTM" : "GRU";
  if (Bool(spec, "carry", false)) {
    return InvalidArgument("layer '" + name +
                           "': carry: true starts each batch from the last one's states, which "
                           "an ONNX graph of one batch does not hold; export the network with "
                           "carry: false (its weights are the same)");
  }
  SPILL_RETURN_IF_ERROR(RefuseStateValues(spec, name, lstm));
  SPILL_ASSIGN_OR_RETURN(std::string x, In(id, 0, true));
  const Shape& in = s_.tensors[s_.layers[id].inputs[0]].shape;
  const Shape& out = s_.tensors[s_.layers[id].outputs[0]].shape;
  const int64_t levels = Int(spec, "layers", 1),
                directions = Bool(spec, "bidirectional", false) ? 2 : 1;
  const int64_t hidden = out.c() / directions;
  // A chain of `<layer>/<step>` values, each read by the next node.
  std::string value = x;
  auto step = [&](const std::string& op_type, std::vector<std::string> inputs,
                  const std::string& step_name) {
    inputs.insert(inputs.begin(), value);
    onnx::NodeProto* node = Node(id, op_type, inputs);
    node->set_name(name + "/" + step_name);
    value = name + "/" + step_name;
    node->add_output(value);
    return node;
  };
  step("Reshape", {IntConstant(id, "nct", {0, in.c(), in.w()})}, "nct");
  AddInts(step("Transpose", {}, "tnc"), "perm", {2, 0, 1});
  for (int64_t level = 0; level < levels; ++level) {
    SPILL_ASSIGN_OR_RETURN(std::vector<std::string> weights,
                           RecurrentWeights(id, level, directions, lstm));
    const std::string suffix = level == 0 ? "" : "_" + std::to_string(level);
    onnx::NodeProto* cell = step(op, weights, op + suffix);
    AddInt(cell, "hidden_size", hidden);
    if (directions == 2) AddString(cell, "direction", "bidirectional");
    if (!lstm) AddInt(cell, "linear_before_reset", 1);
    const std::string l = std::to_string(level);
    if (directions == 1) {
      step("Squeeze", {IntConstant(id, "squeeze_l" + l, {1})}, "squeeze_l" + l);
    } else {
      AddInts(step("Transpose", {}, "tndh_l" + l), "perm", {0, 2, 1, 3});
      step("Reshape", {IntConstant(id, "merge_l" + l, {0, 0, directions * hidden})}, "merge_l" + l);
    }
  }
  AddInts(step("Transpose", {}, "nct_out"), "perm", {1, 2, 0});
  onnx::NodeProto* back =
      Node(id, "Reshape", {value, IntConstant(id, "shape", {0, out.c(), 1, out.w()})});
  back->set_name(name + "/nc1t");
  back->add_output(Out(id, 4));
  return Status::Ok();
}

}  // namespace onnx_export
}  // namespace spill
