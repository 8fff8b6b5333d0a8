// Folding the constant data of an ONNX graph: tensors computed from
// constants alone.
//
// Exporters write some tensors as the computation that builds them rather
// than as their values: torchvision's Swin computes its shifted windows'
// attention mask in forward (x.new_zeros, slice assignments, a permute and
// masked_fill), which torch.onnx.export writes as ConstantOfShape, Range,
// ScatterND, Reshape, Transpose, Sub, Equal, Not and Where on constants.
// FoldConstantData evaluates every node whose inputs are all constants -
// Constant nodes, integer and boolean initializers, and the values folded
// before it - and replaces it with a Constant node holding its value, so the
// importer sees the mask itself. Float initializers are the model's weights
// and are never folded through: a weight stays a weight (trainable) in
// spill. Values of more than kMaxFoldedDataValues are left as computed.
// Nothing here reads a value's shape (Shape is the shape folding's, in
// framework/onnx/onnx_shape_folding.h), so nothing that depends on the batch
// is folded.
#ifndef SPILL_FRAMEWORK_ONNX_ONNX_DATA_FOLDING_H_
#define SPILL_FRAMEWORK_ONNX_ONNX_DATA_FOLDING_H_

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace spill {

constexpr int64_t kMaxFoldedDataValues = int64_t{1} << 22;

// The operators folded when their inputs are constants. A node of one of
// them that reads a computed value stays as it is (the importer converts it,
// or says it cannot).
bool IsFoldableDataOperator(const std::string& op);

// Folds what it can; returns whether any node was folded.
bool FoldConstantData(onnx::ModelProto* model);

// A tensor the importer computes itself from weights and constants.
struct EvaluatedTensor {
  std::vector<int64_t> dims;
  std::vector<float> values;
  std::set<int> nodes;  // the nodes computing it (Constants included)
};

// The float value of `value` computed from the graph's initializers -
// weights included - and Constant nodes alone, through the operators
// folded above and MatMul, Relu, Sigmoid, Exp and Clip: what a network
// computes from its parameters only, as Swin V2's relative position bias
// (a small MLP of constant coordinates) and its qkv bias with the keys'
// part zeroed. nullopt when it reads a computed value or another operator.
std::optional<EvaluatedTensor> EvaluateFromWeights(const onnx::GraphProto& graph,
                                                   const std::string& value);

}  // namespace spill

#endif  // SPILL_FRAMEWORK_ONNX_ONNX_DATA_FOLDING_H_
