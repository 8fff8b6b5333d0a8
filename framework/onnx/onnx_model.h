// Reading an ONNX model (Debian's libonnx and protobuf) into a checked graph
// for the importer (framework/onnx/onnx_import.h).
//
// Everything about the file is checked here, before a layer is written: the
// protobuf parses (a truncated or foreign file does not), the default-domain
// opset is one spill reads (11 to 17), every node's operator is one the
// importer converts (all the others are listed in one error, each with its
// node's name and position), tensors hold float32 (or int64 shape) data,
// in the file or in external data files beside it
// (framework/onnx/onnx_external_data.h), and ONNX's shape inference gives every value a static
// shape apart from the batch axis - spill plans memory from shapes, so a
// dimension that is symbolic or unknown is an error naming the value.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_MODEL_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_MODEL_H_

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/base/status.h"

namespace spill {

constexpr int kMinOnnxOpset = 11;  // the opsets the importer reads
constexpr int kMaxOnnxOpset = 17;
constexpr size_t kMaxOnnxFileBytes = size_t{1} << 31;  // protobuf's own limit (2 GiB)
// A dimension that is symbolic or unknown after shape inference (a static
// one that is zero or negative is invalid, not dynamic).
constexpr int64_t kDynamicOnnxDim = INT64_MIN;

// The operators the importer converts.
const std::vector<std::string>& SupportedOnnxOperators();

struct OnnxGraph {
  onnx::ModelProto model;
  std::string label;  // the file, for messages
  int opset = 0;
  // Initializers, Constant nodes' values and Identity copies of either.
  std::map<std::string, const onnx::TensorProto*> constants;
  // Every value's shape as inferred, kDynamicOnnxDim for an unknown dimension.
  std::map<std::string, std::vector<int64_t>> dims;
  // Values holding the batch elsewhere than alone on their first axis (a
  // multiple of it merged with other axes, or on a later axis): per axis,
  // k where it holds k x the batch, else 0.
  std::map<std::string, std::vector<int64_t>> batch_axes;
  // Which nodes read a value.
  std::map<std::string, std::vector<int>> consumers;

  const onnx::GraphProto& graph() const { return model.graph(); }
  // "node 12 '/layer1/Conv' (Conv)", for messages.
  std::string Where(int node) const;
  const onnx::TensorProto* Constant(const std::string& value) const;
};

StatusOr<std::unique_ptr<OnnxGraph>> ReadOnnxFile(const std::string& path);
// `bytes` is a serialized ModelProto; `label` names it in messages;
// external data is read from `model_dir` (none without one).
StatusOr<std::unique_ptr<OnnxGraph>> ParseOnnxModel(const std::string& bytes,
                                                    const std::string& label,
                                                    const std::string& model_dir = "");

// A tensor's values as floats (FLOAT) or integers (INT64 / INT32); other
// types are errors naming the tensor.
StatusOr<std::vector<float>> OnnxFloats(const onnx::TensorProto& tensor, const std::string& label);
StatusOr<std::vector<int64_t>> OnnxInts(const onnx::TensorProto& tensor, const std::string& label);

// Attributes with their ONNX defaults.
const onnx::AttributeProto* FindAttribute(const onnx::NodeProto& node, const std::string& name);
int64_t AttrInt(const onnx::NodeProto& node, const std::string& name, int64_t fallback);
float AttrFloat(const onnx::NodeProto& node, const std::string& name, float fallback);
std::string AttrString(const onnx::NodeProto& node, const std::string& name,
                       const std::string& fallback);
std::vector<int64_t> AttrInts(const onnx::NodeProto& node, const std::string& name,
                              const std::vector<int64_t>& fallback);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_MODEL_H_
