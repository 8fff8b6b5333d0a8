#include "framework/onnx/onnx_model.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "framework/base/checked_math.h"
#include "framework/base/files.h"
#include "framework/base/strings.h"
#include "framework/onnx/onnx_attributes.h"
#include "framework/onnx/onnx_data_folding.h"
#include "framework/onnx/onnx_external_data.h"
#include "framework/onnx/onnx_shape_folding.h"

namespace spill {
namespace {

constexpr int64_t kMaxTensorValues = int64_t{1} << 31;  // protobuf holds no more

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

Status CheckOpset(const OnnxGraph& g, int* opset) {
  *opset = 0;
  for (const auto& entry : g.model.opset_import()) {
    if (IsDefaultDomain(entry.domain())) *opset = static_cast<int>(entry.version());
  }
  if (*opset == 0) {
    return InvalidArgument(g.label + ": the model imports no version of the ONNX operator set");
  }
  if (*opset < kMinOnnxOpset || *opset > kMaxOnnxOpset) {
    return InvalidArgument(g.label + ": opset " + std::to_string(*opset) + "; spill reads opsets " +
                           std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset) +
                           " (export again with torch.onnx.export(..., opset_version=13))");
  }
  return Status::Ok();
}

// One error for every node spill cannot convert.
Status CheckOperators(const OnnxGraph& g) {
  const std::vector<std::string>& supported = SupportedOnnxOperators();
  std::set<std::string> unknown_ops;
  std::string where;
  int count = 0;
  constexpr int kNodesListed = 12;
  for (int i = 0; i < g.graph().node_size(); ++i) {
    const onnx::NodeProto& node = g.graph().node(i);
    std::string op = node.op_type();
    if (!IsDefaultDomain(node.domain())) op = node.domain() + "." + op;
    if (IsDefaultDomain(node.domain()) &&
        std::find(supported.begin(), supported.end(), op) != supported.end()) {
      continue;
    }
    unknown_ops.insert(op);
    if (count++ < kNodesListed) where += (where.empty() ? "" : ", ") + g.Where(i);
  }
  if (count == 0) return Status::Ok();
  const std::string ops = Join(unknown_ops);
  if (count > kNodesListed) where += ", and " + std::to_string(count - kNodesListed) + " more";
  std::string known;
  for (const std::string& op : supported) known += (known.empty() ? "" : " ") + op;
  return InvalidArgument(g.label + ": unsupported operators: " + ops + " (at " + where +
                         "); spill imports " + known);
}

void CollectConstants(OnnxGraph* g) {
  for (const auto& init : g->graph().initializer()) g->constants[init.name()] = &init;
  for (int i = 0; i < g->graph().node_size(); ++i) {
    const onnx::NodeProto& node = g->graph().node(i);
    for (const std::string& in : node.input()) g->consumers[in].push_back(i);
    if (node.op_type() == "Constant" && node.output_size() == 1) {
      const onnx::AttributeProto* value = FindAttribute(node, "value");
      if (value != nullptr && value->has_t()) g->constants[node.output(0)] = &value->t();
    }
    if (node.op_type() == "Identity" && node.input_size() == 1 && node.output_size() == 1) {
      const onnx::TensorProto* source = g->Constant(node.input(0));
      if (source != nullptr) g->constants[node.output(0)] = source;
    }
  }
}

void RecordDims(const onnx::ValueInfoProto& info, const std::string& batch, OnnxGraph* g) {
  if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) return;
  std::vector<int64_t>& dims = g->dims[info.name()];
  dims.clear();
  std::vector<int64_t> multiples;
  bool merged = false;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    dims.push_back(d.has_dim_value() ? d.dim_value() : kDynamicOnnxDim);
    const auto k = d.has_dim_param() ? BatchMultiple(d.dim_param(), batch) : std::nullopt;
    multiples.push_back(k.value_or(0));
    merged = merged || (k && (*k != 1 || multiples.size() > 1));
  }
  if (merged) g->batch_axes[info.name()] = multiples;
}

