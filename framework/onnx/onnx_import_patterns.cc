// The chains of elementwise operators PyTorch 1.13 writes for one function,
// recognized and converted as one spill layer:
//
//   layer norm    ReduceMean -> Sub -> Pow 2 -> ReduceMean -> Add eps -> Sqrt
//                 -> Div [-> Mul gamma -> Add beta]            (before opset 17)
//   GELU (erf)    Div sqrt(2) -> Erf -> Add 1 -> Mul x -> Mul 0.5
//   SiLU          Sigmoid -> Mul x                 (found from the Sigmoid)
//   hard swish    HardSigmoid(1/6, 1/2) -> Mul x   (before opset 14)
//
// Each matcher starts at the chain's first node, checks every link (the
// operator, the constant, that no other node reads an intermediate value)
// and marks the nodes it converts; a chain that does not match is left to
// the operators' own conversions, which refuse what spill cannot compute.
#include <cmath>

#include "framework/onnx/onnx_importer.h"

namespace spill {
namespace onnx_import {

int Importer::OnlyReader(const std::string& value, const std::string& op) const {
  const int reader = SoleConsumer(value);
  return reader >= 0 && g_.graph().node(reader).op_type() == op ? reader : -1;
}

bool Importer::ScalarConstant(const std::string& value, float* out) const {
  const onnx::TensorProto* t = g_.Constant(value);
  if (t == nullptr) return false;
  auto values = OnnxFloats(*t, g_.label);
  if (!values.ok() || values->size() != 1) return false;
  *out = (*values)[0];
  return true;
}

std::string Importer::OtherInput(int node, const std::string& one) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  if (n.input_size() != 2) return "";
  if (n.input(0) == one) return n.input(1);
  return n.input(1) == one ? n.input(0) : "";
}

int Importer::SelfGate(int node) const {
  const onnx::NodeProto& n = g_.graph().node(node);
  const int mul = OnlyReader(n.output(0), "Mul");
  if (mul < 0 || OtherInput(mul, n.output(0)) != n.input(0)) return -1;
  return mul;
}

StatusOr<bool> Importer::LayerNormPattern(int node) {
  const onnx::GraphProto& g = g_.graph();
  const onnx::NodeProto& mean = g.node(node);
  auto x = values_.find(mean.input(0));
  const std::vector<int64_t> axes = AttrInts(mean, "axes", {});
  if (x == values_.end() || axes.size() != 1 || AttrInt(mean, "keepdims", 1) != 1) return false;
  const int sub = OnlyReader(mean.output(0), "Sub");
  if (sub < 0 || g.node(sub).input(0) != mean.input(0)) return false;
  const std::string& centred = g.node(sub).output(0);
  auto readers = g_.consumers.find(centred);
  if (readers == g_.consumers.end() || readers->second.size() != 2) return false;
  int pow = readers->second[0], div = readers->second[1];
  if (g.node(pow).op_type() != "Pow") std::swap(pow, div);
  float two = 0, eps = 0;
  if (g.node(pow).op_type() != "Pow" || g.node(div).op_type() != "Div" ||
      g.node(pow).input(0) != centred || !ScalarConstant(g.node(pow).input(1), &two) || two != 2 ||
      g.node(div).input(0) != centred) {
    return false;
  }
  const int variance = OnlyReader(g.node(pow).output(0), "ReduceMean");
  if (variance < 0 || AttrInts(g.node(variance), "axes", {}) != axes) return false;
  const int add = OnlyReader(g.node(variance).output(0), "Add");
  if (add < 0 || !ScalarConstant(OtherInput(add, g.node(variance).output(0)), &eps)) return false;
  const int sqrt = OnlyReader(g.node(add).output(0), "Sqrt");
  if (sqrt < 0 || g.node(div).input(1) != g.node(sqrt).output(0)) return false;
  // The normalization matches: from here on a mismatch is an error.
  std::vector<int> chain = {node, sub, pow, variance, add, sqrt, div};
  int last = div;
  const onnx::TensorProto *gamma = nullptr, *beta = nullptr;
  const int mul = OnlyReader(g.node(div).output(0), "Mul");
  if (mul >= 0 && (gamma = g_.Constant(OtherInput(mul, g.node(div).output(0)))) != nullptr) {
    chain.push_back(last = mul);
    const int shift = OnlyReader(g.node(mul).output(0), "Add");
    if (shift >= 0 && (beta = g_.Constant(OtherInput(shift, g.node(mul).output(0)))) != nullptr) {
      chain.push_back(last = shift);
    }
  }
  const Value v = x->second;
  const int64_t rank = static_cast<int64_t>(v.dims.size()) + 1;
  const int64_t axis = axes[0] < 0 ? axes[0] + rank : axes[0];
  if (v.ChannelAxis() < 0 || axis != v.ChannelAxis() + 1) {
    return Fail(node, "a layer norm over axis " + std::to_string(axes[0]) + " of a tensor of " +
                          "rank " + std::to_string(rank) +
                          " (not its channels): spill's layer_norm normalizes each pixel over " +
                          "its channels (axis 1, or the last axis of a channels-last view)");
  }
  if (!(eps > 0 && eps <= 1)) return Fail(add, "epsilon must be in (0, 1]");
  const int64_t c = v.chw[0];
  std::vector<float> ones(c, 1.0f), zeros(c, 0.0f);
  std::vector<float> scale = ones, shift = zeros;
  if (gamma != nullptr) {
    SPILL_ASSIGN_OR_RETURN(scale, ChannelConstant(mul, v, *gamma));
  }
  if (beta != nullptr) {
    SPILL_ASSIGN_OR_RETURN(shift, ChannelConstant(chain.back(), v, *beta));
  }
  const std::string name =
      LayerName(gamma != nullptr ? mul : node,
                gamma != nullptr ? OtherInput(mul, g.node(div).output(0)) : "");
  net_.params["params/" + name + "/gamma"] = NpyArray::Floats({1, c, 1, 1}, scale.data());
  net_.params["params/" + name + "/beta"] = NpyArray::Floats({1, c, 1, 1}, shift.data());
  fused_.insert(chain.begin(), chain.end());
  Emit(name, "layer_norm", {v.ref}, "eps: " + ShortestFloat(eps));
  Value out = v;
  out.ref = name;
  SPILL_RETURN_IF_ERROR(ProduceValue(last, 0, out));
  return true;
}

StatusOr<bool> Importer::GeluPattern(int node) {
  const onnx::GraphProto& g = g_.graph();
  const onnx::NodeProto& div = g.node(node);
  constexpr float kSqrt2 = 1.41421356f, kTolerance = 1e-6f;
  float root = 0, one = 0, half = 0;
  if (div.input_size() != 2 || !ScalarConstant(div.input(1), &root) ||
      std::fabs(root - kSqrt2) > kTolerance) {
    return false;
  }
  const std::string& x = div.input(0);
  const int erf = OnlyReader(div.output(0), "Erf");
  if (erf < 0) return false;
  const int add = OnlyReader(g.node(erf).output(0), "Add");
  if (add < 0 || !ScalarConstant(OtherInput(add, g.node(erf).output(0)), &one) || one != 1) {
    return false;
  }
  const int mul = OnlyReader(g.node(add).output(0), "Mul");
  if (mul < 0 || OtherInput(mul, g.node(add).output(0)) != x) return false;
  const int halve = OnlyReader(g.node(mul).output(0), "Mul");
  if (halve < 0 || !ScalarConstant(OtherInput(halve, g.node(mul).output(0)), &half) ||
      half != 0.5f) {
    return false;
  }
  fused_.insert({node, erf, add, mul, halve});
  SPILL_RETURN_IF_ERROR(Elementwise(node, "gelu", "", halve));
  return true;
}

}  // namespace onnx_import
}  // namespace spill
