#include "framework/onnx/onnx_data_folding.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "framework/base/checked_math.h"
#include "framework/onnx/onnx_model.h"

namespace spill {
namespace {

using onnx::TensorProto;

// A constant tensor: float32, int64 (int32 read as int64) or bool, its
// values held as doubles (exact for all three).
struct Data {
  int32_t type = TensorProto::FLOAT;
  std::vector<int64_t> dims;
  std::vector<double> v;
};

using Folded = std::optional<Data>;

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || !CheckedMul(n, d, &n) || n > kMaxFoldedDataValues) return -1;
  }
  return n;
}

Folded FromTensor(const TensorProto& t) {
  Data d;
  d.type = t.data_type();
  d.dims.assign(t.dims().begin(), t.dims().end());
  const int64_t n = Count(d.dims);
  if (n < 0 || t.data_location() == TensorProto::EXTERNAL) return std::nullopt;
  const bool raw = t.has_raw_data();
  const std::string& bytes = t.raw_data();
  auto read = [&](size_t width, auto fetch) -> bool {
    if (raw ? bytes.size() != static_cast<size_t>(n) * width : false) return false;
    for (int64_t i = 0; i < n; ++i) d.v.push_back(fetch(i));
    return true;
  };
  bool ok = false;
  if (d.type == TensorProto::FLOAT) {
    ok = (raw || t.float_data_size() == n) && read(4, [&](int64_t i) {
           float f = 0;
           if (raw) std::memcpy(&f, bytes.data() + i * 4, 4);
           return static_cast<double>(raw ? f : t.float_data(static_cast<int>(i)));
         });
  } else if (d.type == TensorProto::INT64) {
    ok = (raw || t.int64_data_size() == n) && read(8, [&](int64_t i) {
           int64_t x = 0;
           if (raw) std::memcpy(&x, bytes.data() + i * 8, 8);
           return static_cast<double>(raw ? x : t.int64_data(static_cast<int>(i)));
         });
  } else if (d.type == TensorProto::INT32 || d.type == TensorProto::BOOL) {
    const size_t width = d.type == TensorProto::INT32 ? 4 : 1;
    ok = (raw || t.int32_data_size() == n) && read(width, [&](int64_t i) {
           int32_t x = 0;
           if (raw && width == 4) std::memcpy(&x, bytes.data() + i * 4, 4);
           if (raw && width == 1) x = static_cast<unsigned char>(bytes[i]) != 0;
           return static_cast<double>(raw ? x : t.int32_data(static_cast<int>(i)));
         });
    if (d.type == TensorProto::INT32) d.type = TensorProto::INT64;
  }
  return ok ? Folded(d) : std::nullopt;
}

// Integers held as doubles back as integers: exact up to 2^53; beyond, only
// the "to the end" bounds of Slice (INT64_MAX, INT64_MIN) are used, and they
// saturate.
int64_t ToInt(double x) {
  constexpr double kLimit = 9.2e18;
  if (std::isnan(x)) return 0;  // a Cast of NaN: any value; never used as a bound
  if (x >= kLimit) return INT64_MAX;
  if (x <= -kLimit) return INT64_MIN;
  return static_cast<int64_t>(x);
}

TensorProto ToTensor(const std::string& name, const Data& d) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(d.type);
  for (int64_t x : d.dims) t.add_dims(x);
  std::string bytes;
  for (double x : d.v) {
    if (d.type == TensorProto::FLOAT) {
      const float f = static_cast<float>(x);
      bytes.append(reinterpret_cast<const char*>(&f), 4);
    } else if (d.type == TensorProto::INT64) {
      const int64_t i = ToInt(x);
      bytes.append(reinterpret_cast<const char*>(&i), 8);
    } else {
      bytes.push_back(x != 0 ? 1 : 0);
    }
  }
  t.set_raw_data(bytes);
  return t;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// The broadcast of several shapes (numpy's rules), or nullopt.
std::optional<std::vector<int64_t>> BroadcastDims(const std::vector<const Data*>& in) {
  size_t rank = 0;
  for (const Data* x : in) rank = std::max(rank, x->dims.size());
  std::vector<int64_t> out(rank, 1);
  for (const Data* x : in) {
    const size_t shift = rank - x->dims.size();
    for (size_t a = 0; a < x->dims.size(); ++a) {
      const int64_t d = x->dims[a];
      if (d == out[shift + a] || d == 1) continue;
      if (out[shift + a] != 1) return std::nullopt;
      out[shift + a] = d;
    }
  }
  if (Count(out) < 0) return std::nullopt;
  return out;
}

