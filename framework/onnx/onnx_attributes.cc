#include "framework/onnx/onnx_attributes.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "framework/base/checked_math.h"

namespace spill {
namespace {

enum class Kind {
  kSize,    // an integer or list of integers, each in [1, kMaxOnnxWindow]
  kPads,    // a list of integers, each in [0, kMaxOnnxWindow], of even length
  kFlag,    // an integer, 0 or 1
  kAxis,    // an integer in [-kMaxOnnxRank, kMaxOnnxRank]
  kFloat,   // a finite float
  kRatio,   // a float in [0, 1)
  kChoice,  // a string, one of `choices`
  kAnyInt,  // an integer (a seed): only its type is checked
};

// Far beyond the rank of any tensor spill imports; bounds axis attributes.
constexpr int64_t kMaxOnnxRank = 8;

struct Rule {
  const char* name;
  Kind kind;
  std::vector<std::string> choices = {};
};

const std::vector<std::string> kAutoPad = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};

// The window attributes Conv and the pools share.
std::vector<Rule> Window(std::vector<Rule> more) {
  std::vector<Rule> rules = {{"kernel_shape", Kind::kSize},
                             {"strides", Kind::kSize},
                             {"dilations", Kind::kSize},
                             {"pads", Kind::kPads},
                             {"auto_pad", Kind::kChoice, kAutoPad}};
  rules.insert(rules.end(), more.begin(), more.end());
  return rules;
}

// The attributes LSTM and GRU share: ONNX's shape inference sizes the
// outputs by hidden_size and the directions.
std::vector<Rule> Recurrent(std::vector<Rule> more) {
  std::vector<Rule> rules = {{"hidden_size", Kind::kSize},
                             {"direction", Kind::kChoice, {"forward", "reverse", "bidirectional"}},
                             {"layout", Kind::kFlag},
                             {"clip", Kind::kFloat}};
  rules.insert(rules.end(), more.begin(), more.end());
  return rules;
}

// Per operator: the attributes whose values ONNX's checker, its shape
// inference or the importer compute with.
const std::map<std::string, std::vector<Rule>>& Rules() {
  static const auto* rules = new std::map<std::string, std::vector<Rule>>{
      {"Conv", Window({{"group", Kind::kSize}})},
      {"MaxPool", Window({{"ceil_mode", Kind::kFlag}, {"storage_order", Kind::kFlag}})},
      {"AveragePool", Window({{"ceil_mode", Kind::kFlag}, {"count_include_pad", Kind::kFlag}})},
      {"LRN",
       {{"size", Kind::kSize},
        {"alpha", Kind::kFloat},
        {"beta", Kind::kFloat},
        {"bias", Kind::kFloat}}},
      {"BatchNormalization",
       {{"epsilon", Kind::kFloat}, {"momentum", Kind::kFloat}, {"training_mode", Kind::kFlag}}},
      {"Gemm",
       {{"alpha", Kind::kFloat},
        {"beta", Kind::kFloat},
        {"transA", Kind::kFlag},
        {"transB", Kind::kFlag}}},
      {"LeakyRelu", {{"alpha", Kind::kFloat}}},
      {"Dropout", {{"ratio", Kind::kRatio}, {"seed", Kind::kAnyInt}}},
      {"Flatten", {{"axis", Kind::kAxis}}},
      {"Concat", {{"axis", Kind::kAxis}}},
      {"Reshape", {{"allowzero", Kind::kFlag}}},
      {"Pad", {{"mode", Kind::kChoice, {"constant", "reflect", "edge"}}, {"value", Kind::kFloat}}},
      {"LSTM", Recurrent({{"input_forget", Kind::kFlag}})},
      {"GRU", Recurrent({{"linear_before_reset", Kind::kFlag}})},
      {"Gather", {{"axis", Kind::kAxis}}},
  };
  return *rules;
}

std::string Where(const onnx::NodeProto& node, int index) {
  return "node " + std::to_string(index) + " '" + node.name() + "' (" + node.op_type() + ")";
}

std::string Ints(const onnx::AttributeProto& a) {
  std::string text;
  for (int64_t v : a.ints()) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return a.type() == onnx::AttributeProto::INT ? std::to_string(a.i()) : "[" + text + "]";
}

// The attribute's integers (one for INT, all for INTS); false for another type.
bool IntValues(const onnx::AttributeProto& a, bool list, std::vector<int64_t>* out) {
  if (a.type() == onnx::AttributeProto::INT && !list) {
    *out = {a.i()};
    return true;
  }
  if (a.type() == onnx::AttributeProto::INTS && list) {
    out->assign(a.ints().begin(), a.ints().end());
    return true;
  }
  return false;
}

// "" when `a` satisfies `rule`, otherwise what was expected.
std::string Violation(const onnx::AttributeProto& a, const Rule& rule) {
  const bool list = rule.kind == Kind::kPads ||
                    (rule.kind == Kind::kSize && a.type() == onnx::AttributeProto::INTS);
  std::vector<int64_t> v;
  switch (rule.kind) {
    case Kind::kSize:
    case Kind::kPads: {
      if (!IntValues(a, list, &v))
        return "must be " + std::string(list ? "integers" : "an integer");
      const int64_t low = rule.kind == Kind::kSize ? 1 : 0;
      for (int64_t x : v) {
        if (x < low || x > kMaxOnnxWindow) {
          return "must hold values in [" + std::to_string(low) + ", " +
                 std::to_string(kMaxOnnxWindow) + "]; it is " + Ints(a);
        }
      }
      if (rule.kind == Kind::kPads && v.size() % 2 != 0) {
        return "must hold a begin and an end per axis; it is " + Ints(a);
      }
      return "";
    }
    case Kind::kFlag:
    case Kind::kAxis:
    case Kind::kAnyInt: {
      if (!IntValues(a, false, &v)) return "must be an integer";
      if (rule.kind == Kind::kFlag && v[0] != 0 && v[0] != 1)
        return "must be 0 or 1; it is " + Ints(a);
      if (rule.kind == Kind::kAxis && (v[0] < -kMaxOnnxRank || v[0] > kMaxOnnxRank)) {
        return "must be an axis in [-" + std::to_string(kMaxOnnxRank) + ", " +
               std::to_string(kMaxOnnxRank) + "]; it is " + Ints(a);
      }
      return "";
    }
    case Kind::kFloat:
    case Kind::kRatio: {
      if (a.type() != onnx::AttributeProto::FLOAT) return "must be a float";
      if (!std::isfinite(a.f())) return "must be finite; it is " + std::to_string(a.f());
      if (rule.kind == Kind::kRatio && !(a.f() >= 0 && a.f() < 1)) {
        return "must be in [0, 1); it is " + std::to_string(a.f());
      }
      return "";
    }
    case Kind::kChoice: {
      if (a.type() != onnx::AttributeProto::STRING) return "must be a string";
      std::string known;
      for (const std::string& c : rule.choices) {
        if (a.s() == c) return "";
        known += (known.empty() ? "" : ", ") + c;
      }
      return "must be one of " + known + "; it is '" + a.s() + "'";
    }
  }
  return "";
}

// A window's lists describe the same axes: kernel_shape, strides and
// dilations one value per axis, pads two.
std::string WindowLengths(const onnx::NodeProto& node) {
  int64_t axes = -1;
  for (const auto& a : node.attribute()) {
    if (a.type() != onnx::AttributeProto::INTS) continue;
    int64_t n = a.ints_size();
    if (a.name() == "pads") {
      n /= 2;
    } else if (a.name() != "kernel_shape" && a.name() != "strides" && a.name() != "dilations") {
      continue;
    }
    if (n == 0 || n > kMaxOnnxRank || (axes >= 0 && n != axes)) {
      return "kernel_shape, strides, dilations and pads describe different numbers of axes";
    }
    axes = n;
  }
  return "";
}

using Constants = std::map<std::string, const onnx::TensorProto*>;

// Initializers and Constant nodes' values, by name.
Constants CollectConstants(const onnx::GraphProto& graph) {
  Constants constants;
  for (const auto& t : graph.initializer()) constants[t.name()] = &t;
  for (const auto& node : graph.node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1) continue;
    for (const auto& a : node.attribute()) {
      if (a.name() == "value" && a.has_t()) constants[node.output(0)] = &a.t();
    }
  }
  return constants;
}

