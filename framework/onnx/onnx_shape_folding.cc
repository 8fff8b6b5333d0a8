#include "framework/onnx/onnx_shape_folding.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "framework/base/checked_math.h"

namespace spill {
namespace {

// One integer of the arithmetic: known, or the batch size.
struct SymInt {
  int64_t value = 0;
  bool batch = false;
};

// An evaluated integer tensor: a scalar or a vector.
struct IntValue {
  std::vector<SymInt> values;
  bool scalar = false;
};

constexpr size_t kMaxFoldedValues = 64;  // shapes and bounds, never data

using IntValues = std::map<std::string, IntValue>;

std::optional<IntValue> FromTensor(const onnx::TensorProto& t) {
  const bool i64 = t.data_type() == onnx::TensorProto::INT64;
  const bool i32 = t.data_type() == onnx::TensorProto::INT32;
  if ((!i64 && !i32) || t.dims_size() > 1) return std::nullopt;
  IntValue v;
  v.scalar = t.dims_size() == 0;
  const size_t width = i64 ? sizeof(int64_t) : sizeof(int32_t);
  size_t count = 0;
  if (t.has_raw_data()) {
    if (t.raw_data().size() % width != 0) return std::nullopt;
    count = t.raw_data().size() / width;
  } else {
    count = i64 ? t.int64_data_size() : t.int32_data_size();
  }
  if (count > kMaxFoldedValues || (t.dims_size() == 1 && static_cast<int64_t>(count) != t.dims(0)))
    return std::nullopt;
  for (size_t i = 0; i < count; ++i) {
    int64_t x = 0;
    if (t.has_raw_data() && i64) {
      std::memcpy(&x, t.raw_data().data() + i * width, width);
    } else if (t.has_raw_data()) {
      int32_t y = 0;
      std::memcpy(&y, t.raw_data().data() + i * width, width);
      x = y;
    } else {
      x = i64 ? t.int64_data(static_cast<int>(i)) : t.int32_data(static_cast<int>(i));
    }
    v.values.push_back({x, false});
  }
  return v;
}

const onnx::AttributeProto* Attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = Attribute(n, name);
  return a != nullptr && a->type() == onnx::AttributeProto::INT ? a->i() : fallback;
}

// The known integers of `v` (none may be the batch).
std::optional<std::vector<int64_t>> Known(const IntValue& v) {
  std::vector<int64_t> out;
  for (const SymInt& s : v.values) {
    if (s.batch) return std::nullopt;
    out.push_back(s.value);
  }
  return out;
}

std::optional<IntValue> Shape(const onnx::NodeProto& n, const std::vector<int64_t>& dims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = IntAttr(n, "start", 0), end = IntAttr(n, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::max<int64_t>(0, std::min(start, rank));
  end = std::max<int64_t>(start, std::min(end, rank));
  IntValue v;
  for (int64_t axis = start; axis < end; ++axis) {
    if (dims[axis] > 0) {
      v.values.push_back({dims[axis], false});
    } else if (axis == 0) {
      v.values.push_back({0, true});  // the symbolic batch
    } else {
      return std::nullopt;
    }
  }
  return v;
}

std::optional<IntValue> Gather(const IntValue& data, const IntValue& indices) {
  if (data.scalar) return std::nullopt;
  IntValue v;
  v.scalar = indices.scalar;
  const int64_t size = static_cast<int64_t>(data.values.size());
  for (const SymInt& i : indices.values) {
    int64_t k = i.value;
    if (i.batch) return std::nullopt;
    if (k < 0) k += size;
    if (k < 0 || k >= size) return std::nullopt;
    v.values.push_back(data.values[k]);
  }
  return v;
}

// Add, Sub, Mul and Div on known integers (one side may be a single value).
std::optional<IntValue> Arithmetic(const std::string& op, const IntValue& a, const IntValue& b) {
  const auto x = Known(a), y = Known(b);
  if (!x || !y || x->empty() || y->empty()) return std::nullopt;
  if (x->size() != y->size() && x->size() != 1 && y->size() != 1) return std::nullopt;
  IntValue v;
  v.scalar = a.scalar && b.scalar;
  const size_t count = std::max(x->size(), y->size());
  for (size_t i = 0; i < count; ++i) {
    const int64_t p = (*x)[x->size() == 1 ? 0 : i], q = (*y)[y->size() == 1 ? 0 : i];
    int64_t r = 0;
    if (op == "Add" && !CheckedAdd(p, q, &r)) return std::nullopt;
    if (op == "Sub" && !CheckedSub(p, q, &r)) return std::nullopt;
    if (op == "Mul" && !CheckedMul(p, q, &r)) return std::nullopt;
    if (op == "Div") {
      if (q == 0 || (q == -1 && p == INT64_MIN)) return std::nullopt;  // the importer reports it
      r = p / q;
    }
    v.values.push_back({r, false});
  }
  return v;
}

std::optional<IntValue> Slice(const IntValue& data, const std::vector<const IntValue*>& args) {
  if (data.scalar || args.size() < 2) return std::nullopt;
  auto starts = Known(*args[0]), ends = Known(*args[1]);
  std::optional<std::vector<int64_t>> steps;
  if (args.size() > 3 && args[3] != nullptr) steps = Known(*args[3]);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  if (args.size() > 2 && args[2] != nullptr) {
    auto axes = Known(*args[2]);
    if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1)) return std::nullopt;
  }
  const int64_t step = steps && steps->size() == 1 ? (*steps)[0] : 1;
  if (step != 1) return std::nullopt;
  const int64_t size = static_cast<int64_t>(data.values.size());
  int64_t begin = (*starts)[0], end = (*ends)[0];
  if (begin < 0) begin += size;
  if (end < 0) end += size;
  begin = std::max<int64_t>(0, std::min(begin, size));
  end = std::max<int64_t>(begin, std::min(end, size));
  IntValue v;
  v.values.assign(data.values.begin() + begin, data.values.begin() + end);
  return v;
}