// The flat index into `x` of output element `i` broadcast to `dims`.
int64_t SourceIndex(const Data& x, const std::vector<int64_t>& dims, int64_t i) {
  const std::vector<int64_t> out_strides = Strides(dims), strides = Strides(x.dims);
  const size_t shift = dims.size() - x.dims.size();
  int64_t k = 0;
  for (size_t a = 0; a < dims.size(); ++a) {
    const int64_t coordinate = (i / out_strides[a]) % dims[a];
    if (a >= shift && x.dims[a - shift] != 1) k += coordinate * strides[a - shift];
  }
  return k;
}

double AsType(int32_t type, double x) {
  if (type == TensorProto::FLOAT) return static_cast<float>(x);
  if (type == TensorProto::BOOL) return x != 0 ? 1 : 0;
  return std::trunc(x);
}

std::optional<double> Apply(const std::string& op, int32_t type, double a, double b) {
  const bool f = type == TensorProto::FLOAT;
  if (op == "Add") return AsType(type, f ? double(float(a) + float(b)) : a + b);
  if (op == "Sub") return AsType(type, f ? double(float(a) - float(b)) : a - b);
  if (op == "Mul") return AsType(type, f ? double(float(a) * float(b)) : a * b);
  if (op == "Div") {
    if (!f && b == 0) return std::nullopt;
    return AsType(type, f ? double(float(a) / float(b)) : std::trunc(a / b));
  }
  if (op == "Pow") return AsType(type, f ? double(std::pow(float(a), float(b))) : std::pow(a, b));
  if (op == "Equal") return a == b ? 1 : 0;
  if (op == "Less") return a < b ? 1 : 0;
  if (op == "Greater") return a > b ? 1 : 0;
  if (op == "And") return (a != 0 && b != 0) ? 1 : 0;
  if (op == "Or") return (a != 0 || b != 0) ? 1 : 0;
  return std::nullopt;
}

Folded Binary(const std::string& op, const Data& a, const Data& b) {
  auto dims = BroadcastDims({&a, &b});
  if (!dims) return std::nullopt;
  const bool compares =
      op == "Equal" || op == "Less" || op == "Greater" || op == "And" || op == "Or";
  Data out;
  out.type = compares ? TensorProto::BOOL : a.type;
  out.dims = *dims;
  const int64_t n = Count(*dims);
  for (int64_t i = 0; i < n; ++i) {
    auto r = Apply(op, a.type, a.v[SourceIndex(a, *dims, i)], b.v[SourceIndex(b, *dims, i)]);
    if (!r) return std::nullopt;
    out.v.push_back(*r);
  }
  return out;
}

Folded Where(const Data& c, const Data& a, const Data& b) {
  auto dims = BroadcastDims({&c, &a, &b});
  if (!dims) return std::nullopt;
  Data out;
  out.type = a.type;
  out.dims = *dims;
  const int64_t n = Count(*dims);
  for (int64_t i = 0; i < n; ++i) {
    out.v.push_back(c.v[SourceIndex(c, *dims, i)] != 0 ? a.v[SourceIndex(a, *dims, i)]
                                                       : b.v[SourceIndex(b, *dims, i)]);
  }
  return out;
}

std::vector<int64_t> Ints(const Data& d) {
  std::vector<int64_t> out;
  for (double x : d.v) out.push_back(ToInt(x));
  return out;
}

// Axes from input `k` (opset 13) or the attribute `axes`, made positive
// against `rank`; nullopt when one is out of range.
std::optional<std::vector<int64_t>> Axes(const onnx::NodeProto& n,
                                         const std::vector<const Data*>& in, size_t k,
                                         int64_t rank) {
  std::vector<int64_t> axes;
  if (in.size() > k && in[k] != nullptr) {
    axes = Ints(*in[k]);
  } else if (const onnx::AttributeProto* a = FindAttribute(n, "axes")) {
    axes.assign(a->ints().begin(), a->ints().end());
  }
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return std::nullopt;
  }
  return axes;
}

