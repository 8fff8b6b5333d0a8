#include "framework/onnx/onnx_shape_folding.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <set>

#include "framework/base/checked_math.h"

namespace spill {
namespace {

// One integer of the arithmetic: known, or a multiple of the batch size
// (`value` x the batch: a batch merged with other axes, as attention's
// heads are).
struct SymInt {
  int64_t value = 0;
  bool batch = false;
};

bool operator==(const SymInt& a, const SymInt& b) {
  return a.value == b.value && a.batch == b.batch;
}

// A value's inferred shape, one entry per axis; nullopt for an unknown one.
using SymDims = std::vector<std::optional<SymInt>>;

// An evaluated integer tensor: a scalar or a vector.
struct IntValue {
  std::vector<SymInt> values;
  bool scalar = false;
  int64_t cols = 0;  // > 0: a matrix of values.size() / cols rows (PyTorch's pads), row-major
};

constexpr size_t kMaxFoldedValues = 64;  // shapes and bounds, never data

using IntValues = std::map<std::string, IntValue>;
using SymShapes = std::map<std::string, SymDims>;

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

std::optional<IntValue> Shape(const onnx::NodeProto& n, const SymDims& dims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = IntAttr(n, "start", 0), end = IntAttr(n, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::max<int64_t>(0, std::min(start, rank));
  end = std::max<int64_t>(start, std::min(end, rank));
  IntValue v;
  for (int64_t axis = start; axis < end; ++axis) {
    if (!dims[axis]) return std::nullopt;
    v.values.push_back(*dims[axis]);
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

// Add, Sub, Mul and Div of two integers; a multiple of the batch times or
// over a positive known integer (that divides it) stays one.
std::optional<SymInt> Arithmetic(const std::string& op, SymInt p, SymInt q) {
  SymInt r;
  if (p.batch || q.batch) {
    if (op == "Mul" && p.batch != q.batch) {
      if (q.batch) std::swap(p, q);
      if (q.value <= 0 || !CheckedMul(p.value, q.value, &r.value)) return std::nullopt;
      r.batch = true;
      return r;
    }
    if (op == "Div" && p.batch && !q.batch && q.value > 0 && p.value % q.value == 0) {
      return SymInt{p.value / q.value, true};
    }
    return std::nullopt;
  }
  if (op == "Mod" ||
      op == "Fmod") {  // integers: Mod's sign is the divisor's, Fmod's the dividend's
    if (q.value == 0 || (q.value == -1 && p.value == INT64_MIN)) return std::nullopt;
    r.value = p.value % q.value;
    if (op == "Mod" && r.value != 0 && ((r.value < 0) != (q.value < 0))) r.value += q.value;
    return r;
  }
  if (op == "Add" && !CheckedAdd(p.value, q.value, &r.value)) return std::nullopt;
  if (op == "Sub" && !CheckedSub(p.value, q.value, &r.value)) return std::nullopt;
  if (op == "Mul" && !CheckedMul(p.value, q.value, &r.value)) return std::nullopt;
  if (op == "Div") {
    if (q.value == 0 || (q.value == -1 && p.value == INT64_MIN)) return std::nullopt;
    r.value = p.value / q.value;  // the importer reports a division by zero
  }
  return r;
}

// Equal: 1 or 0. The batch is positive: it equals no integer below 1, and a
// multiple of it equals another multiple when their factors do.
std::optional<SymInt> Equal(const SymInt& p, const SymInt& q) {
  if (p.batch == q.batch) return SymInt{p.value == q.value ? 1 : 0, false};
  const SymInt& known = p.batch ? q : p;
  if (known.value < 1) return SymInt{0, false};
  return std::nullopt;
}

// Elementwise over two values of one size (or one of them single); `op`
// also selects Where's (condition, a, b) from its first two.
std::optional<IntValue> Elementwise(const std::string& op, const std::vector<const IntValue*>& in) {
  size_t count = 1;
  for (const IntValue* x : in) {
    if (x == nullptr || x->values.empty() || x->cols > 0) return std::nullopt;
    if (x->values.size() != 1 && count != 1 && x->values.size() != count) return std::nullopt;
    count = std::max(count, x->values.size());
  }
  IntValue v;
  v.scalar = true;
  for (const IntValue* x : in) v.scalar = v.scalar && x->scalar;
  for (size_t i = 0; i < count; ++i) {
    auto at = [&](int k) { return in[k]->values[in[k]->values.size() == 1 ? 0 : i]; };
    std::optional<SymInt> r;
    if (op == "Where") {
      if (at(0).batch) return std::nullopt;
      r = at(0).value != 0 ? at(1) : at(2);
    } else if (op == "Equal") {
      r = Equal(at(0), at(1));
    } else {
      r = Arithmetic(op, at(0), at(1));
    }
    if (!r) return std::nullopt;
    v.values.push_back(*r);
  }
  return v;
}

// ConstantOfShape of a known shape, filled with its integer `value`.
std::optional<IntValue> ConstantOfShape(const onnx::NodeProto& n, const IntValue& shape) {
  const auto dims = Known(shape);
  if (!dims || dims->size() != 1 || (*dims)[0] < 0 ||
      (*dims)[0] > static_cast<int64_t>(kMaxFoldedValues)) {
    return std::nullopt;
  }
  std::optional<IntValue> fill = IntValue{{{0, false}}, true};
  if (const onnx::AttributeProto* a = Attribute(n, "value")) {
    fill = a->has_t() ? FromTensor(a->t()) : std::nullopt;
  }
  if (!fill || fill->values.size() != 1) return std::nullopt;  // a float fill: data, not shape
  IntValue v;
  v.values.assign((*dims)[0], fill->values[0]);
  return v;
}

// Slice of a vector's elements or a matrix's rows (axis 0), by any step.
std::optional<IntValue> Slice(const IntValue& data, const std::vector<const IntValue*>& args) {
  if (data.scalar || args.size() < 2) return std::nullopt;
  auto starts = Known(*args[0]), ends = Known(*args[1]);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1) return std::nullopt;
  const int64_t rank = data.cols > 0 ? 2 : 1;
  if (args.size() > 2 && args[2] != nullptr) {
    auto axes = Known(*args[2]);
    if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -rank)) return std::nullopt;
  }
  int64_t step = 1;
  if (args.size() > 3 && args[3] != nullptr) {
    auto steps = Known(*args[3]);
    if (!steps || steps->size() != 1 || (*steps)[0] == 0) return std::nullopt;
    step = (*steps)[0];
  }
  const int64_t unit = data.cols > 0 ? data.cols : 1;
  const int64_t size = static_cast<int64_t>(data.values.size()) / unit;
  int64_t begin = (*starts)[0], end = (*ends)[0];
  if (begin < 0) begin += size;
  if (end < 0) end = end < -size ? -1 : end + size;  // below -size: before the first
  if (step > 0) {
    begin = std::max<int64_t>(0, std::min(begin, size));
    end = std::max<int64_t>(0, std::min(end, size));
  } else {
    begin = std::max<int64_t>(0, std::min(begin, size - 1));
    end = std::max<int64_t>(-1, std::min(end, size - 1));
  }
  IntValue v;
  v.cols = data.cols;
  for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) {
    v.values.insert(v.values.end(), data.values.begin() + i * unit,
                    data.values.begin() + (i + 1) * unit);
  }
  return v;
}

// Transpose of a matrix (perm [1, 0], or none); a vector is its own.
std::optional<IntValue> Transpose(const onnx::NodeProto& n, const IntValue& data) {
  const onnx::AttributeProto* a = Attribute(n, "perm");
  const std::vector<int64_t> perm = a != nullptr
                                        ? std::vector<int64_t>(a->ints().begin(), a->ints().end())
                                        : std::vector<int64_t>();
  if (data.scalar) return std::nullopt;
  if (data.cols == 0) {
    return perm.empty() || perm == std::vector<int64_t>{0} ? std::optional<IntValue>(data)
                                                           : std::nullopt;
  }
  if (!perm.empty() && perm != std::vector<int64_t>{1, 0}) return std::nullopt;
  const int64_t rows = static_cast<int64_t>(data.values.size()) / data.cols;
  IntValue v;
  v.cols = rows;
  for (int64_t c = 0; c < data.cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) v.values.push_back(data.values[r * data.cols + c]);
  }
  return v;
}

