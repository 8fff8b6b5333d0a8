// The graph walk of the ONNX importer: the input, each node in the file's
// (topological) order, the output and its loss; names, values and weights.
// The per-operator conversions are in onnx_import_layers.cc,
// onnx_import_vision.cc, onnx_import_patterns.cc and onnx_import_sequence.cc.
#include "framework/onnx/onnx_import.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "framework/io/checkpoint.h"
#include "framework/onnx/onnx_importer.h"

namespace spill {

std::string ShortestFloat(float value) {
  constexpr int kMaxFloatDigits = 9;  // always enough to read a float back exactly
  char text[32];
  for (int digits = 1; digits <= kMaxFloatDigits; ++digits) {
    std::snprintf(text, sizeof(text), "%.*g", digits, static_cast<double>(value));
    if (std::strtof(text, nullptr) == value) break;
  }
  return text;
}

namespace onnx_import {
namespace {

// Characters spill keeps in a layer name; the rest become '_'.
std::string Sanitize(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool keep =
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    out += keep ? c : '_';
  }
  return out;
}

// PyTorch's scoped node names, "/layer1/layer1.0/relu/Relu", read as
// "layer1.0.relu.Relu": a scope that the next one repeats is dropped.
std::string FromNodeName(const std::string& node_name) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : node_name + "/") {
    if (c != '/') {
      part += c;
      continue;
    }
    if (!part.empty()) parts.push_back(part);
    part.clear();
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i + 1 < parts.size() && parts[i + 1].rfind(parts[i] + ".", 0) == 0) continue;
    out += (out.empty() ? "" : ".") + parts[i];
  }
  return out;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

std::string Pair(int64_t a, int64_t b) {
  return "[" + std::to_string(a) + ", " + std::to_string(b) + "]";
}

std::string List(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

Status Importer::Fail(int node, const std::string& message) const {
  return InvalidArgument(g_.label + ": " + g_.Where(node) + ": " + message);
}

bool Importer::HasInput(int node, int k) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  return k < n.input_size() && !n.input(k).empty();
}

StatusOr<const Value*> Importer::In(int node, int k) const {
  if (!HasInput(node, k)) return Fail(node, "input " + std::to_string(k) + " is missing");
  const std::string& name = g_.graph().node(node).input(k);
  auto it = values_.find(name);
  if (it != values_.end()) return &it->second;
  if (g_.Constant(name) != nullptr) {
    return Fail(node, "input '" + name + "' is a constant; spill needs a computed value here");
  }
  if (pads_.count(name)) {
    return Fail(node, "reads the padded value '" + name +
                          "', a Pad folded into the AveragePool that reads it");
  }
  return Fail(node, "input '" + name + "' is not produced by any node spill imported");
}

StatusOr<const onnx::TensorProto*> Importer::ConstIn(int node, int k) const {
  if (!HasInput(node, k)) return Fail(node, "input " + std::to_string(k) + " is missing");
  const std::string& name = g_.graph().node(node).input(k);
  const onnx::TensorProto* t = g_.Constant(name);
  if (t == nullptr) {
    return Fail(node, "input '" + name + "' must be a constant (an initializer) for spill");
  }
  return t;
}