Folded Unsqueeze(const onnx::NodeProto& n, const std::vector<const Data*>& in) {
  Data out = *in[0];
  const onnx::AttributeProto* attribute = FindAttribute(n, "axes");
  const size_t added = in.size() > 1 && in[1] != nullptr ? in[1]->v.size()
                       : attribute != nullptr            ? attribute->ints_size()
                                                         : 0;
  auto axes = Axes(n, in, 1, static_cast<int64_t>(out.dims.size() + added));
  if (!axes || axes->empty()) return std::nullopt;
  std::sort(axes->begin(), axes->end());
  for (int64_t a : *axes) {
    if (a > static_cast<int64_t>(out.dims.size())) return std::nullopt;
    out.dims.insert(out.dims.begin() + a, 1);
  }
  return out;
}

Folded Squeeze(const onnx::NodeProto& n, const std::vector<const Data*>& in) {
  Data out = *in[0];
  auto axes = Axes(n, in, 1, static_cast<int64_t>(out.dims.size()));
  if (!axes) return std::nullopt;
  std::vector<int64_t> dims;
  for (size_t a = 0; a < out.dims.size(); ++a) {
    const bool listed = std::count(axes->begin(), axes->end(), static_cast<int64_t>(a)) > 0;
    if (listed && out.dims[a] != 1) return std::nullopt;
    if (!(listed || (axes->empty() && out.dims[a] == 1))) dims.push_back(out.dims[a]);
  }
  out.dims = dims;
  return out;
}

Folded Reshape(const onnx::NodeProto& n, const Data& x, const Data& shape) {
  if (AttrInt(n, "allowzero", 0) != 0) return std::nullopt;
  std::vector<int64_t> dims = Ints(shape);
  int64_t known = 1, rest = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && i < x.dims.size()) dims[i] = x.dims[i];
    if (dims[i] == -1 && rest < 0) {
      rest = static_cast<int64_t>(i);
    } else if (dims[i] < 0 || !CheckedMul(known, dims[i], &known)) {
      return std::nullopt;
    }
  }
  const int64_t n_values = static_cast<int64_t>(x.v.size());
  if (rest >= 0) {
    if (known == 0 || n_values % known != 0) return std::nullopt;
    dims[rest] = n_values / known;
  } else if (known != n_values) {
    return std::nullopt;
  }
  Data out = x;
  out.dims = dims;
  return out;
}

Folded Transpose(const onnx::NodeProto& n, const Data& x) {
  const size_t rank = x.dims.size();
  std::vector<int64_t> perm;
  if (const onnx::AttributeProto* a = FindAttribute(n, "perm")) {
    perm.assign(a->ints().begin(), a->ints().end());
  } else {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted.size() != rank || sorted[i] != static_cast<int64_t>(i)) return std::nullopt;
  }
  Data out;
  out.type = x.type;
  for (int64_t p : perm) out.dims.push_back(x.dims[p]);
  const std::vector<int64_t> in_strides = Strides(x.dims), out_strides = Strides(out.dims);
  const int64_t count = static_cast<int64_t>(x.v.size());
  out.v.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t k = 0;
    for (size_t a = 0; a < rank; ++a) k += (i / out_strides[a]) % out.dims[a] * in_strides[perm[a]];
    out.v[i] = x.v[k];
  }
  return out;
}

// Copies the elements of `x` at the coordinates `map` gives for each output
// coordinate (one axis at a time), into an output of `dims`.
template <typename Map>
Data Gathered(const Data& x, const std::vector<int64_t>& dims, Map map) {
  Data out;
  out.type = x.type;
  out.dims = dims;
  const std::vector<int64_t> strides = Strides(x.dims), out_strides = Strides(dims);
  const int64_t n = Count(dims);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = 0;
    for (size_t a = 0; a < dims.size(); ++a) {
      k += map(a, (i / out_strides[a]) % dims[a]) * strides[a];
    }
    out.v.push_back(x.v[k]);
  }
  return out;
}