// The integers of a small constant int64 tensor held in the file; false when
// it is not one (the importer reports that).
bool ConstantInts(const onnx::TensorProto& t, std::vector<int64_t>* out) {
  constexpr int kMaxValues = 64;
  if (t.data_type() != onnx::TensorProto::INT64) return false;
  if (t.has_raw_data()) {
    if (t.raw_data().size() % sizeof(int64_t) != 0 ||
        t.raw_data().size() > kMaxValues * sizeof(int64_t)) {
      return false;
    }
    out->resize(t.raw_data().size() / sizeof(int64_t));
    std::memcpy(out->data(), t.raw_data().data(), t.raw_data().size());
    return true;
  }
  if (t.int64_data_size() > kMaxValues) return false;
  out->assign(t.int64_data().begin(), t.int64_data().end());
  return true;
}

// Reshape's shape and Pad's pads, which shape inference divides and adds with.
std::string ConstantInputs(const Constants& constants, const onnx::NodeProto& node) {
  const bool reshape = node.op_type() == "Reshape", pad = node.op_type() == "Pad";
  if ((!reshape && !pad) || node.input_size() < 2) return "";
  auto t = constants.find(node.input(1));
  std::vector<int64_t> v;
  if (t == constants.end() || !ConstantInts(*t->second, &v)) return "";
  if (pad) {
    for (int64_t x : v) {
      if (x < -kMaxOnnxWindow || x > kMaxOnnxWindow) {
        return "pads (input 1) must hold values in [-" + std::to_string(kMaxOnnxWindow) + ", " +
               std::to_string(kMaxOnnxWindow) + "]";
      }
    }
    return "";
  }
  int inferred = 0;
  bool zero = false;
  int64_t product = 1;
  for (int64_t x : v) {
    if (x < -1 || x > kMaxOnnxDimension) {
      return "shape (input 1) holds " + std::to_string(x) + "; expected -1, 0 or a positive size";
    }
    inferred += x == -1;
    zero = zero || x == 0;
    if (x > 0 && !CheckedMul(product, x, &product)) return "shape (input 1) overflows";
  }
  if (inferred > 1) return "shape (input 1) holds -1 more than once";
  // A 0 copies the input's dimension, except with allowzero = 1, where it is
  // a size of 0 that leaves nothing to infer a -1 from (ONNX forbids both).
  bool allowzero = false;
  for (const auto& a : node.attribute()) {
    if (a.name() == "allowzero" && a.type() == onnx::AttributeProto::INT) allowzero = a.i() != 0;
  }
  if (inferred == 1 && zero && allowzero) {
    return "shape (input 1) holds both -1 and 0 with allowzero = 1";
  }
  return "";
}

