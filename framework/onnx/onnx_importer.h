// The ONNX importer's state, shared by its two halves: onnx_import.cc walks
// the graph (inputs, outputs, names, values read through) and
// onnx_import_layers.cc converts the nodes that become layers. Private to
// framework/onnx_import*.cc; the interface is framework/onnx/onnx_import.h.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_IMPORTER_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_IMPORTER_H_

#include <array>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "framework/onnx/onnx_import.h"

namespace spill {
namespace onnx_import {

// How an ONNX value's axes map onto the spill tensor (N, C, H, W) holding it.
enum class Layout {
  kNchw,              // as spill: (C, H, W), or a flattened (features) view
  kNhwc,              // channels last, (H, W, C): a Transpose [0, 2, 3, 1] of an NCHW value
  kGrouped,           // (groups, C / groups, H, W): a channel shuffle's first Reshape
  kGroupedTransposed  // (C / groups, groups, H, W): its Transpose, awaiting the last Reshape
};

// An ONNX value and where spill holds it.
struct Value {
  std::string ref;               // the layer whose output it is
  std::vector<int64_t> dims;     // its ONNX shape after the batch axis
  std::array<int64_t, 3> chw{};  // the spill tensor's C, H, W
  Layout layout = Layout::kNchw;

  // Laid out as ONNX says: C x H x W, not a flattened view of it.
  bool Spatial() const {
    return layout == Layout::kNchw && dims.size() == 3 && dims[0] == chw[0] && dims[1] == chw[1] &&
           dims[2] == chw[2];
  }
  // Channels last: H x W x C of the tensor's C x H x W.
  bool ChannelsLast() const {
    return layout == Layout::kNhwc && dims.size() == 3 && dims[0] == chw[1] && dims[1] == chw[2] &&
           dims[2] == chw[0];
  }
  // Channels where spill has them: spatial, or N x C with C the tensor's channels.
  bool Channels() const { return Spatial() || (dims.size() == 1 && chw[1] == 1 && chw[2] == 1); }
  // The ONNX axis (after the batch) holding the channels, or -1 for none:
  // spatial and N x C values have them first, channels-last values last.
  int ChannelAxis() const {
    if (Channels()) return 0;
    return ChannelsLast() ? 2 : -1;
  }
};

// A zero Pad folded into the AveragePool that reads it.
struct PendingPad {
  std::string source;  // the padded value
  int64_t h = 0, w = 0;
};

class Importer {
 public:
  explicit Importer(const OnnxGraph& g) : g_(g) {}
  StatusOr<ImportedNet> Run();

 private:
  Status Input();
  Status Convert(int node);
  Status Output();

  // onnx_import_layers.cc
  Status Conv(int node);
  Status BatchNorm(int node);
  Status Activation(int node);
  Status Pool(int node);
  Status GlobalPool(int node);
  Status Gemm(int node);
  Status MatMul(int node);
  Status FullyConnected(int node, const Value& x, const onnx::TensorProto& w, bool transposed,
                        const onnx::TensorProto* bias, int out_node);
  Status Add(int node);
  Status Concat(int node);
  Status Dropout(int node);
  Status Lrn(int node);
  Status Pad(int node);
  Status ReadThrough(int node);
  Status Reshape(int node);