void RecordAllDims(OnnxGraph* g) {
  g->dims.clear();
  g->batch_axes.clear();
  std::string batch;
  if (g->graph().input_size() > 0) {
    const auto& shape = g->graph().input(0).type().tensor_type().shape();
    if (shape.dim_size() > 0 && shape.dim(0).has_dim_param()) batch = shape.dim(0).dim_param();
  }
  for (const auto& v : g->graph().input()) RecordDims(v, batch, g);
  for (const auto& v : g->graph().value_info()) RecordDims(v, batch, g);
  for (const auto& v : g->graph().output()) RecordDims(v, batch, g);
}

// ONNX's checker and shape inference throw on a malformed model; their
// messages name the node. Inference alternates with the folding of the
// shape arithmetic it made evaluable (framework/onnx/onnx_shape_folding.h)
// and of the constant data (framework/onnx/onnx_data_folding.h) until
// nothing more folds: each pass reaches one reshape further.
Status CheckAndInferShapes(OnnxGraph* g) {
  constexpr int kMaxFoldingPasses = 1024;  // far more reshape stages than any network has
  try {
    onnx::checker::check_model(g->model);
    const auto given = g->graph().value_info();  // the file's, restored before each pass
    std::map<std::string, onnx::ValueInfoProto> annotations;
    for (int pass = 0;; ++pass) {
      auto* info = g->model.mutable_graph()->mutable_value_info();
      *info = given;
      for (const auto& [name, shape] : annotations) *info->Add() = shape;
      onnx::shape_inference::InferShapes(g->model);
      RecordAllDims(g);
      const bool shapes = FoldShapeArithmetic(&g->model, &annotations);
      const bool data = FoldConstantData(&g->model);
      if (pass == kMaxFoldingPasses || !(shapes || data)) break;
    }
  } catch (const std::exception& e) {
    return InvalidArgument(g->label + ": not a valid ONNX model: " + e.what());
  }
  return Status::Ok();
}

StatusOr<int64_t> CountValues(const onnx::TensorProto& t, const std::string& label) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || !CheckedMul(n, d, &n) || n > kMaxTensorValues) {
      return InvalidArgument(label + ": tensor '" + t.name() + "' has an invalid shape");
    }
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {  // ParseOnnxModel loads it
    return InvalidArgument(label + ": tensor '" + t.name() + "' is stored outside the file");
  }
  return n;
}

Status SizeError(const onnx::TensorProto& t, const std::string& label) {
  return InvalidArgument(label + ": tensor '" + t.name() + "' holds a different number of values " +
                         "than its shape says");
}

}  // namespace

const std::vector<std::string>& SupportedOnnxOperators() {
  static const std::vector<std::string> kOps = {
      "AveragePool",
      "BatchNormalization",
      "Concat",
      "Constant",
      "Conv",
      "Dropout",
      "Flatten",
      "Gemm",
      "GlobalAveragePool",
      "Identity",
      "LRN",
      "LeakyRelu",
      "MatMul",
      "MaxPool",
      "Add",
      "Pad",
      "Relu",
      "Reshape",
      "Cast",
      "Clip",
      "ConstantOfShape",
      "ConvTranspose",
      "Div",
      "Einsum",
      "Equal",
      "Erf",
      "Exp",
      "Expand",
      "GRU",
      "Gather",
      "HardSigmoid",
      "HardSwish",
      "LSTM",
      "LayerNormalization",
      "LogSoftmax",
      "Mod",
      "Mul",
      "Not",
      "Pow",
      "Range",
      "ReduceL2",
      "ReduceMean",
      "Resize",
      "ScatterND",
      "Shape",
      "Sigmoid",
      "Slice",
      "Softmax",
      "Split",
      "Sqrt",
      "Squeeze",
      "Sub",
      "Tanh",
      "Transpose",
      "Unsqueeze",
      "Where",
  };
  return kOps;
}

std::string OnnxGraph::Where(int node) const {
  const onnx::NodeProto& n = graph().node(node);
  return "node " + std::to_string(node) + " '" + n.name() + "' (" + n.op_type() + ")";
}

const onnx::TensorProto* OnnxGraph::Constant(const std::string& value) const {
  auto it = constants.find(value);
  return it == constants.end() ? nullptr : it->second;
}

