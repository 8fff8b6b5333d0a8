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

// An ONNX value and where spill holds it.
struct Value {
  std::string ref;               // the layer whose output it is
  std::vector<int64_t> dims;     // its ONNX shape after the batch axis
  std::array<int64_t, 3> chw{};  // the spill tensor's C, H, W

  // Laid out as ONNX says: C x H x W, not a flattened view of it.
  bool Spatial() const {
    return dims.size() == 3 && dims[0] == chw[0] && dims[1] == chw[1] && dims[2] == chw[2];
  }
  // Channels where spill has them: spatial, or N x C with C the tensor's channels.
  bool Channels() const { return Spatial() || (dims.size() == 1 && chw[1] == 1 && chw[2] == 1); }
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