// Reshape of a vector or matrix to one or two axes (-1: what is left, 0:
// the input's axis).
std::optional<IntValue> ReshapeInts(const IntValue& data, const IntValue& shape) {
  const auto target = Known(shape);
  if (data.scalar || !target || target->empty() || target->size() > 2) return std::nullopt;
  const int64_t size = static_cast<int64_t>(data.values.size());
  const std::vector<int64_t> in = data.cols > 0 ? std::vector<int64_t>{size / data.cols, data.cols}
                                                : std::vector<int64_t>{size};
  std::vector<int64_t> dims = *target;
  int64_t known = 1, rest = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && i < in.size()) dims[i] = in[i];
    if (dims[i] == -1 && rest < 0) {
      rest = static_cast<int64_t>(i);
    } else if (dims[i] > 0) {
      known *= dims[i];
    } else {
      return std::nullopt;
    }
  }
  if (rest >= 0) {
    if (known == 0 || size % known != 0) return std::nullopt;
    dims[rest] = size / known;
  } else if (known != size) {
    return std::nullopt;
  }
  IntValue v = data;
  v.cols = dims.size() == 2 ? dims[1] : 0;
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
                                 const SymShapes& dims) {
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
  if (op == "Gather" && in.size() == 2 && in[1] != nullptr && IntAttr(n, "axis", 0) == 0 &&
      in[0]->cols == 0 && in[1]->cols == 0) {
    return Gather(*in[0], *in[1]);
  }
  if (op == "Unsqueeze" && in[0]->cols == 0) return Unsqueeze(n, ints, *in[0]);
  if (op == "Squeeze" && !in[0]->scalar && in[0]->values.size() == 1) {
    IntValue v = *in[0];
    v.scalar = true;
    return v;
  }
  if (op == "Concat") {
    IntValue v;
    for (const IntValue* x : in) {
      if (x == nullptr || x->scalar || x->cols > 0) return std::nullopt;
      v.values.insert(v.values.end(), x->values.begin(), x->values.end());
    }
    if (v.values.size() > kMaxFoldedValues) return std::nullopt;
    return v;
  }
  if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal") &&
      in.size() == 2) {
    return Elementwise(op, in);
  }
  if (op == "Where" && in.size() == 3) return Elementwise(op, in);
  if (op == "Reshape" && in.size() == 2 && in[1] != nullptr) return ReshapeInts(*in[0], *in[1]);
  if (op == "Transpose") return Transpose(n, *in[0]);
  if (op == "Mod" && in.size() == 2) {
    return Elementwise(IntAttr(n, "fmod", 0) != 0 ? "Fmod" : "Mod", in);
  }
  if (op == "ConstantOfShape") return ConstantOfShape(n, *in[0]);
  if (op == "Slice") return Slice(*in[0], std::vector<const IntValue*>(in.begin() + 1, in.end()));
  return std::nullopt;
}