Folded Slice(const std::vector<const Data*>& in) {
  const Data& x = *in[0];
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (in.size() < 3 || in[1] == nullptr || in[2] == nullptr) return std::nullopt;
  const std::vector<int64_t> starts = Ints(*in[1]), ends = Ints(*in[2]);
  std::vector<int64_t> axes, steps(starts.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (in.size() > 3 && in[3] != nullptr) axes = Ints(*in[3]);
  if (in.size() > 4 && in[4] != nullptr) steps = Ints(*in[4]);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return std::nullopt;
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1), dims = x.dims;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] == 0) return std::nullopt;
    const int64_t size = x.dims[a];
    if (size == 0) return std::nullopt;
    int64_t s = starts[i] < 0 ? starts[i] + size : starts[i];
    int64_t e = ends[i] < 0 ? std::max<int64_t>(ends[i] + size, -1) : ends[i];
    if (steps[i] > 0) {
      s = std::clamp<int64_t>(s, 0, size);
      e = std::clamp<int64_t>(e, 0, size);
      dims[a] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, size - 1);
      e = std::clamp<int64_t>(e, -1, size - 1);
      dims[a] = s > e ? (s - e - steps[i] - 1) / -steps[i] : 0;
    }
    begin[a] = s;
    step[a] = steps[i];
  }
  return Gathered(x, dims, [&](size_t a, int64_t c) { return begin[a] + c * step[a]; });
}

Folded Expand(const Data& x, const Data& shape) {
  Data target;
  target.dims = Ints(shape);
  auto dims = BroadcastDims({&x, &target});
  if (!dims) return std::nullopt;
  Data out;
  out.type = x.type;
  out.dims = *dims;
  const int64_t n = Count(*dims);
  for (int64_t i = 0; i < n; ++i) out.v.push_back(x.v[SourceIndex(x, *dims, i)]);
  return out;
}