std::optional<IntValue> Unsqueeze(const onnx::NodeProto& n, const IntValues& ints,
                                  const IntValue& x) {
  std::vector<int64_t> axes;
  if (n.input_size() > 1) {
    auto it = ints.find(n.input(1));
    if (it == ints.end()) return std::nullopt;
    auto known = Known(it->second);
    if (!known) return std::nullopt;
    axes = *known;
  } else if (const onnx::AttributeProto* a = Attribute(n, "axes")) {
    axes.assign(a->ints().begin(), a->ints().end());
  }
  if (!x.scalar || axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) return std::nullopt;
  IntValue v = x;
  v.scalar = false;
  return v;
}

// The value of node `n`'s first output, when its inputs are known.
std::optional<IntValue> Evaluate(const onnx::NodeProto& n, const IntValues& ints,
                                 const std::map<std::string, std::vector<int64_t>>& dims) {
  const std::string& op = n.op_type();
  if (op == "Shape") {
    auto it = dims.find(n.input(0));
    if (it == dims.end() || it->second.empty()) return std::nullopt;
    return Shape(n, it->second);
  }
  std::vector<const IntValue*> in;
  for (const std::string& name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    auto it = ints.find(name);
    if (it == ints.end()) return std::nullopt;
    in.push_back(&it->second);
  }
  if (in.empty() || in[0] == nullptr) return std::nullopt;
  if (op == "Identity") return *in[0];
  if (op == "Cast") {
    const int64_t to = IntAttr(n, "to", 0);
    if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32) return std::nullopt;
    return *in[0];
  }
  if (op == "Gather" && in.size() == 2 && in[1] != nullptr && IntAttr(n, "axis", 0) == 0) {
    return Gather(*in[0], *in[1]);
  }
  if (op == "Unsqueeze") return Unsqueeze(n, ints, *in[0]);
  if (op == "Squeeze" && !in[0]->scalar && in[0]->values.size() == 1) {
    IntValue v = *in[0];
    v.scalar = true;
    return v;
  }
  if (op == "Concat") {
    IntValue v;
    for (const IntValue* x : in) {
      if (x == nullptr || x->scalar) return std::nullopt;
      v.values.insert(v.values.end(), x->values.begin(), x->values.end());
    }
    if (v.values.size() > kMaxFoldedValues) return std::nullopt;
    return v;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2 &&
      in[1] != nullptr) {
    return Arithmetic(op, *in[0], *in[1]);
  }
  if (op == "Slice") return Slice(*in[0], std::vector<const IntValue*>(in.begin() + 1, in.end()));
  return std::nullopt;
}