Status Importer::OnlyFirstOutput(int node) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  for (int k = 1; k < n.output_size(); ++k) {
    if (!n.output(k).empty() && g_.consumers.count(n.output(k))) {
      return Fail(node, "output " + std::to_string(k) + " ('" + n.output(k) +
                            "') is used; spill imports only the first output of this operator");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> Importer::DimsOf(int node, const std::string& value) const {
  auto it = g_.dims.find(value);
  if (it == g_.dims.end() || it->second.empty()) {
    return Fail(node, "the shape of '" + value + "' cannot be inferred; spill plans memory " +
                          "from static shapes (export with a fixed input size)");
  }
  for (size_t axis = 1; axis < it->second.size(); ++axis) {
    const int64_t d = it->second[axis];
    if (d == kDynamicOnnxDim) {
      return Fail(node, "'" + value + "' has a dynamic dimension (axis " + std::to_string(axis) +
                            "); spill plans memory from static shapes: only the batch axis may " +
                            "be dynamic");
    }
    if (d <= 0) {
      return Fail(node, "'" + value + "' has the invalid dimension " + std::to_string(d) +
                            " (axis " + std::to_string(axis) + "; a size is at least 1)");
    }
  }
  return std::vector<int64_t>(it->second.begin() + 1, it->second.end());
}

Status Importer::Produce(int node, const std::string& layer, const Value* like) {
  const std::string& out = g_.graph().node(node).output(0);
  std::vector<int64_t> dims;
  if (like != nullptr && like->layout == Layout::kSequence) {
    SPILL_ASSIGN_OR_RETURN(dims, SequenceDims(node, out, like->axes));
  } else {
    SPILL_ASSIGN_OR_RETURN(dims, DimsOf(node, out));
  }
  Value v{layer, dims, {1, 1, 1}};
  if (dims.size() == 3) {
    v.chw = {dims[0], dims[1], dims[2]};
  } else if (dims.size() == 1) {
    v.chw = {dims[0], 1, 1};
  } else if (like == nullptr) {
    return Fail(node, "its output has rank " + std::to_string(dims.size() + 1) +
                          "; spill imports tensors of rank 4 (N, C, H, W) and 2 (N, features)");
  }
  if (like != nullptr) {
    if (dims != like->dims) return Fail(node, "changes its input's shape unexpectedly");
    v.chw = like->chw;
    v.layout = like->layout;
    v.axes = like->axes;
  }
  values_[out] = v;
  net_.shapes[layer] = v.chw;
  return Status::Ok();
}

std::string Importer::UniqueName(const std::string& base) {
  std::string name = base;
  for (int k = 2; names_.count(name) || name == "loss"; ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

std::string Importer::ModuleName(int node) const {
  const std::string& name = g_.graph().node(node).name();
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos || slash == 0) return "";
  return FromNodeName(name.substr(0, slash));
}

std::string Importer::ModuleLayerName(int node) {
  const std::string module = Sanitize(ModuleName(node));
  return module.empty() ? LayerName(node, "") : UniqueName(module);
}

std::string Importer::LayerName(int node, const std::string& weight) {
  const onnx::NodeProto& n = g_.graph().node(node);
  std::string base;
  const std::string suffix = ".weight";  // PyTorch's "layer1.0.conv1.weight"
  if (!weight.empty() && weight.find("::") == std::string::npos) {
    base = weight;
    if (base.size() > suffix.size() &&
        base.compare(base.size() - suffix.size(), std::string::npos, suffix) == 0) {
      base.resize(base.size() - suffix.size());
    }
  }
  if (base.empty()) base = FromNodeName(n.name());
  if (base.empty()) base = n.op_type() + "_" + std::to_string(node);
  return UniqueName(Sanitize(base));
}

std::string Importer::Entry(const std::string& name, const std::string& type,
                            const std::vector<std::string>& inputs, const std::string& attributes) {
  std::string entry = "  - {name: " + Quote(name) + ", type: " + type;
  if (!inputs.empty()) {
    entry += ", inputs: [";
    for (size_t i = 0; i < inputs.size(); ++i) entry += (i ? ", " : "") + Quote(inputs[i]);
    entry += "]";
  }
  if (!attributes.empty()) entry += ", " + attributes;
  return entry + "}\n";
}

size_t Importer::Emit(const std::string& name, const std::string& type,
                      const std::vector<std::string>& inputs, const std::string& attributes) {
  layers_.push_back(Entry(name, type, inputs, attributes));
  return layers_.size() - 1;
}

Status Importer::Weight(int node, const std::string& layer, const std::string& param,
                        const onnx::TensorProto& tensor, const std::vector<int64_t>& shape) {
  SPILL_ASSIGN_OR_RETURN(std::vector<float> values, OnnxFloats(tensor, g_.label));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (static_cast<int64_t>(values.size()) != n) {
    return Fail(node, "tensor '" + tensor.name() + "' holds " + std::to_string(values.size()) +
                          " values where " + std::to_string(n) + " were expected");
  }
  // What spill's loader would refuse: values that are not finite, a negative variance.
  Status values_ok = CheckParameterValues(values.data(), n, param == "running_var",
                                          "tensor '" + tensor.name() + "'");
  if (!values_ok.ok()) return Fail(node, values_ok.message());
  net_.params["params/" + layer + "/" + param] = NpyArray::Floats(shape, values.data());
  return Status::Ok();
}

int Importer::Producer(const std::string& value) const {
  if (value.empty()) return -1;  // an absent optional input
  auto p = producers_.find(value);
  return p == producers_.end() ? -1 : p->second;
}

int Importer::SoleConsumer(const std::string& value) const {
  auto it = g_.consumers.find(value);
  if (it == g_.consumers.end() || it->second.size() != 1) return -1;
  for (const auto& out : g_.graph().output()) {
    if (out.name() == value) return -1;
  }
  return it->second[0];
}

// Images (N, C, H, W) as they are; sequences as N x C x 1 x T: integer ids
// (N, T) as N x 1 x 1 x T, float features (N, T, C) as N x C x 1 x T (the
// caller gives the features channels first, as spill holds sequences).
Status Importer::Input() {
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& in : g_.graph().input()) {
    if (g_.Constant(in.name()) == nullptr) inputs.push_back(&in);
  }
  if (inputs.size() != 1) {
    return InvalidArgument(g_.label + ": the graph has " + std::to_string(inputs.size()) +
                           " inputs; spill imports networks of one input");
  }
  const onnx::ValueInfoProto& in = *inputs[0];
  auto it = g_.dims.find(in.name());
  const int type = in.type().has_tensor_type() ? in.type().tensor_type().elem_type() : 0;
  const size_t rank = it == g_.dims.end() ? 0 : it->second.size();
  const bool image = type == onnx::TensorProto::FLOAT && rank == 4;
  const bool features = type == onnx::TensorProto::FLOAT && rank == 3;
  const bool ids =
      (type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32) && rank == 2;
  if (!image && !features && !ids) {
    return InvalidArgument(g_.label + ": input '" + in.name() + "' must be a float32 tensor " +
                           "of shape (N, C, H, W) (images), a float32 (N, T, C) (a sequence of " +
                           "features) or an int64 (N, T) (a sequence of ids)");
  }
  const std::vector<int64_t>& d = it->second;
  for (size_t axis = 1; axis < rank; ++axis) {
    if (d[axis] != kDynamicOnnxDim && d[axis] <= 0) {
      return InvalidArgument(g_.label + ": input '" + in.name() + "' has the invalid dimension " +
                             std::to_string(d[axis]) + " (axis " + std::to_string(axis) +
                             "; a size is at least 1)");
    }
    if (d[axis] == kDynamicOnnxDim) {
      return InvalidArgument(
          g_.label + ": input '" + in.name() + "' has a dynamic dimension (axis " +
          std::to_string(axis) + "); spill plans memory from static shapes: export with a " +
          (image ? "fixed channel count and image size" : "fixed sequence length") +
          " (only the batch axis may be dynamic)");
    }
  }
  std::string name = Sanitize(in.name());
  if (name.empty() || name == "loss") name = "input";
  names_.insert(name);
  batch_ = d[0];
  Value v{name, std::vector<int64_t>(d.begin() + 1, d.end()), {d[1], 1, 1}};
  if (image) {
    v.chw = {d[1], d[2], d[3]};
  } else {
    v.layout = Layout::kSequence;
    v.axes = ids ? "NT" : "NTC";
    v.chw = {ids ? 1 : d[2], 1, d[1]};
  }
  values_[in.name()] = v;
  input_chw_ = v.chw;
  input_entry_ = "  - {name: " + Quote(name) + ", type: input, shape: [" +
                 std::to_string(v.chw[0]) + ", " + std::to_string(v.chw[1]) + ", " +
                 std::to_string(v.chw[2]) + "]";
  return Status::Ok();
}

Status Importer::Output() {
  if (g_.graph().output_size() != 1) {
    return InvalidArgument(g_.label + ": the graph has " +
                           std::to_string(g_.graph().output_size()) +
                           " outputs; spill imports networks with one output (the scores)");
  }
  const std::string& out = g_.graph().output(0).name();
  auto it = values_.find(out);
  if (it == values_.end()) {
    return InvalidArgument(g_.label + ": the output '" + out + "' is not computed by the graph");
  }
  // Scores of every pixel (a segmentation network's map at the image's
  // size) or of every step of a sequence: the loss takes one label per
  // pixel or step.
  const Value& scores = it->second;
  const bool map = scores.Spatial() || scores.layout == Layout::kSequence;
  pixel_labels_ = map && scores.chw[1] == input_chw_[1] && scores.chw[2] == input_chw_[2] &&
                  scores.chw[1] * scores.chw[2] > 1;
  layers_.push_back("  - {name: loss, type: softmax_loss, inputs: [" + Quote(scores.ref) + "]}\n");
  return Status::Ok();
}

Status Importer::Convert(int node) {
  if (fused_.count(node)) return Status::Ok();
  const onnx::NodeProto& n = g_.graph().node(node);
  const std::string& op = n.op_type();
  if (op == "Constant") return Status::Ok();
  if (n.input_size() < 1 || n.output_size() < 1 || n.output(0).empty()) {
    return Fail(node, "has no input or no output");
  }
  if (op == "Identity" && g_.Constant(n.input(0)) != nullptr) return Status::Ok();
  if (attention_.count(node)) return Attention(node);
  if (windows_.count(node)) return WindowAttention(node);
  if (merges_.count(node)) return SpaceToDepth(node);
  if (partitions_.count(node)) return Partition(node);
  if (node == output_softmax_) return OutputSoftmax(node);
  if (op == "Einsum") {
    return Fail(node,
                "spill imports Einsum only within MaxViT's attention (the products of the "
                "queries and keys, and of the probabilities and values, per group and head)");
  }
  if (op == "Exp" || op == "ReduceL2") {
    return Fail(node, "spill imports " + op + " only within Swin V2's cosine attention");
  }
  if (op == "Equal" || op == "Where" || op == "Not" || op == "Range" || op == "ScatterND") {
    return Fail(node, "spill imports " + op + " only where it computes shapes or constants " +
                          "(evaluated before the import), not on the network's values");
  }
  if (op == "Expand" && g_.Constant(n.input(0)) != nullptr) {
    const onnx::TensorProto* t = g_.Constant(n.input(0));
    if (t->dims_size() > 0 && t->dims(0) == 1) {
      broadcasts_[n.output(0)] = n.input(0);  // read by a Concat: a class token
      return Status::Ok();
    }
  }
  if (op == "Concat" && broadcasts_.count(n.input(0))) return ClassToken(node);
  SPILL_ASSIGN_OR_RETURN(bool sequence, ConvertSequence(node));
  if (sequence) return Status::Ok();
  if (op == "Conv") return Conv(node);
  if (op == "BatchNormalization") return BatchNorm(node);
  if (op == "Relu" || op == "LeakyRelu") return Activation(node);
  if (op == "MaxPool" || op == "AveragePool") return Pool(node);
  if (op == "GlobalAveragePool") return GlobalPool(node);
  if (op == "Gemm") return Gemm(node);
  if (op == "MatMul") return MatMul(node);
  if (op == "Add") return Add(node);
  if (op == "Concat") return Concat(node);
  if (op == "Dropout") return Dropout(node);
  if (op == "LRN") return Lrn(node);
  if (op == "Pad") return Pad(node);
  if (op == "Reshape") return Reshape(node);
  if (op == "Flatten" || op == "Identity") return ReadThrough(node);
  SPILL_ASSIGN_OR_RETURN(bool converted, ConvertVision(node));
  if (converted) return Status::Ok();
  return Fail(node, "unsupported operator");  // CheckOperators lets none through
}

StatusOr<ImportedNet> Importer::Run() {
  std::string name = g_.graph().name();
  if (name.empty() || name == "torch_jit" || name == "main_graph") {
    name = std::filesystem::path(g_.label).stem().string();
  }
  net_.name = Sanitize(name.empty() ? "onnx" : name);
  net_.label = g_.label;
  SPILL_RETURN_IF_ERROR(Input());
  MarkInitialStates();
  output_softmax_ = FindOutputSoftmax();
  MarkWindowChains(&Importer::FindWindowChain, "a shifted-window attention (Swin's)");
  MarkPatchMerging();
  MarkPartitions();
  MarkWindowChains(&Importer::FindPartitionChain, "an attention in partitions (MaxViT's)");
  MarkAttention();
  MarkShapeChains();
  if (!softmax_errors_.empty()) {  // before the walk stops at a node of its chain
    const auto& [node, why] = *softmax_errors_.begin();
    return Fail(node, "spill imports Softmax only within attention (MatMul of queries and keys, " +
                          std::string("Softmax, MatMul by values, from one projection): ") + why);
  }
  for (int i = 0; i < g_.graph().node_size(); ++i) SPILL_RETURN_IF_ERROR(Convert(i));
  SPILL_RETURN_IF_ERROR(Output());
  std::ostringstream yaml;
  yaml << "# Imported from " << g_.label << " (ONNX opset " << g_.opset << ").\n"
       << (output_softmax_ < 0 ? ""
                               : "# Its last node, " + g_.graph().node(output_softmax_).op_type() +
                                     ", is the loss's softmax: the loss takes its input, the "
                                     "scores, and predict reports the probabilities.\n")
       << "name: " << Quote(net_.name) << "\nlayers:\n"
       << input_entry_ << (pixel_labels_ ? ", labels: pixels" : "") << "}\n";
  for (const std::string& entry : layers_) yaml << entry;
  net_.yaml = yaml.str();
  return std::move(net_);
}

}  // namespace onnx_import

StatusOr<ImportedNet> ImportOnnx(const OnnxGraph& graph) {
  return onnx_import::Importer(graph).Run();
}

Status CheckImportedShapes(const ImportedNet& imported, const Net& net) {
  for (int id = 0; id < net.num_layers(); ++id) {
    auto it = imported.shapes.find(net.layer(id).name());
    if (it == imported.shapes.end()) continue;
    const Shape& got = net.schedule().tensors[net.schedule().layers[id].outputs[0]].shape;
    const std::array<int64_t, 3>& want = it->second;
    if (got.c() != want[0] || got.h() != want[1] || got.w() != want[2]) {
      return InvalidArgument(imported.label + ": layer '" + it->first + "' (" +
                             net.layer(id).type() + ") computes " + std::to_string(got.c()) + "x" +
                             std::to_string(got.h()) + "x" + std::to_string(got.w()) +
                             " where ONNX infers " + std::to_string(want[0]) + "x" +
                             std::to_string(want[1]) + "x" + std::to_string(want[2]) +
                             " (spill's window arithmetic differs from ONNX's for this node)");
    }
  }
  return Status::Ok();
}

StatusOr<ImportedNet> ImportOnnxFile(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(std::unique_ptr<OnnxGraph> graph, ReadOnnxFile(path));
  return ImportOnnx(*graph);
}

}  // namespace spill
