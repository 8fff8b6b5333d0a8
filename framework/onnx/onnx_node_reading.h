// Reading the nodes of an ONNX graph as the importer's pattern matchers do
// (Swin's and MaxViT's chains): constant integer inputs, permutations,
// slices of constant bounds, the inferred shapes.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_NODE_READING_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_NODE_READING_H_

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "framework/onnx/onnx_model.h"

namespace spill {
namespace onnx_import {

// Input or output k of `n`, or "" where it has none: the matchers follow
// values through nodes of any operator, so a hostile graph's node with too
// few inputs or outputs ends a match instead of reading out of bounds.
inline const std::string& InputOf(const onnx::NodeProto& n, int k) {
  static const std::string kNone;
  return k >= 0 && k < n.input_size() ? n.input(k) : kNone;
}
inline const std::string& OutputOf(const onnx::NodeProto& n, int k) {
  static const std::string kNone;
  return k >= 0 && k < n.output_size() ? n.output(k) : kNone;
}

inline std::vector<int64_t> ConstInts(const OnnxGraph& g, const onnx::NodeProto& n, int k) {
  const onnx::TensorProto* t = k < n.input_size() ? g.Constant(n.input(k)) : nullptr;
  if (t == nullptr) return {};
  auto v = OnnxInts(*t, g.label);
  return v.ok() ? *v : std::vector<int64_t>{};
}

inline bool IsPerm(const onnx::NodeProto& n, const std::vector<int64_t>& perm) {
  return n.op_type() == "Transpose" && AttrInts(n, "perm", {}) == perm;
}

// One axis of a Slice of constant bounds, made positive against `extent`.
struct SliceAxis {
  int64_t axis = -1, begin = 0, end = 0, step = 1;
};

inline std::optional<SliceAxis> ReadSlice(const OnnxGraph& g, const onnx::NodeProto& n,
                                          int64_t rank) {
  if (n.op_type() != "Slice" || n.input_size() < 3) return std::nullopt;
  const std::vector<int64_t> starts = ConstInts(g, n, 1), ends = ConstInts(g, n, 2);
  std::vector<int64_t> axes = n.input_size() > 3 ? ConstInts(g, n, 3) : std::vector<int64_t>{0};
  std::vector<int64_t> steps = n.input_size() > 4 ? ConstInts(g, n, 4) : std::vector<int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1) {
    return std::nullopt;
  }
  auto dims = g.dims.find(n.input(0));
  SliceAxis s;
  s.axis = axes[0] < 0 ? axes[0] + rank : axes[0];
  if (dims == g.dims.end() || s.axis < 1 || s.axis >= rank || steps[0] < 1) return std::nullopt;
  const int64_t extent = dims->second[s.axis];
  auto clamp = [extent](int64_t v) {
    if (v < 0) v += extent;
    return std::max<int64_t>(0, std::min(v, extent));
  };
  s.begin = clamp(starts[0]);
  s.end = clamp(ends[0]);
  s.step = steps[0];
  return s;
}

inline int64_t Rank(const OnnxGraph& g, const std::string& value) {
  auto it = g.dims.find(value);
  return it == g.dims.end() ? 0 : static_cast<int64_t>(it->second.size());
}

inline std::vector<int64_t> DimsOrEmpty(const OnnxGraph& g, const std::string& value) {
  auto it = g.dims.find(value);
  return it == g.dims.end() ? std::vector<int64_t>{} : it->second;
}

// The dims after the first (the batch, or the batch merged with windows).
inline bool TailIs(const OnnxGraph& g, const std::string& value, const std::vector<int64_t>& tail) {
  const std::vector<int64_t> d = DimsOrEmpty(g, value);
  return d.size() == tail.size() + 1 && std::equal(tail.begin(), tail.end(), d.begin() + 1);
}

}  // namespace onnx_import
}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_NODE_READING_H_