StatusOr<std::unique_ptr<OnnxGraph>> ParseOnnxModel(const std::string& bytes,
                                                    const std::string& label,
                                                    const std::string& model_dir) {
  auto g = std::make_unique<OnnxGraph>();
  g->label = label;
  if (!g->model.ParseFromString(bytes)) {
    return InvalidArgument(label + ": not an ONNX model (the protobuf does not parse: the file " +
                           "is truncated or of another format)");
  }
  if (!g->model.has_graph() || g->graph().node_size() == 0) {
    return InvalidArgument(label + ": not an ONNX model (it has no graph or no nodes)");
  }
  SPILL_RETURN_IF_ERROR(CheckOpset(*g, &g->opset));
  SPILL_RETURN_IF_ERROR(CheckOperators(*g));
  // Before ONNX's checker and shape inference compute with them.
  SPILL_RETURN_IF_ERROR(CheckOnnxAttributes(g->model, label));
  SPILL_RETURN_IF_ERROR(LoadOnnxExternalData(&g->model, model_dir, label));
  SPILL_RETURN_IF_ERROR(CheckAndInferShapes(g.get()));
  CollectConstants(g.get());
  return g;
}

StatusOr<std::unique_ptr<OnnxGraph>> ReadOnnxFile(const std::string& path) {
  SPILL_ASSIGN_OR_RETURN(std::string bytes,
                         ReadFileToString(path, kMaxOnnxFileBytes, "ONNX model"));
  const size_t slash = path.rfind('/');
  return ParseOnnxModel(bytes, path, slash == std::string::npos ? "." : path.substr(0, slash + 1));
}

StatusOr<std::vector<float>> OnnxFloats(const onnx::TensorProto& t, const std::string& label) {
  if (t.data_type() != onnx::TensorProto::FLOAT) {
    return InvalidArgument(label + ": tensor '" + t.name() + "' is of ONNX type " +
                           std::to_string(t.data_type()) + "; spill imports float32 weights");
  }
  SPILL_ASSIGN_OR_RETURN(int64_t n, CountValues(t, label));
  std::vector<float> values(n);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * sizeof(float)) return SizeError(t, label);
    std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (t.float_data_size() != n) return SizeError(t, label);
    std::copy(t.float_data().begin(), t.float_data().end(), values.begin());
  }
  return values;
}

StatusOr<std::vector<int64_t>> OnnxInts(const onnx::TensorProto& t, const std::string& label) {
  SPILL_ASSIGN_OR_RETURN(int64_t n, CountValues(t, label));
  std::vector<int64_t> values(n);
  if (t.data_type() == onnx::TensorProto::INT64) {
    if (t.has_raw_data()) {
      if (t.raw_data().size() != static_cast<size_t>(n) * 8) return SizeError(t, label);
      std::memcpy(values.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      if (t.int64_data_size() != n) return SizeError(t, label);
      std::copy(t.int64_data().begin(), t.int64_data().end(), values.begin());
    }
  } else if (t.data_type() == onnx::TensorProto::INT32 && !t.has_raw_data()) {
    if (t.int32_data_size() != n) return SizeError(t, label);
    std::copy(t.int32_data().begin(), t.int32_data().end(), values.begin());
  } else {
    return InvalidArgument(label + ": tensor '" + t.name() + "' should hold integers (int64)");
  }
  return values;
}

const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t AttrInt(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = FindAttribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::INT ? a->i() : fallback;
}

float AttrFloat(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const onnx::AttributeProto* a = FindAttribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::FLOAT ? a->f() : fallback;
}

std::string AttrString(const onnx::NodeProto& node, const std::string& name,
                       const std::string& fallback) {
  const onnx::AttributeProto* a = FindAttribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::STRING ? a->s() : fallback;
}

std::vector<int64_t> AttrInts(const onnx::NodeProto& node, const std::string& name,
                              const std::vector<int64_t>& fallback) {
  const onnx::AttributeProto* a = FindAttribute(node, name);
  if (a == nullptr || a->type() != onnx::AttributeProto::INTS) return fallback;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

}  // namespace spill