Folded Concat(const onnx::NodeProto& n, const std::vector<const Data*>& in) {
  const int64_t rank = static_cast<int64_t>(in[0]->dims.size());
  int64_t axis = AttrInt(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  Data out;
  out.type = in[0]->type;
  out.dims = in[0]->dims;
  out.dims[axis] = 0;
  for (const Data* x : in) {
    if (x == nullptr || static_cast<int64_t>(x->dims.size()) != rank) return std::nullopt;
    for (int64_t a = 0; a < rank; ++a) {
      if (a != axis && x->dims[a] != in[0]->dims[a]) return std::nullopt;
    }
    out.dims[axis] += x->dims[axis];
  }
  const int64_t outer = Count(std::vector<int64_t>(out.dims.begin(), out.dims.begin() + axis));
  for (int64_t o = 0; o < outer; ++o) {
    for (const Data* x : in) {
      const int64_t block = static_cast<int64_t>(x->v.size()) / std::max<int64_t>(outer, 1);
      out.v.insert(out.v.end(), x->v.begin() + o * block, x->v.begin() + (o + 1) * block);
    }
  }
  return out;
}

Folded Gather(const onnx::NodeProto& n, const Data& x, const Data& indices) {
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = AttrInt(n, "axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  const int64_t n_out = Count(dims);
  if (n_out < 0) return std::nullopt;
  const int64_t inner = Count(std::vector<int64_t>(x.dims.begin() + axis + 1, x.dims.end()));
  const int64_t k = static_cast<int64_t>(indices.v.size()), size = x.dims[axis];
  Data out;
  out.type = x.type;
  out.dims = dims;
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t outer = i / (k * inner), j = (i / inner) % k, r = i % inner;
    int64_t index = ToInt(indices.v[j]);
    if (index < 0) index += size;
    if (index < 0 || index >= size) return std::nullopt;
    out.v.push_back(x.v[(outer * size + index) * inner + r]);
  }
  return out;
}

Folded ScatterND(const onnx::NodeProto& n, const Data& x, const Data& indices,
                 const Data& updates) {
  const onnx::AttributeProto* reduction = FindAttribute(n, "reduction");
  if ((reduction != nullptr && reduction->s() != "none") || indices.dims.empty()) {
    return std::nullopt;
  }
  const int64_t depth = indices.dims.back();
  if (depth < 1 || depth > static_cast<int64_t>(x.dims.size())) return std::nullopt;
  const std::vector<int64_t> strides = Strides(x.dims);
  const int64_t inner = Count(std::vector<int64_t>(x.dims.begin() + depth, x.dims.end()));
  const int64_t points = static_cast<int64_t>(indices.v.size()) / depth;
  if (static_cast<int64_t>(updates.v.size()) != points * inner) return std::nullopt;
  Data out = x;
  for (int64_t p = 0; p < points; ++p) {
    int64_t base = 0;
    for (int64_t a = 0; a < depth; ++a) {
      int64_t c = ToInt(indices.v[p * depth + a]);
      if (c < 0) c += x.dims[a];
      if (c < 0 || c >= x.dims[a]) return std::nullopt;
      base += c * strides[a];
    }
    for (int64_t r = 0; r < inner; ++r) out.v[base + r] = updates.v[p * inner + r];
  }
  return out;
}

Folded Range(const Data& start, const Data& limit, const Data& delta) {
  if (start.v.size() != 1 || limit.v.size() != 1 || delta.v.size() != 1 || delta.v[0] == 0) {
    return std::nullopt;
  }
  const double count = std::ceil((limit.v[0] - start.v[0]) / delta.v[0]);
  if (!(count <= static_cast<double>(kMaxFoldedDataValues))) return std::nullopt;  // NaN too
  Data out;
  out.type = start.type;
  out.dims = {std::max<int64_t>(0, static_cast<int64_t>(count))};
  for (int64_t i = 0; i < out.dims[0]; ++i) {
    out.v.push_back(AsType(out.type, start.v[0] + static_cast<double>(i) * delta.v[0]));
  }
  return out;
}

Folded ConstantOfShape(const onnx::NodeProto& n, const Data& shape) {
  Data out;
  out.dims = Ints(shape);
  const int64_t count = Count(out.dims);
  if (count < 0) return std::nullopt;
  double fill = 0;
  if (const onnx::AttributeProto* a = FindAttribute(n, "value")) {
    auto value = a->has_t() ? FromTensor(a->t()) : std::nullopt;
    if (!value || value->v.size() != 1) return std::nullopt;
    out.type = value->type;
    fill = value->v[0];
  }
  out.v.assign(count, fill);
  return out;
}

Folded Cast(const onnx::NodeProto& n, Data x) {
  int64_t to = AttrInt(n, "to", 0);
  if (to == TensorProto::INT32) to = TensorProto::INT64;
  if (to != TensorProto::FLOAT && to != TensorProto::INT64 && to != TensorProto::BOOL) {
    return std::nullopt;
  }
  x.type = static_cast<int32_t>(to);
  for (double& v : x.v) v = AsType(x.type, v);
  return x;
}

Folded Unary(const std::string& op, Data x) {
  if (x.type != TensorProto::FLOAT) return std::nullopt;
  for (double& v : x.v) {
    const float f = static_cast<float>(v);
    if (op == "Relu") v = f > 0 ? f : 0.0f;
    if (op == "Sigmoid") v = 1.0f / (1.0f + std::exp(-f));
    if (op == "Exp") v = std::exp(f);
    if (op == "Sqrt") v = std::sqrt(f);
    v = static_cast<float>(v);
  }
  return x;
}

// Clip(x, min, max), either bound absent.
Folded Clip(const std::vector<const Data*>& in) {
  Data x = *in[0];
  const bool low = in.size() > 1 && in[1] != nullptr, high = in.size() > 2 && in[2] != nullptr;
  if ((low && in[1]->v.size() != 1) || (high && in[2]->v.size() != 1)) return std::nullopt;
  for (double& v : x.v) {
    if (low) v = std::max(v, in[1]->v[0]);
    if (high) v = std::min(v, in[2]->v[0]);
  }
  return x;
}

// MatMul of a batch of matrices (any leading axes) by one matrix, in float
// sums in order.
Folded MatMul(const Data& a, const Data& b) {
  if (a.type != TensorProto::FLOAT || a.dims.size() < 2 || b.dims.size() != 2 ||
      a.dims.back() != b.dims[0]) {
    return std::nullopt;
  }
  const int64_t k = b.dims[0], n = b.dims[1], rows = static_cast<int64_t>(a.v.size()) / k;
  Data out;
  out.dims = a.dims;
  out.dims.back() = n;
  if (Count(out.dims) < 0) return std::nullopt;
  out.v.resize(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t i = 0; i < k; ++i) {
        sum += static_cast<float>(a.v[r * k + i]) * static_cast<float>(b.v[i * n + j]);
      }
      out.v[r * n + j] = sum;
    }
  }
  return out;
}