onnx::TensorProto ToTensor(const std::string& name, const IntValue& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  if (v.cols > 0) {
    t.add_dims(static_cast<int64_t>(v.values.size()) / v.cols);
    t.add_dims(v.cols);
  } else if (!v.scalar) {
    t.add_dims(static_cast<int64_t>(v.values.size()));
  }
  for (const SymInt& s : v.values) t.add_int64_data(s.batch ? 0 : s.value);
  return t;
}

// Whether `v` may replace input `k` of `n`: the batch only as Reshape's
// leading "copy the input's dimension", where the input's first axis is the
// batch itself.
bool Replaceable(const onnx::NodeProto& n, int k, const IntValue& v, const SymShapes& shapes) {
  for (size_t i = 0; i < v.values.size(); ++i) {
    if (!v.values[i].batch) continue;
    if (n.op_type() != "Reshape" || k != 1 || i != 0 || v.values[i].value != 1) return false;
    auto in = shapes.find(n.input(0));
    const SymInt batch{1, true};
    if (in == shapes.end() || in->second.empty() || !(in->second[0] && *in->second[0] == batch)) {
      return false;
    }
  }
  return true;
}

// The batch's symbol: the first input's first axis (a dim_param), or "".
std::string BatchSymbol(const onnx::GraphProto& graph) {
  if (graph.input_size() == 0) return "";
  const auto& type = graph.input(0).type();
  if (!type.has_tensor_type() || type.tensor_type().shape().dim_size() == 0) return "";
  const auto& d = type.tensor_type().shape().dim(0);
  return d.has_dim_param() ? d.dim_param() : "";
}