// A static dimension of a graph input, output or annotated value must be a
// size: zero or negative is not a shape spill (or inference) can use.
Status CheckValueDims(const onnx::ValueInfoProto& v, const std::string& what,
                      const std::string& label) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return Status::Ok();
  const auto& dims = v.type().tensor_type().shape().dim();
  for (int axis = 0; axis < dims.size(); ++axis) {
    if (!dims[axis].has_dim_value()) continue;
    const int64_t d = dims[axis].dim_value();
    if (d < 1 || d > kMaxOnnxDimension) {
      return InvalidArgument(label + ": " + what + " '" + v.name() + "' has the invalid static " +
                             "dimension " + std::to_string(d) + " (axis " + std::to_string(axis) +
                             "); expected a size in [1, " + std::to_string(kMaxOnnxDimension) +
                             "]");
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckOnnxAttributes(const onnx::ModelProto& model, const std::string& label) {
  const onnx::GraphProto& graph = model.graph();
  for (const auto& v : graph.input()) SPILL_RETURN_IF_ERROR(CheckValueDims(v, "input", label));
  for (const auto& v : graph.output()) SPILL_RETURN_IF_ERROR(CheckValueDims(v, "output", label));
  for (const auto& v : graph.value_info()) {
    SPILL_RETURN_IF_ERROR(CheckValueDims(v, "value", label));
  }
  const Constants constants = CollectConstants(graph);
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    auto fail = [&](const std::string& message) {
      return InvalidArgument(label + ": " + Where(node, i) + ": " + message);
    };
    auto rules = Rules().find(node.op_type());
    if (rules != Rules().end()) {
      for (const auto& a : node.attribute()) {
        for (const Rule& rule : rules->second) {
          if (a.name() != rule.name) continue;
          const std::string problem = Violation(a, rule);
          if (!problem.empty()) return fail("attribute '" + a.name() + "' " + problem);
        }
      }
      if (rules->second.front().name == std::string("kernel_shape")) {
        const std::string problem = WindowLengths(node);
        if (!problem.empty()) return fail(problem);
      }
    }
    const std::string problem = ConstantInputs(constants, node);
    if (!problem.empty()) return fail(problem);
  }
  return Status::Ok();
}

}  // namespace spill