Folded Evaluate(const onnx::NodeProto& n, const std::vector<const Data*>& in) {
  const std::string& op = n.op_type();
  const auto arity = in.size();
  if (op == "Identity" && arity == 1) return *in[0];
  if (op == "Cast" && arity == 1) return Cast(n, *in[0]);
  if (op == "Not" && arity == 1) {
    Data out = *in[0];
    for (double& v : out.v) v = v != 0 ? 0 : 1;
    return out;
  }
  if (op == "Neg" && arity == 1) {
    Data out = *in[0];
    for (double& v : out.v) v = -v;
    return out;
  }
  if (op == "ConstantOfShape" && arity == 1) return ConstantOfShape(n, *in[0]);
  if ((op == "Relu" || op == "Sigmoid" || op == "Exp" || op == "Sqrt") && arity == 1) {
    return Unary(op, *in[0]);
  }
  if (op == "Clip") return Clip(in);
  if (op == "MatMul" && arity == 2) return MatMul(*in[0], *in[1]);
  if (op == "Range" && arity == 3) return Range(*in[0], *in[1], *in[2]);
  if (op == "Where" && arity == 3) return Where(*in[0], *in[1], *in[2]);
  if (op == "Unsqueeze") return Unsqueeze(n, in);
  if (op == "Squeeze") return Squeeze(n, in);
  if (op == "Reshape" && arity == 2 && in[1] != nullptr) return Reshape(n, *in[0], *in[1]);
  if (op == "Transpose" && arity == 1) return Transpose(n, *in[0]);
  if (op == "Slice") return Slice(in);
  if (op == "Expand" && arity == 2) return Expand(*in[0], *in[1]);
  if (op == "Concat") return Concat(n, in);
  if (op == "Gather" && arity == 2) return Gather(n, *in[0], *in[1]);
  if (op == "ScatterND" && arity == 3) return ScatterND(n, *in[0], *in[1], *in[2]);
  if (arity == 2) return Binary(op, *in[0], *in[1]);
  return std::nullopt;
}

// The constants a fold may read: Constant nodes, and initializers other than
// float weights (a single float is a constant, not a weight).
std::map<std::string, Data> ReadConstants(const onnx::GraphProto& graph) {
  std::map<std::string, Data> known;
  for (const auto& t : graph.initializer()) {
    if (t.data_type() == TensorProto::FLOAT && Count({t.dims().begin(), t.dims().end()}) != 1) {
      continue;
    }
    if (auto d = FromTensor(t)) known[t.name()] = *d;
  }
  for (const auto& n : graph.node()) {
    if (n.op_type() != "Constant" || n.output_size() != 1) continue;
    const onnx::AttributeProto* a = FindAttribute(n, "value");
    if (a == nullptr || !a->has_t()) continue;
    if (auto d = FromTensor(a->t())) known[n.output(0)] = *d;
  }
  return known;
}

// Replaces node `n` by a Constant node of `value`.
void MakeConstant(onnx::NodeProto* n, const Data& value) {
  const std::string output = n->output(0);
  const std::string name = n->name();
  n->Clear();
  n->set_op_type("Constant");
  n->set_name(name);
  n->add_output(output);
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = ToTensor(output, value);
}

// Removes Constant nodes that nothing reads any more.
void DropUnreadConstants(onnx::GraphProto* graph) {
  std::set<std::string> read;
  for (const auto& n : graph->node()) read.insert(n.input().begin(), n.input().end());
  for (const auto& out : graph->output()) read.insert(out.name());
  auto* nodes = graph->mutable_node();
  for (int i = nodes->size() - 1; i >= 0; --i) {
    const onnx::NodeProto& n = nodes->Get(i);
    if (n.op_type() == "Constant" && n.output_size() == 1 && !read.count(n.output(0))) {
      nodes->DeleteSubrange(i, 1);
    }
  }
}

// Evaluates `value` and what it reads, depth first, from initializers and
// Constant nodes.
class WeightEvaluator {
 public:
  explicit WeightEvaluator(const onnx::GraphProto& graph) : graph_(graph) {
    for (const auto& t : graph.initializer()) initializers_[t.name()] = &t;
    for (int i = 0; i < graph.node_size(); ++i) {
      for (const std::string& out : graph.node(i).output()) producers_[out] = i;
    }
  }