onnx::TensorProto ToTensor(const std::string& name, const IntValue& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  if (!v.scalar) t.add_dims(static_cast<int64_t>(v.values.size()));
  for (const SymInt& s : v.values) t.add_int64_data(s.batch ? 0 : s.value);
  return t;
}

// Whether `v` may replace input `k` of `n`: the batch only as Reshape's
// leading "copy the input's dimension".
bool Replaceable(const onnx::NodeProto& n, int k, const IntValue& v) {
  for (size_t i = 0; i < v.values.size(); ++i) {
    if (v.values[i].batch && !(n.op_type() == "Reshape" && k == 1 && i == 0)) return false;
  }
  return true;
}

// Removes the arithmetic (`computed` values), shape operators and constants
// that nothing reads any more.
void DropDeadArithmetic(onnx::GraphProto* graph, const std::set<std::string>& computed) {
  for (bool removed = true; removed;) {
    removed = false;
    std::set<std::string> read;
    for (const auto& n : graph->node()) read.insert(n.input().begin(), n.input().end());
    for (const auto& out : graph->output()) read.insert(out.name());
    auto* nodes = graph->mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i) {
      const onnx::NodeProto& n = nodes->Get(i);
      const std::string& op = n.op_type();
      const bool arithmetic = n.output_size() > 0 && computed.count(n.output(0)) > 0;
      if (!arithmetic && !IsShapeArithmetic(op) && op != "Constant" && op != "Identity") continue;
      bool used = false;
      for (const std::string& o : n.output()) used = used || read.count(o) > 0;
      if (used) continue;
      nodes->DeleteSubrange(i, 1);
      removed = true;
    }
  }
}

}  // namespace

bool IsShapeArithmetic(const std::string& op) {
  return op == "Shape" || op == "Gather" || op == "Unsqueeze" || op == "Squeeze" || op == "Cast";
}

bool FoldShapeArithmetic(onnx::ModelProto* model,
                         const std::map<std::string, std::vector<int64_t>>& dims) {
  onnx::GraphProto* graph = model->mutable_graph();
  IntValues ints;
  for (const auto& t : graph->initializer()) {
    if (auto v = FromTensor(t)) ints[t.name()] = *v;
  }
  std::set<std::string> computed;  // values evaluated here, not read from the file
  for (const auto& n : graph->node()) {
    if (n.output_size() < 1) continue;
    if (n.op_type() == "Constant") {
      const onnx::AttributeProto* a = Attribute(n, "value");
      if (a != nullptr && a->has_t()) {
        if (auto v = FromTensor(a->t())) ints[n.output(0)] = *v;
      }
      continue;
    }
    if (auto v = Evaluate(n, ints, dims)) {
      ints[n.output(0)] = *v;
      if (n.op_type() != "Identity" || computed.count(n.input(0))) computed.insert(n.output(0));
    }
  }
  bool changed = false;
  std::set<std::string> added;
  for (auto& n : *graph->mutable_node()) {
    if (ints.count(n.output_size() > 0 ? n.output(0) : "")) continue;  // arithmetic itself
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string& name = n.input(k);
      if (!computed.count(name) || !Replaceable(n, k, ints[name])) continue;
      const std::string folded = name + "/folded";
      if (added.insert(folded).second) *graph->add_initializer() = ToTensor(folded, ints[name]);
      n.set_input(k, folded);
      changed = true;
    }
  }
  if (changed) DropDeadArithmetic(graph, computed);
  return changed;
}

}  // namespace spill