  // onnx_import_vision.cc: the operators of mobile and modern networks;
  // false when `node` is none of them.
  StatusOr<bool> ConvertVision(int node);
  Status Clip(int node);
  Status HardSigmoid(int node);
  Status Sigmoid(int node);
  Status Mul(int node);
  Status Transpose(int node);
  Status ReduceMean(int node);
  Status Slice(int node);
  Status Split(int node);
  Status Resize(int node);
  Status ConvTranspose(int node);
  Status LayerNormalization(int node);
  // A layer of `type` reading one value, elementwise: its output keeps the
  // input's layout.
  Status Elementwise(int node, const std::string& type, const std::string& attributes,
                     int out_node);
  // Sub and Div by a constant (a per-channel shift or scale).
  Status DivOrSub(int node);
  // A product or sum of two computed values: of one shape, or a map and
  // per-channel values (multiply, add, broadcast_add).
  Status Broadcast(int node, bool multiply, const Value& a, const Value& b);
  // A scale layer reading `x`: gamma per channel, and beta when given.
  Status ScaleLayer(int node, const Value& x, const std::vector<float>& gamma,
                    const std::vector<float>* beta, int out_node, const std::string& weight);
  // Per-channel values of a constant broadcast against `x`, or an error.
  StatusOr<std::vector<float>> ChannelConstant(int node, const Value& x,
                                               const onnx::TensorProto& t) const;
  // A 1x1 convolution from a channels-last MatMul by a constant.
  Status ChannelsLastMatMul(int node, const Value& x, const onnx::TensorProto& w);
  // For windows padded more on one side (asymmetric pads, auto_pad SAME):
  // a pad layer (filled with `value`, named after `layer`) that takes the
  // excess, leaving `pads` (top, left, bottom, right) symmetric; returns the
  // layer to read.
  std::string AsymmetricPad(const std::string& layer, const Value& x, std::array<int64_t, 4>* pads,
                            float value);
  // A slice layer of channels [begin, end) of `x` for output `k` of `node`.
  Status ChannelSlice(int node, int k, const Value& x, int64_t begin, int64_t end);

  // onnx_import_patterns.cc: the chains of elementwise operators PyTorch
  // writes for one function, each recognized from its first node and
  // converted as one layer (false: not the pattern).
  StatusOr<bool> LayerNormPattern(int node);
  StatusOr<bool> GeluPattern(int node);
  // x * f(x) with f the node (Sigmoid: silu; HardSigmoid of 1/6, 1/2:
  // hard_swish); the Mul reading both, or -1.
  int SelfGate(int node) const;
  // The one node reading `value`, if it is of operator `op`; else -1.
  int OnlyReader(const std::string& value, const std::string& op) const;
  // A float constant holding one value.
  bool ScalarConstant(const std::string& value, float* out) const;
  // The other input of a two-input node, given one of them.
  std::string OtherInput(int node, const std::string& one) const;
  // Registers output `k` of `node` as the tensor `v` (kept in its layout).
  Status ProduceValue(int node, int k, Value v);

  // Helpers.
  Status Fail(int node, const std::string& message) const;
  StatusOr<const Value*> In(int node, int k) const;
  StatusOr<const onnx::TensorProto*> ConstIn(int node, int k) const;
  bool HasInput(int node, int k) const;
  Status OnlyFirstOutput(int node) const;
  // The inferred shape of `value`, static after the batch axis.
  StatusOr<std::vector<int64_t>> DimsOf(int node, const std::string& value) const;
  // Registers the node's output 0 as a new spill tensor produced by `layer`;
  // an elementwise layer's tensor is laid out as its input `like`.
  Status Produce(int node, const std::string& layer, const Value* like = nullptr);
  // Named after the node's weight input `weight` ("" for none), else the node.
  std::string LayerName(int node, const std::string& weight);
  void Emit(const std::string& name, const std::string& type,
            const std::vector<std::string>& inputs, const std::string& attributes);
  Status Weight(int node, const std::string& layer, const std::string& param,
                const onnx::TensorProto& tensor, const std::vector<int64_t>& shape);
  // The node that reads `value` when exactly one node does, else -1.
  int SoleConsumer(const std::string& value) const;

  const OnnxGraph& g_;
  std::map<std::string, Value> values_;
  std::map<std::string, PendingPad> pads_;
  std::set<int> fused_;  // nodes already converted as part of another
  std::set<std::string> names_;
  std::ostringstream layers_;
  ImportedNet net_;
};

// "[3, 3]"
std::string Pair(int64_t a, int64_t b);

}  // namespace onnx_import
}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_IMPORTER_H_