  const Data* Value(const std::string& value, int depth) {
    auto known = values_.find(value);
    if (known != values_.end()) return &known->second;
    constexpr int kMaxDepth = 64;
    if (depth > kMaxDepth) return nullptr;
    Folded d;
    auto init = initializers_.find(value);
    if (init != initializers_.end()) {
      d = FromTensor(*init->second);
    } else if (auto p = producers_.find(value); p != producers_.end()) {
      d = Node(p->second, depth);
    }
    if (!d || static_cast<int64_t>(d->v.size()) != Count(d->dims)) return nullptr;
    return &(values_[value] = *d);
  }

  std::set<int> nodes;

 private:
  Folded Node(int index, int depth) {
    const onnx::NodeProto& n = graph_.node(index);
    if (n.output_size() != 1) return std::nullopt;
    Folded out;
    if (n.op_type() == "Constant") {
      const onnx::AttributeProto* a = FindAttribute(n, "value");
      if (a == nullptr || !a->has_t()) return std::nullopt;
      out = FromTensor(a->t());
    } else {
      std::vector<const Data*> in;
      for (const std::string& name : n.input()) {
        const Data* d = name.empty() ? nullptr : Value(name, depth + 1);
        if (!name.empty() && d == nullptr) return std::nullopt;
        in.push_back(d);
      }
      if (in.empty() || in[0] == nullptr) return std::nullopt;
      out = Evaluate(n, in);
    }
    if (out) nodes.insert(index);
    return out;
  }

  const onnx::GraphProto& graph_;
  std::map<std::string, const TensorProto*> initializers_;
  std::map<std::string, int> producers_;
  std::map<std::string, Data> values_;
};

}  // namespace

std::optional<EvaluatedTensor> EvaluateFromWeights(const onnx::GraphProto& graph,
                                                   const std::string& value) {
  WeightEvaluator evaluator(graph);
  const Data* d = evaluator.Value(value, 0);
  if (d == nullptr || d->type != TensorProto::FLOAT) return std::nullopt;
  EvaluatedTensor t;
  t.dims = d->dims;
  t.values.assign(d->v.begin(), d->v.end());
  t.nodes = evaluator.nodes;
  return t;
}

bool IsFoldableDataOperator(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Add",      "And",     "Cast",   "Concat",    "ConstantOfShape",
      "Div",      "Equal",   "Expand", "Gather",    "Greater",
      "Identity", "Less",    "Mul",    "Neg",       "Not",
      "Or",       "Pow",     "Range",  "Reshape",   "ScatterND",
      "Slice",    "Squeeze", "Sub",    "Transpose", "Unsqueeze",
      "Where"};
  return kOps.count(op) > 0;
}

bool FoldConstantData(onnx::ModelProto* model) {
  onnx::GraphProto* graph = model->mutable_graph();
  std::map<std::string, Data> known = ReadConstants(*graph);
  bool folded = false;
  for (auto& n : *graph->mutable_node()) {
    if (n.output_size() != 1 || !IsFoldableDataOperator(n.op_type())) continue;
    std::vector<const Data*> in;
    bool all = n.input_size() > 0;
    for (const std::string& name : n.input()) {
      auto it = name.empty() ? known.end() : known.find(name);
      if (!name.empty() && it == known.end()) all = false;
      in.push_back(it == known.end() ? nullptr : &it->second);
    }
    if (!all || in[0] == nullptr) continue;
    Folded value = Evaluate(n, in);
    if (!value || static_cast<int64_t>(value->v.size()) != Count(value->dims)) continue;
    if (getenv("SPILL_FOLD_DEBUG")) {
      fprintf(stderr, "%s ->", n.name().c_str());
      for (auto d : value->dims) fprintf(stderr, " %ld", (long)d);
      fprintf(stderr, " :");
      for (size_t i = 0; i < value->v.size() && i < 8; ++i) fprintf(stderr, " %g", value->v[i]);
      fprintf(stderr, "\n");
    }
    known[n.output(0)] = *value;
    MakeConstant(&n, *value);
    folded = true;
  }
  if (folded) DropUnreadConstants(graph);
  return folded;
}

}  // namespace spill