SymDims ReadSymDims(const onnx::ValueInfoProto& info, const std::string& batch) {
  SymDims dims;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    std::optional<SymInt> s;
    if (d.has_dim_value()) {
      s = SymInt{d.dim_value(), false};
    } else if (auto k = BatchMultiple(d.dim_param(), batch)) {
      s = SymInt{*k, true};
    } else if (dims.empty() && !d.has_dim_param()) {
      s = SymInt{1, true};  // an unnamed first axis: the batch (a symbol of
                            // inference's own, "unk__k", is unknown: it may
                            // be a multiple of the batch)
    }
    dims.push_back(s);
  }
  return dims;
}

SymShapes ReadSymShapes(const onnx::GraphProto& graph, const std::string& batch) {
  SymShapes shapes;
  for (const auto& t : graph.initializer()) {
    SymDims& dims = shapes[t.name()];
    for (int64_t d : t.dims()) dims.push_back(SymInt{d, false});
  }
  auto read = [&](const onnx::ValueInfoProto& info) {
    if (info.type().has_tensor_type() && info.type().tensor_type().has_shape()) {
      shapes[info.name()] = ReadSymDims(info, batch);
    }
  };
  for (const auto& v : graph.input()) read(v);
  for (const auto& v : graph.value_info()) read(v);
  for (const auto& v : graph.output()) read(v);
  return shapes;
}

bool Complete(const SymDims& dims) {
  for (const auto& d : dims) {
    if (!d) return false;
  }
  return true;
}

// The product of `dims` as (known factor, count of batch factors).
std::optional<std::pair<int64_t, int>> Product(const std::vector<SymInt>& dims) {
  int64_t known = 1;
  int batches = 0;
  for (const SymInt& d : dims) {
    if (d.value <= 0 || !CheckedMul(known, d.value, &known)) return std::nullopt;
    batches += d.batch ? 1 : 0;
  }
  return std::make_pair(known, batches);
}

// Reshape's output shape from its input's and the (evaluated) target: 0
// copies the input's axis, -1 takes what is left.
std::optional<std::vector<SymInt>> ReshapeDims(const onnx::NodeProto& n, const SymDims& in,
                                               const IntValue& target) {
  if (!Complete(in) || target.scalar || IntAttr(n, "allowzero", 0) != 0) return std::nullopt;
  std::vector<SymInt> input, out;
  for (const auto& d : in) input.push_back(*d);
  int rest = -1;
  for (size_t i = 0; i < target.values.size(); ++i) {
    SymInt d = target.values[i];
    if (!d.batch && d.value == 0) {
      if (i >= input.size()) return std::nullopt;
      d = input[i];
    } else if (!d.batch && d.value == -1) {
      if (rest >= 0) return std::nullopt;
      rest = static_cast<int>(i);
    } else if (d.value <= 0) {
      return std::nullopt;
    }
    out.push_back(d);
  }
  const auto total = Product(input);
  std::vector<SymInt> others = out;
  if (rest >= 0) others.erase(others.begin() + rest);
  const auto given = Product(others);
  if (!total || !given || total->first % given->first != 0) return std::nullopt;
  const SymInt left{total->first / given->first, total->second - given->second == 1};
  const int batches_left = total->second - given->second;
  if (rest >= 0) {
    if (batches_left < 0 || batches_left > 1) return std::nullopt;
    out[rest] = left;
  } else if (batches_left != 0 || left.value != 1) {
    return std::nullopt;
  }
  return out;
}

// Expand's output shape: the input's broadcast against the target.
std::optional<std::vector<SymInt>> ExpandDims(const SymDims& in, const IntValue& target) {
  if (!Complete(in) || target.scalar) return std::nullopt;
  const size_t rank = std::max(in.size(), target.values.size());
  std::vector<SymInt> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t a = rank - i - 1;
    const bool has_in = i < in.size(), has_target = i < target.values.size();
    const SymInt x = has_in ? *in[in.size() - i - 1] : SymInt{1, false};
    const SymInt y = has_target ? target.values[target.values.size() - i - 1] : SymInt{1, false};
    const SymInt one{1, false};
    if (x == y || y == one) {
      out[a] = x;
    } else if (x == one) {
      out[a] = y;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// `dims` as a value's shape for inference to read on: the batch as its
// symbol, a multiple of it as "<symbol>*k".
onnx::ValueInfoProto Annotation(const std::string& value, int32_t elem_type,
                                const std::vector<SymInt>& dims, const std::string& batch) {
  onnx::ValueInfoProto info;
  info.set_name(value);
  auto* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  auto* shape = tensor->mutable_shape();
  for (const SymInt& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.batch) {
      dim->set_dim_value(d.value);
    } else {
      dim->set_dim_param(d.value == 1 ? batch : batch + "*" + std::to_string(d.value));
    }
  }
  return info;
}

// Concat's output shape from its inputs': the same on every axis but
// `axis`, where known sizes add up.
std::optional<std::vector<SymInt>> ConcatDims(const onnx::NodeProto& n, const SymShapes& shapes) {
  std::vector<SymInt> out;
  for (int k = 0; k < n.input_size(); ++k) {
    auto in = shapes.find(n.input(k));
    if (in == shapes.end() || !Complete(in->second)) return std::nullopt;
    int64_t axis = IntAttr(n, "axis", 0);
    const int64_t rank = static_cast<int64_t>(in->second.size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || (k > 0 && rank != static_cast<int64_t>(out.size()))) {
      return std::nullopt;
    }
    for (int64_t a = 0; a < rank; ++a) {
      const SymInt d = *in->second[a];
      if (k == 0) {
        out.push_back(d);
      } else if (a == axis) {
        if (d.batch || out[a].batch) return std::nullopt;
        out[a].value += d.value;
      } else if (!(d == out[a])) {
        return std::nullopt;
      }
    }
  }
  return out;
}

// Einsum's output shape from an explicit equation ("bghid,bghjd->bghij",
// spaces allowed, no ellipsis): each output letter's size where its
// operands give it, the same in all of them. ONNX 1.12 infers none.
std::optional<std::vector<SymInt>> EinsumDims(const onnx::NodeProto& n, const SymShapes& shapes) {
  const onnx::AttributeProto* a = Attribute(n, "equation");
  if (a == nullptr) return std::nullopt;
  std::string equation;
  for (char ch : a->s()) {
    if (ch != ' ') equation += ch;
  }
  const size_t arrow = equation.find("->");
  if (arrow == std::string::npos || equation.find('.') != std::string::npos) return std::nullopt;
  std::map<char, SymInt> sizes;
  std::string operand;
  int k = 0;
  for (size_t i = 0; i <= arrow; ++i) {
    if (i < arrow && equation[i] != ',') {
      operand += equation[i];
      continue;
    }
    auto in = k < n.input_size() ? shapes.find(n.input(k)) : shapes.end();
    if (in == shapes.end() || !Complete(in->second) || in->second.size() != operand.size()) {
      return std::nullopt;
    }
    for (size_t axis = 0; axis < operand.size(); ++axis) {
      const SymInt d = *in->second[axis];
      auto [it, fresh] = sizes.emplace(operand[axis], d);
      if (!fresh && !(it->second == d)) return std::nullopt;
    }
    operand.clear();
    ++k;
  }
  if (k != n.input_size()) return std::nullopt;
  std::vector<SymInt> out;
  for (char ch : equation.substr(arrow + 2)) {
    auto it = sizes.find(ch);
    if (it == sizes.end()) return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

int32_t ElemType(const onnx::GraphProto& graph, const std::string& value) {
  auto of = [&](const onnx::ValueInfoProto& v) { return v.type().tensor_type().elem_type(); };
  for (const auto& v : graph.value_info()) {
    if (v.name() == value && of(v) != 0) return of(v);
  }
  for (const auto& v : graph.input()) {
    if (v.name() == value && of(v) != 0) return of(v);
  }
  for (const auto& t : graph.initializer()) {
    if (t.name() == value) return t.data_type();
  }
  return onnx::TensorProto::FLOAT;
}

// Reshapes and Expands whose targets hold the batch - merged with other
// axes, or not first - cannot take a constant target, and ONNX's inference
// loses the batch's symbol through a Concat: their output shapes are
// noted instead, as are Einsums' (which ONNX's inference leaves unknown).
// Returns whether any was new.
bool AnnotateBatchShapes(const onnx::GraphProto& graph, const IntValues& ints,
                         const SymShapes& shapes, const std::string& batch,
                         std::map<std::string, onnx::ValueInfoProto>* annotations) {
  bool added = false;
  for (const auto& n : graph.node()) {
    const std::string& op = n.op_type();
    if (n.output_size() != 1 || annotations->count(n.output(0))) continue;
    auto out = shapes.find(n.output(0));
    if (out != shapes.end() && Complete(out->second)) continue;
    std::optional<std::vector<SymInt>> dims;
    if (op == "Einsum") {
      dims = EinsumDims(n, shapes);
    } else if (batch.empty()) {
      continue;
    } else if ((op == "Reshape" || op == "Expand") && n.input_size() == 2) {
      auto target = ints.find(n.input(1));
      auto in = shapes.find(n.input(0));
      if (target == ints.end() || in == shapes.end()) continue;
      dims = op == "Reshape" ? ReshapeDims(n, in->second, target->second)
                             : ExpandDims(in->second, target->second);
    } else if (op == "Concat") {
      dims = ConcatDims(n, shapes);
    }
    if (!dims) continue;
    (*annotations)[n.output(0)] =
        Annotation(n.output(0), ElemType(graph, n.input(0)), *dims, batch);
    added = true;
  }
  return added;
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

std::optional<int64_t> BatchMultiple(const std::string& dim_param, const std::string& batch) {
  if (batch.empty() || dim_param.rfind(batch, 0) != 0) return std::nullopt;
  if (dim_param.size() == batch.size()) return 1;
  const std::string rest = dim_param.substr(batch.size());
  if (rest.size() < 2 || rest[0] != '*') return std::nullopt;
  int64_t k = 0;
  for (size_t i = 1; i < rest.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(rest[i])) || !CheckedMul(k, int64_t{10}, &k) ||
        !CheckedAdd(k, int64_t{rest[i] - '0'}, &k)) {
      return std::nullopt;
    }
  }
  if (k < 1) return std::nullopt;
  return k;
}

bool IsShapeArithmetic(const std::string& op) {
  return op == "Shape" || op == "Gather" || op == "Unsqueeze" || op == "Squeeze" || op == "Cast" ||
         op == "Mod";
}

bool FoldShapeArithmetic(onnx::ModelProto* model,
                         std::map<std::string, onnx::ValueInfoProto>* annotations) {
  onnx::GraphProto* graph = model->mutable_graph();
  const std::string batch = BatchSymbol(*graph);
  const SymShapes dims = ReadSymShapes(*graph, batch);
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
      if (!computed.count(name) || !Replaceable(n, k, ints[name], dims)) continue;
      const std::string folded = name + "/folded";
      if (added.insert(folded).second) *graph->add_initializer() = ToTensor(folded, ints[name]);
      n.set_input(k, folded);
      changed = true;
    }
  }
  if (changed) DropDeadArithmetic(graph, computed);
  return AnnotateBatchShapes(*graph, ints, dims, batch, annotations) || changed;
}

}  // namespace spill
